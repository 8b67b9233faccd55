import OscarBase
import OscarCluster
import OscarMembership
import OscarRuntime
import Synchronization

/// An application's own chaos workload and checks, in the manner of
/// Jepsen's client, generator and checker, small: the operations every node
/// invokes while `oscar chaos --exec` injects faults, each recorded to the
/// run's history as an invocation and one outcome, and the checks that read
/// that history afterwards.
///
/// An operation ends `.ok` (it happened, with a value for the checks),
/// `.fail` (it certainly did not happen) or `.unknown` (it may have: a
/// timeout, a lost connection). A thrown error counts as unknown, the safe
/// reading. The built-in workload of `oscar chaos` is one user of this type.
public struct ChaosOperations: Sendable {
    public struct Operation: Sendable {
        public var name: String
        /// How often it is drawn, relative to the others' weights.
        public var weight: Double
        /// Recorded with the invocation: the generic ask check flags an
        /// outcome that comes later than this (plus a grace).
        public var timeout: Duration
        public var run: @Sendable (Context) async throws -> Outcome

        public init(
            _ name: String, weight: Double = 1, timeout: Duration = .seconds(2),
            _ run: @escaping @Sendable (Context) async throws -> Outcome
        ) {
            self.name = name
            self.weight = weight
            self.timeout = timeout
            self.run = run
        }
    }

    public enum Outcome: Sendable, Equatable {
        /// It happened; `value` is recorded for the checks.
        case ok(String? = nil)
        /// It certainly did not happen.
        case fail(String)
        /// It may or may not have happened.
        case unknown(String)

        /// The outcome of an ask or a distributed call, with `what` (the
        /// operation and its arguments, as the checks will read them back)
        /// leading its text:
        /// - `.ok`: `what`, then what `ask` returned (nothing for `Void`);
        /// - `.unknown`: it timed out or its node became unreachable, or it
        ///   threw something other than an `AskError` (such as a distributed
        ///   actor's own error): it may have happened;
        /// - `.fail`: any other `AskError` (refused, not handled, not found):
        ///   it did not happen.
        ///
        /// A failure's text is `what`, then the error in parentheses, so the
        /// words of `what` stay where a check looks for them.
        public static func asking<Value>(_ what: String = "", _ ask: () async throws -> Value) async -> Outcome {
            func text(_ parts: String...) -> String { parts.filter { !$0.isEmpty }.joined(separator: " ") }
            do {
                let value = try await ask()
                let said = Value.self == Void.self ? "" : "\(value)"
                let recorded = text(what, said)
                return .ok(recorded.isEmpty ? nil : recorded)
            } catch let error as AskError {
                switch error {
                case .timeout, .nodeUnreachable: return .unknown(text(what, "(\(error))"))
                default: return .fail(text(what, "(\(error))"))
                }
            } catch {
                return .unknown(text(what, "(\(error))"))
            }
        }
    }

    /// What an operation may use.
    public struct Context: Sendable {
        public let node: ClusterNode
        /// The operation's number, unique within this node process.
        public let op: Int
        /// The members up and reachable in this node's latest view (this
        /// node alone before the first view).
        public let members: [NodeAddress]
        /// A draw from the run's seeded generator, for choices.
        public let draw: UInt64

        /// The ref of `path` on `member` (this node when nil).
        public func ref(_ path: String, on member: NodeAddress? = nil) -> ActorRef {
            node.system.ref(for: ActorAddress(node: member ?? node.address, path: path))
        }

        /// One of `members`, chosen by `draw`.
        public var randomMember: NodeAddress {
            members.isEmpty ? node.address : members[Int(draw % UInt64(members.count))]
        }
    }

    /// A check over the whole history: its name, and what it found wrong
    /// (nothing: it passed).
    public struct Check: Sendable {
        public var name: String
        public var run: @Sendable (ChaosHistory) -> [String]

        public init(_ name: String, _ run: @escaping @Sendable (ChaosHistory) -> [String]) {
            self.name = name
            self.run = run
        }
    }

