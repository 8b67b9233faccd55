import OscarBase
import OscarCBOR
import OscarCluster
import OscarDistributed
import OscarMembership
import OscarRemote
import OscarRuntime

/// A list of faults at virtual times, for the simulator: what a property
/// search generates from a seed, what it shrinks to a minimal reproduction,
/// and what a chaos run's plan (`NemesisPlan`) becomes when replayed on the
/// simulator.
public struct FaultSchedule: Sendable, Equatable, CustomStringConvertible {
    public enum Fault: Sendable, Equatable, CustomStringConvertible {
        /// Each group cut off from every other, both ways. Nodes in no group
        /// keep their links.
        case partition([[Int]])
        /// `node` and each of `peers` cut off from each other, both ways,
        /// while the peers still reach everyone else: a partial, intransitive
        /// partition (A reaches B, B reaches C, A does not reach C).
        case isolate(Int, from: [Int])
        /// Messages from `from` to `to` dropped; the other way still works.
        case block(from: Int, to: Int)
        /// Every link restored, loss back to zero.
        case heal
        /// Frozen for `seconds` (SIGSTOP, then SIGCONT).
        case pause(Int, seconds: Double)
        /// SIGKILL.
        case kill(Int)
        /// Started again as a new incarnation, if killed or stopped.
        case restart(Int)
        /// A graceful leave.
        case leave(Int)
        /// This fraction of all messages dropped from now on.
        case loss(Double)

        public var description: String {
            switch self {
            case .partition(let groups): "partition " + groups.map { "\($0)" }.joined(separator: " | ")
            case .isolate(let node, let peers): "isolate \(node) from \(peers) (both ways)"
            case .block(let from, let to): "block \(from) → \(to) (one way)"
            case .heal: "heal"
            case .pause(let node, let seconds): "pause \(node) for \(Self.format(seconds)) s"
            case .kill(let node): "kill \(node)"
            case .restart(let node): "restart \(node)"
            case .leave(let node): "leave \(node)"
            case .loss(let rate): "loss \(Int((rate * 100).rounded())) %"
            }
        }

        static func format(_ seconds: Double) -> String {
            let tenths = Int((seconds * 10).rounded())
            return "\(tenths / 10).\(tenths % 10)"
        }
    }

    public struct Step: Sendable, Equatable {
        /// Seconds after the cluster formed.
        public var at: Double
        public var fault: Fault
    }

    public var steps: [Step]

    public init(steps: [Step]) { self.steps = steps.sorted { $0.at < $1.at } }

    public var description: String {
        steps.map { "  \(Fault.format($0.at).leftPadded(to: 6)) s  \($0.fault)" }.joined(separator: "\n")
    }

    /// A random schedule over `nodes` nodes: `count` faults in
    /// `[0, window)`, of every kind, then a heal at `window`.
    public static func random(nodes: Int, seed: UInt64, count: Int = 10, window: Double = 60) -> FaultSchedule {
        var random = SplitMix64(seed: seed)
        func below(_ n: Int) -> Int { Int(random.next() % UInt64(max(n, 1))) }
        func someNodes(_ max: Int) -> [Int] {
            let shuffled = Array(0..<nodes).shuffled(using: &random)
            return Array(shuffled.prefix(1 + below(max))).sorted()
        }
        var steps: [Step] = []
        for _ in 0..<count {
            let at = random.unit() * window
            let fault: Fault
            switch below(12) {
            case 0, 1, 2:
                let side = someNodes(nodes - 1)
                fault = .partition([side, (0..<nodes).filter { !side.contains($0) }])
            case 3, 4:
                let node = below(nodes)
                let peers = someNodes(nodes - 1).filter { $0 != node }
                fault = peers.isEmpty ? .heal : .isolate(node, from: peers)
            case 5:
                let from = below(nodes)
                let to = (from + 1 + below(nodes - 1)) % nodes
                fault = .block(from: from, to: to)
            case 6, 7: fault = .heal
            case 8: fault = .pause(below(nodes), seconds: 0.5 + random.unit() * 19.5)
            case 9: fault = random.unit() < 0.5 ? .kill(below(nodes)) : .leave(below(nodes))
            case 10: fault = .restart(below(nodes))
            default: fault = .loss(random.unit() * 0.3)
            }
            steps.append(Step(at: at, fault: fault))
        }
        steps.append(Step(at: window, fault: .heal))
        return FaultSchedule(steps: steps)
    }

    /// A chaos run's plan as the simulator can replay it: the same faults at
    /// the same offsets. A graceful stop is a leave; a heal also starts the
    /// nodes that had stopped, as the chaos runner does; delays become loss
    /// of nothing (the simulator's latency stays as it is).
    public init(plan: NemesisPlan) {
        var steps: [Step] = []
        var pausedAt: [Int: Double] = [:]
        for step in plan.steps {
            let at = Double(step.at.components.seconds) + Double(step.at.components.attoseconds) / 1e18
            switch step.action {
            case .kill(let n): steps.append(Step(at: at, fault: .kill(n)))
            case .pause(let n): pausedAt[n] = at
            case .resume(let n):
                if let from = pausedAt.removeValue(forKey: n) {
                    steps.append(Step(at: from, fault: .pause(n, seconds: at - from)))
                }
            case .stop(let n): steps.append(Step(at: at, fault: .leave(n)))
            case .start(let n): steps.append(Step(at: at, fault: .restart(n)))
            case .partition(let groups): steps.append(Step(at: at, fault: .partition(groups)))
            case .delay: break
            case .loss(let rate): steps.append(Step(at: at, fault: .loss(rate)))
            case .heal: steps.append(Step(at: at, fault: .heal))
            }
        }
        self.init(steps: steps)
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
