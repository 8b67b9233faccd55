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

    /// Runs the scenarios. `progress` is called with a line per step.
    public static func run(
        nodes n: Int, seed: UInt64, lossRates: [Double] = [0.05, 0.20], window: Double = 60, kills: Int = 20,
        membership: MembershipSettings = MembershipSettings(),
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

        // Cold start, then a late joiner. In a scope of its own, so its
        // simulator is gone before the loss runs make theirs.
        do {
            progress("n=\(n): cold start and a late joiner")
            var settings = ClusterSimulator.Settings(nodes: n, seed: seed)
            settings.core = membership
            settings.lastNodeStartsAt = 1_000  // effectively "later", set below
            var sim = ClusterSimulator(settings: settings)
            sim.recordsEvents = false  // views, not events, are read here
            let early = Array(0..<(n - 1))
            report.coldStartConvergence = sim.run(untilTrue: { allUp($0, early, n - 1) }, limit: limit, step: 0.25)
            if let t = report.coldStartConvergence {
                // Restart the scenario with the late node starting just after convergence.
                settings.lastNodeStartsAt = t + 1
                sim = ClusterSimulator(settings: settings)
                sim.recordsEvents = false  // views, not events, are read here
                let all = Array(0..<n)
                if let upAt = sim.run(untilTrue: { allUp($0, all, n) }, limit: t + 1 + limit, step: 0.25) {
                    report.newMemberUp = upAt - (t + 1)
                    // Stable cluster: gossip load over 10 s.
                    let before = sim.gossipSent
                    sim.run(until: sim.now + 10)
                    report.gossipPerNodeSecond = Double(sim.gossipSent - before) / Double(n) / 10
                    // Kills, each on a copy of this stable cluster: at
                    // evenly spread phases of the tick, on members spread
                    // around the ring. The first one also runs to removal.
                    progress("n=\(n): \(kills) kills")
                    let stable = sim
                    for k in 0..<kills {
                        var s = stable
                        s.run(until: s.now + settings.tickInterval * Double(k) / Double(kills))
                        let victim = (n / 2 + k * Self.victimStride(n)) % n
                        report.kills.append(Self.measureKill(of: victim, in: &s, removal: k == 0, limit: limit))
                    }
                    report.killRemoved = report.kills.first?.removed
                }
            }
        }

        // False positives under loss: the cluster forms without loss, then
        // loses that fraction of every message for the window; no other
        // fault. One formed cluster serves every rate (the simulator is a
        // value: each rate runs on a copy).
        progress("n=\(n): forming a cluster for the loss runs")
        var formedSettings = ClusterSimulator.Settings(nodes: n, seed: seed &+ 17)
        formedSettings.core = membership
        var formed = ClusterSimulator(settings: formedSettings)
        // Forming publishes every join and up at every node: 2 N² events,
        // most of the memory at 1,000 nodes. Only the loss window's count.
        formed.recordsEvents = false
        guard let start = formed.run(untilTrue: { allUp($0, Array(0..<n), n) }, limit: limit, step: 0.25) else {
            return report
        }
        formed.recordsEvents = true
        for loss in lossRates {
            progress("n=\(n): \(Int(loss * 100))% loss for \(Int(window)) s")
            var s = formed
            s.loss = loss
            s.run(until: start + window)
            var unreachable = 0
            var removed = 0
            for e in s.events[0] where e.time > start {
                if case .unreachable = e.event { unreachable += 1 }
            }
            for i in 0..<n {
                for e in s.events[i] where e.time > start {
                    if case .memberRemoved = e.event { removed += 1 }
                }
            }
            report.falseSuspicionsPerMinute[loss] = Double(unreachable) / (window / 60)
            report.falseRemovals[loss] = removed
            report.downedUnderLoss[loss] = (0..<n).filter(s.isDowned).count
        }
        return report
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