    public var operations: [Operation]
    public var checks: [Check]
    /// One operation is drawn every `interval`, while fewer than
    /// `maxInFlight` are in flight.
    public var interval = Duration.milliseconds(100)
    public var maxInFlight = 32

    public init(operations: [Operation], checks: [Check] = []) {
        self.operations = operations
        self.checks = checks
    }

    // MARK: - Running

    /// Invokes operations on `node` until `until` (monotonic ns), recording
    /// each; returns when the last one has ended.
    package func run(
        on node: ClusterNode, until: UInt64, seed: UInt64, view: ChaosMembershipWatch, recorder: ChaosRecorder
    ) async {
        guard !operations.isEmpty else { return }
        var random = SplitMix64(seed: seed &* 31 &+ UInt64(node.address.port))
        let total = operations.reduce(0) { $0 + max($1.weight, 0) }
        final class InFlight: Sendable { let count = Atomic<Int>(0) }
        let inFlight = InFlight()
        await withTaskGroup(of: Void.self) { group in
            var op = 0
            while MonotonicTime.now() < until {
                try? await Task.sleep(for: interval)  // the workload's pace
                guard inFlight.count.load(ordering: .relaxed) < maxInFlight else { continue }
                op += 1
                var pick = random.unit() * total
                let operation =
                    operations.first {
                        pick -= max($0.weight, 0); return pick < 0
                    } ?? operations[0]
                let context = Context(
                    node: node, op: op, members: view.upMembers(or: node.address), draw: random.next())
                let (number, name) = (op, operation.name)
                recorder.record(
                    .invoke, op: number, target: name, value: Int(operation.timeout.nanoseconds / 1_000_000))
                inFlight.count.add(1, ordering: .relaxed)
                group.addTask {
                    let outcome: Outcome
                    do {
                        outcome = try await operation.run(context)
                    } catch {
                        outcome = .unknown("\(error)")
                    }
                    switch outcome {
                    case .ok(let value): recorder.record(.ok, op: number, target: name, detail: value)
                    case .fail(let why): recorder.record(.fail, op: number, target: name, detail: why)
                    case .unknown(let why): recorder.record(.timeout, op: number, target: name, detail: why)
                    }
                    inFlight.count.subtract(1, ordering: .relaxed)
                }
            }
        }
    }

    /// Runs every check over `history`.
    public func check(_ history: ChaosHistory) -> [ChaosChecker.Check] {
        checks.map { ChaosChecker.Check(name: $0.name, findings: $0.run(history)) }
    }
}

/// A chaos run's merged history, as the checks read it.
public struct ChaosHistory: Sendable {
    public let events: [ChaosEvent]

    public init(_ events: [ChaosEvent]) { self.events = events.sorted { $0.t < $1.t } }

    /// One operation: its invocation and, if it ended, its outcome.
    public struct Operation: Sendable, Equatable {
        public var node: String
        public var uid: UInt64
        public var op: Int
        public var name: String
        public var invokedAt: UInt64
        /// `.ok`, `.fail` or `.timeout` (unknown); nil when it never ended
        /// (its process was killed first): unknown too.
        public var outcome: ChaosEvent.Kind?
        public var endedAt: UInt64?
        /// The value of an `.ok`, the reason of a failure.
        public var detail: String?

        /// It may have happened: ok, unknown, or never ended.
        public var mayHaveHappened: Bool { outcome != .fail }
    }

    /// Every operation named `name` (every operation when nil), in the
    /// order of their invocation; matched as the checker and the report
    /// match them (`ChaosAsk`).
    public func operations(named name: String? = nil) -> [Operation] {
        ChaosAsk.all(in: events).compactMap { ask in
            guard let op = ask.invoke.op, let target = ask.invoke.target, name == nil || target == name else {
                return nil
            }
            let end = ask.outcomes.first
            return Operation(
                node: ask.invoke.node, uid: ask.invoke.uid ?? 0, op: op, name: target, invokedAt: ask.invoke.t,
                outcome: end?.kind, endedAt: end?.t, detail: end?.detail)
        }
    }
}
