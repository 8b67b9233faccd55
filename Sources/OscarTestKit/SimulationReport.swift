import Foundation
import OscarBase
import OscarCBOR
import OscarCluster
import OscarDistributed
import OscarMembership
import OscarRemote
import OscarRuntime

/// Convergence and failure-detection figures measured on the simulator, for
/// `oscar simulate` and docs/SIMULATION.md.
public struct SimulationReport: Sendable {
    /// One kill of a stable cluster's member, in virtual seconds from the kill.
    public struct KillSample: Sendable, Equatable {
        public var victim: Int
        /// Until the first node judged the victim unreachable by its own
        /// observation (nil past the limit).
        public var firstDetection: Double?
        /// Until every live node saw the victim unreachable: detection and
        /// dissemination.
        public var allSawUnreachable: Double?
        /// Until every live node removed the victim (measured on the first kill only).
        public var removed: Double?
    }

    public var nodes: Int
    public var seed: UInt64
    /// Virtual seconds until every node saw every member up (cold start).
    public var coldStartConvergence: Double?
    /// Virtual seconds from a late node's start until every node saw it up.
    public var newMemberUp: Double?
    /// The kills, each on its own copy of the stable cluster.
    public var kills: [KillSample] = []
    /// Virtual seconds from a kill until the first node judged the victim
    /// unreachable (its own observation): the median over `kills`.
    public var killFirstDetected: Double? { Self.median(kills.compactMap(\.firstDetection)) }
    /// Virtual seconds from a kill until every live node saw the victim
    /// unreachable: the median over `kills`.
    public var killDetected: Double? { Self.median(kills.compactMap(\.allSawUnreachable)) }
    /// Virtual seconds from the first kill until the victim was removed everywhere.
    public var killRemoved: Double?
    /// False suspicions under loss: unreachable events about live members
    /// that reached one node (a suspicion spreads to every node), per minute,
    /// by loss rate.
    public var falseSuspicionsPerMinute: [Double: Double] = [:]
    /// False removals (of live members) under loss, summed over all nodes' views.
    public var falseRemovals: [Double: Int] = [:]
    /// Nodes down or stopped at the end of the loss window, by loss rate:
    /// keep-majority downs every node of a cluster whose unreachable set
    /// keeps changing past `stableAfter + decideWhenUnstableAfter` (as
    /// Akka's down-all-when-unstable), so heavy loss can take a whole
    /// cluster down without removing anyone.
    public var downedUnderLoss: [Double: Int] = [:]
    /// Gossip messages per node per second in a stable cluster.
    public var gossipPerNodeSecond: Double = 0

    /// Runs the scenarios, the kills and loss runs `jobs` at a time (each
    /// holds its own copy of the cluster as it diverges: memory grows with
    /// `jobs`, not the figures). `progress` is called with a line per step.
    public static func run(
        nodes n: Int, seed: UInt64, lossRates: [Double] = [0.05, 0.20], window: Double = 60, kills: Int = 20,
        membership: MembershipSettings = MembershipSettings(), jobs: Int = ProcessInfo.processInfo.activeProcessorCount,
        progress: (String) -> Void = { _ in }
    ) -> SimulationReport {
        var report = SimulationReport(nodes: n, seed: seed)
        let limit = 120.0

        func allUp(_ sim: ClusterSimulator, _ nodes: [Int], _ count: Int) -> Bool {
            nodes.allSatisfy { i in
                let v = sim.view(i).current
                return v.count == count && v.allSatisfy { $0.status == .up }
            }
        }

        // Cold start, then a late joiner once the others have converged,
        // then 10 s of a stable cluster: the one every kill and loss run
        // starts from.
        progress("n=\(n): cold start and a late joiner")
        var settings = ClusterSimulator.Settings(nodes: n, seed: seed)
        settings.core = membership
        settings.lastNodeStartsAt = .infinity  // moved once the others converge
        var sim = ClusterSimulator(settings: settings)
        // Views, not events, are read here: forming publishes every join and
        // up at every node, 2 N² events, most of the memory at 1,000 nodes.
        sim.recordedNodes = []
        let early = Array(0..<(n - 1))
        report.coldStartConvergence = sim.run(untilTrue: { allUp($0, early, n - 1) }, limit: limit, step: 0.25)
        guard let t = report.coldStartConvergence else { return report }
        sim.moveStart(of: n - 1, to: t + 1)
        guard let upAt = sim.run(untilTrue: { allUp($0, Array(0..<n), n) }, limit: t + 1 + limit, step: 0.25) else {
            return report
        }
        report.newMemberUp = upAt - (t + 1)
        // Stable cluster: gossip load over 10 s.
        let before = sim.gossipSent
        sim.run(until: sim.now + 10)
        report.gossipPerNodeSecond = Double(sim.gossipSent - before) / Double(n) / 10

        // Every kill and every loss rate runs on its own copy of the stable
        // cluster (the simulator is a value), so they share nothing and run
        // side by side, one per core; each copy replays the same whatever
        // the core count. Kills come at evenly spread phases of the tick, on
        // members spread around the ring; the first one also runs to
        // removal. Under loss, no other fault: false suspicions are the
        // unreachable events about live members that reached node 0 (a
        // suspicion spreads to every node).
        progress("n=\(n): \(kills) kills and \(lossRates.count) loss runs of \(Int(window)) s, \(jobs) at a time")
        let stable = sim
        let tick = settings.tickInterval
        let outcomes = ParallelJobs.run(kills + lossRates.count, workers: jobs) { job -> Outcome in
            var s = stable
            guard job >= kills else {
                s.run(until: s.now + tick * Double(job) / Double(kills))
                let victim = (n / 2 + job * Self.victimStride(n)) % n
                return .kill(Self.measureKill(of: victim, in: &s, removal: job == 0, limit: limit))
            }
            let start = s.now
            let tombstonesBefore = (0..<n).map { s.view($0).tombstones.count }
            s.loss = lossRates[job - kills]
            s.recordedNodes = [0]  // a suspicion reaches every node: count one's
            s.run(until: start + window)
            let unreachable = s.events[0].count { if case .unreachable = $0.event { true } else { false } }
            // A removal leaves a tombstone in the view that saw it (one
            // `memberRemoved` event each), and keeps it.
            let removed = (0..<n).reduce(0) { $0 + s.view($1).tombstones.count - tombstonesBefore[$1] }
            return .loss(
                suspicionsPerMinute: Double(unreachable) / (window / 60), removed: removed,
                downed: (0..<n).count(where: s.isDowned))
        }
        for (job, outcome) in outcomes.enumerated() {
            switch outcome {
            case .kill(let sample): report.kills.append(sample)
            case .loss(let suspicions, let removed, let downed):
                let loss = lossRates[job - kills]
                report.falseSuspicionsPerMinute[loss] = suspicions
                report.falseRemovals[loss] = removed
                report.downedUnderLoss[loss] = downed
            }
        }
        report.killRemoved = report.kills.first?.removed
        return report
    }

