import Distributed
import OscarBase
import OscarCBOR
import OscarCluster
import OscarDistributed
import OscarMembership
import OscarRemote
import OscarRuntime
import OscarTestKit

/// The actors every `oscar` node hosts, so a cluster can be tried from the
/// terminal: `echo`, `counter`, `kv`, and the `workers` cluster pool.
public enum Demo {
    /// Replies with its text.
    public struct Echo: Message {
        public typealias Reply = EchoReply
        public var text: String
        public init(text: String) { self.text = text }
    }

    public struct EchoReply: Codable, Sendable, Equatable {
        public var text: String
        /// The node that answered.
        public var node: String
    }

    /// Replies after `ms` milliseconds (at most a minute): for trying
    /// timeouts and failures from the terminal.
    public struct Sleep: Message {
        public typealias Reply = EchoReply
        public var ms: Int
        public init(ms: Int) { self.ms = ms }
    }

    /// Adds `by` to the counter. A sum past `Int`'s range fails the ask with
    /// `DemoError.overflow` and leaves the count as it was.
    public struct Increment: Message {
        public var by: Int
        public init(by: Int = 1) { self.by = by }
    }

    /// The counter's value.
    public struct GetCount: Message {
        public typealias Reply = Int
        public init() {}
    }

    /// Stores a value under a key.
    public struct Put: Message {
        public var key: String
        public var value: String
        public init(key: String, value: String) {
            self.key = key
            self.value = value
        }
    }

    /// The value under a key, or nil.
    public struct Get: Message {
        public typealias Reply = String?
        public var key: String
        public init(key: String) { self.key = key }
    }

    /// Work for the `workers` pool; the reply names the routee that did it.
    /// Idempotent: a pool retries it once elsewhere if its node is lost.
    public struct Work: IdempotentMessage {
        public typealias Reply = WorkDone
        public var id: Int
        public init(id: Int) { self.id = id }
    }

    public struct WorkDone: Codable, Sendable, Equatable {
        public var id: Int
        /// The node that did the work.
        public var node: String
        /// The routee that did it, such as /user/workers/1.
        public var worker: String
    }

    final class Worker: Reactor {
        package var node = ""
        package var path = ""
        static func reactions(_ r: inout Reactions<Worker>) {
            r.on(Work.self, result: { me, m in WorkDone(id: m.id, node: me.node, worker: me.path) })
        }
        package func started(_ context: ActorContext) {
            node = context.node.description
            path = context.ref.address.path
        }
    }

    final class EchoActor: Reactor {
        package var node = ""
        static func reactions(_ r: inout Reactions<EchoActor>) {
            r.on(Echo.self, result: { me, m in EchoReply(text: m.text, node: me.node) })
            r.on(
                Sleep.self,
                future: { me, m in
                    try await Task.sleep(for: .milliseconds(min(max(m.ms, 0), 60_000)))
                    return EchoReply(text: "slept \(m.ms) ms", node: me.node)
                })
        }
        package func started(_ context: ActorContext) { node = context.node.description }
    }

    final class CounterActor: Reactor {
        package var count = 0
        static func reactions(_ r: inout Reactions<CounterActor>) {
            r.on(Increment.self, do: { me, m in me.count = try DemoError.checkedSum(me.count, m.by) })
            r.on(GetCount.self, result: { me, _ in me.count })
        }
    }

    final class KVActor: Reactor {
        package var store: [String: String] = [:]
        static func reactions(_ r: inout Reactions<KVActor>) {
            r.on(Put.self, do: { me, m in me.store[m.key] = m.value })
            r.on(Get.self, result: { me, m in me.store[m.key] })
        }
    }

    /// Declares the demo actors in a system being built.
    public static func declare(in actors: inout ActorSystemBuilder) {
        actors.nodeSingleton("echo") { EchoActor() }
        actors.nodeSingleton("counter") { CounterActor() }
        actors.nodeSingleton("kv") { KVActor() }
        actors.clusterPool("workers", ClusterPoolSettings(perNode: 2)) { Worker() }
    }
}

extension Demo {
    /// A distributed actor every `oscar node` hosts at `/user/greeter`, for
    /// trying distributed calls from the terminal:
    /// `oscar ask oscar://127.0.0.1:7000/user/greeter .greet '["Ada"]'`.
    public distributed actor Greeter {
        public typealias ActorSystem = ClusterSystem
        public nonisolated var unownedExecutor: UnownedSerialExecutor { actorSystem.executor(for: id) }

        private var greeted = 0

        /// A greeting naming the node that made it.
        public distributed func greet(_ name: String) -> String {
            greeted &+= 1
            return "hello, \(name), from \(actorSystem.node.address) (greeting \(greeted))"
        }

        /// `a + b`; a sum past `Int`'s range throws `DemoError.overflow`.
        public distributed func add(_ a: Int, _ b: Int) throws -> Int { try DemoError.checkedSum(a, b) }

        /// Throws for a negative amount, to try errors.
        public distributed func check(_ amount: Int) throws -> Int {
            guard amount >= 0 else { throw DemoError.negative(amount) }
            return amount
        }
    }

    /// Why a demo actor refused a request. Arguments come from whoever sends
    /// them (the CLI, another node), so every check is a thrown error, never
    /// a trap: one bad request must not end the node.
    public enum DemoError: Error, Codable, Sendable, Hashable, CustomStringConvertible {
        case negative(Int)
        /// `a + b` is outside `Int.min...Int.max`.
        case overflow(Int, Int)

        public var description: String {
            switch self {
            case .negative(let n): "\(n) is negative"
            case .overflow(let a, let b): "\(a) + \(b) is outside the range of a 64-bit integer"
            }
        }

        /// `a + b`, or `.overflow` instead of a trap.
        static func checkedSum(_ a: Int, _ b: Int) throws(DemoError) -> Int {
            let (sum, overflow) = a.addingReportingOverflow(b)
            guard !overflow else { throw .overflow(a, b) }
            return sum
        }
    }

    /// Hosts the demo greeter on `node`; keep the result for as long as it
    /// should answer.
    public static func hostGreeter(on node: ClusterNode) -> (ClusterSystem, Greeter) {
        let system = ClusterSystem(node: node)
        return (system, system.named("greeter") { Greeter(actorSystem: system) })
    }
}
