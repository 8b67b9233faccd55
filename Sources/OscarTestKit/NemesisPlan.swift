import OscarBase
import OscarCBOR
import OscarCluster
import OscarDistributed
import OscarMembership
import OscarRemote
import OscarRuntime

/// The faults of a chaos run, derived from a seed: the same seed, node
/// count, duration and fault list give the same plan. Pure; the runner
/// carries it out.
///
/// Faults come one at a time, each in its own window with a short calm
/// between, so a report can say which fault caused what. Nodes are numbered
/// from 0 in port order; node 0 has the lowest address, so it is the leader
/// whenever it is up. `protected` nodes (the reliable stream's two ends,
/// which keep no durable state) are never killed or restarted, and stay on
/// the majority side of every partition.
public struct NemesisPlan: Sendable, Equatable {
    public enum Fault: String, Sendable, CaseIterable {
        /// SIGKILL a node, start it again on its port 3–7 s later.
        case kill
        /// SIGSTOP a node for 1–2 s, then SIGCONT.
        case pause
        /// A random minority cut off from the rest, 3–12 s.
        case partition
        /// The lower half of the nodes cut off from the upper half, 10–14 s:
        /// long enough for the minority to down itself.
        case partitionHalves = "partition-halves"
        /// The leader (node 0) cut off from everyone, 8–12 s.
        case isolateLeader = "isolate-leader"
        /// Every frame held 50–200 ms, ± up to 50 ms, 4–8 s.
        case delay
        /// 5–25% of frames dropped, 4–8 s.
        case loss
        /// A graceful stop (SIGTERM: leave) and a start, each node in turn.
        case restart
    }

    public enum Action: Sendable, Equatable {
        case kill(Int)
        case pause(Int)
        case resume(Int)
        /// SIGTERM: the node leaves gracefully and exits.
        case stop(Int)
        /// Starts the node again (after `kill` or `stop`).
        case start(Int)
        /// Groups that cannot reach each other.
        case partition([[Int]])
        case delay(millis: Int, jitterMillis: Int)
        case loss(Double)
        /// Lifts every network fault; nodes that exited are started again.
        case heal
    }

    public struct Step: Sendable, Equatable {
        /// Offset from the start of the run.
        public var at: Duration
        public var action: Action
    }

    public var steps: [Step]

    /// Faults fill `[warmUp, duration − coolDown]`.
    public static let warmUp = Duration.seconds(3)
    public static let coolDown = Duration.seconds(3)

    public init(seed: UInt64, nodes: Int, duration: Duration, faults: [Fault], protected: Set<Int>) {
        var random = SplitMix64(seed: seed)
        var steps: [Step] = []
        let end = duration - Self.coolDown
        var t = Self.warmUp
        var nextRestart = 0
        let killable = (0..<nodes).filter { !protected.contains($0) }
        func between(_ low: Double, _ high: Double) -> Duration {
            .milliseconds(Int((low + (high - low) * random.unit()) * 1000))
        }
        func pick(_ from: [Int]) -> Int? { from.isEmpty ? nil : from[Int(random.next() % UInt64(from.count))] }
        while !faults.isEmpty {
            let fault = faults[Int(random.next() % UInt64(faults.count))]
            var window: Duration
            var begin: [Action] = []
            var finish: [Action] = []
            switch fault {
            case .kill:
                window = between(3, 7)
                if let victim = pick(killable) { (begin, finish) = ([.kill(victim)], [.start(victim)]) }
            case .pause:
                window = between(1, 2)
                if let victim = pick(Array(0..<nodes)) { (begin, finish) = ([.pause(victim)], [.resume(victim)]) }
            case .partition:
                window = between(3, 12)
                let candidates = killable.shuffled(using: &random)
                let size = 1 + Int(random.next() % UInt64(max((nodes - 1) / 2, 1)))
                let minority = Array(candidates.prefix(min(size, (nodes - 1) / 2)))
                if !minority.isEmpty {
                    begin = [.partition([minority.sorted(), (0..<nodes).filter { !minority.contains($0) }])]
                    finish = [.heal]
                }
            case .partitionHalves:
                window = between(10, 14)
                let lower = Array(0..<(nodes / 2))
                begin = [.partition([lower, Array((nodes / 2)..<nodes)])]
                finish = [.heal]
            case .isolateLeader:
                window = between(8, 12)
                begin = [.partition([[0], Array(1..<nodes)])]
                finish = [.heal]
            case .delay:
                window = between(4, 8)
                begin = [.delay(millis: 50 + Int(random.next() % 151), jitterMillis: Int(random.next() % 51))]
                finish = [.heal]
            case .loss:
                window = between(4, 8)
                begin = [.loss(Double(5 + Int(random.next() % 21)) / 100)]
                finish = [.heal]
            case .restart:
                window = between(3, 5)
                if !killable.isEmpty {
                    let victim = killable[nextRestart % killable.count]
                    nextRestart += 1
                    (begin, finish) = ([.stop(victim)], [.start(victim)])
                }
            }
            // The last fault is cut short to end in time, unless too little is left.
            if t + window > end { window = end - t }
            guard window >= .seconds(1) else { break }
            steps += begin.map { Step(at: t, action: $0) }
            t += window
            steps += finish.map { Step(at: t, action: $0) }
            t += between(1, 2.5)  // calm between faults
        }
        self.steps = steps
    }
}