    /// What one job of `run` measured.
    private enum Outcome: Sendable {
        case kill(KillSample)
        case loss(suspicionsPerMinute: Double, removed: Int, downed: Int)
    }

    /// Kills `victim` and measures, in virtual seconds from the kill, its
    /// first detection (10 ms steps), when every live node saw it unreachable
    /// (50 ms steps) and, with `removal`, when every live node removed it.
    static func measureKill(
        of victim: Int, in sim: inout ClusterSimulator, removal: Bool, limit: Double
    ) -> KillSample {
        let uid = sim.uid(of: victim)
        let live = (0..<sim.settings.nodes).filter { $0 != victim }
        let killedAt = sim.now
        sim.kill(victim)
        let first = firstDetection(in: &sim, of: uid, by: live, limit: limit)
        let all = sim.run(
            untilTrue: { s in
                live.allSatisfy { !s.view($0).isReachable(uid) || s.view($0).members[uid]?.status == .removed }
            }, limit: killedAt + limit, step: 0.05)
        var removed: Double?
        if removal {
            removed = sim.run(
                untilTrue: { s in live.allSatisfy { s.view($0).members[uid]?.status == .removed } },
                limit: killedAt + limit, step: 0.25)
        }
        return KillSample(
            victim: victim, firstDetection: first, allSawUnreachable: all.map { $0 - killedAt },
            removed: removed.map { $0 - killedAt })
    }

    /// A step between victims that is coprime with `n`, so 20 kills on 10
    /// nodes visit every node twice and kills on 1,000 spread around the ring.
    static func victimStride(_ n: Int) -> Int {
        var stride = max(1, n / 7 + 1)
        while gcd(stride, n) != 1 { stride += 1 }
        return stride
    }

    private static func gcd(_ a: Int, _ b: Int) -> Int { b == 0 ? a : gcd(b, a % b) }

    /// The middle value (the mean of the middle two for an even count); nil when empty.
    public static func median(_ values: [Double]) -> Double? {
        guard !values.isEmpty else { return nil }
        let sorted = values.sorted()
        let m = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[m] : (sorted[m - 1] + sorted[m]) / 2
    }

    /// Runs `sim` until one of `nodes` has judged the member `uid`
    /// unreachable itself, and returns how long that took (nil past `limit`).
    public static func firstDetection(
        in sim: inout ClusterSimulator, of uid: UInt64, by nodes: [Int], limit: Double
    ) -> Double? {
        let start = sim.now
        let detected = sim.run(
            untilTrue: { s in
                nodes.contains { i in
                    s.view(i).reachability.observers[s.uid(of: i)]?.unreachable.contains(uid) ?? false
                }
            }, limit: start + limit, step: 0.01)
        return detected.map { $0 - start }
    }
}
