import Foundation
import OscarBase
import OscarCBOR
import OscarCluster
import OscarDistributed
import OscarMembership
import OscarRemote
import OscarRuntime

/// A property checker on the simulator, in the manner of FoundationDB's
/// simulation and Jepsen: run `MembershipCore`s under random fault
/// schedules and, after every tenth of a virtual second, look for a
/// counterexample to downing's safety:
/// - **split brain**: two serving members each of which sees the other down
///   or removed, or two whose views each show a majority up and reachable
///   yet share nobody up (a member whose view shows no majority is a
///   minority on its way to downing itself, and acts for no cluster);
/// - **two singletons**: two members that would both host a cluster
///   singleton (`ClusterSimulator.hostsSingleton`);
/// - **a connected majority removed**: a member downed while it belongs to
///   a group of more than half the nodes that has been fully connected,
///   with nobody paused and no loss, for `quietBeforeMajorityCheck`.
///
/// A failing schedule is shrunk, step by step, to one that still fails,
/// and reported with its seed.
public struct SplitBrainSearch: Sendable {
    public enum Property: String, Sendable, CaseIterable {
        case splitBrain = "split brain"
        case twoSingletons = "two singletons"
        case majorityRemoved = "connected majority removed"
    }

    public struct Violation: Sendable, Equatable, CustomStringConvertible {
        public var property: Property
        /// Virtual seconds after the cluster formed.
        public var at: Double
        public var detail: String

        public var description: String {
            "\(property.rawValue) at \(FaultSchedule.Fault.format(at)) s: \(detail)"
        }
    }

    /// One schedule's outcome.
    public struct Outcome: Sendable {
        public var seed: UInt64
        public var nodes: Int
        public var schedule: FaultSchedule
        public var violation: Violation?
        /// For a violation: the smallest schedule found that still fails.
        public var minimal: FaultSchedule?
        /// Members downed over the run (a measure of how hard it was).
        public var downed: Int
    }

    package var settings = MembershipCore.Settings()
    /// Virtual seconds of quiet after the last fault, checked like the rest.
    public var quietTail: Double = 40
    /// How long a group must have been connected and quiet before downing
    /// one of its members counts as removing a connected majority: detection,
    /// the stable window, the unstable limit and the removal margin, with
    /// room to spare.
    public var quietBeforeMajorityCheck: Double {
        3 + settings.stableAfter + settings.decideWhenUnstableAfter + settings.removalMargin + 5
    }

    public init() {}

    /// Runs schedule `seed` on `nodes` nodes (its faults and the network's
    /// randomness both follow from the seed), shrinking it if it fails.
    public func check(seed: UInt64, nodes: Int, faults: Int = 10, window: Double = 60) -> Outcome {
        let schedule = FaultSchedule.random(nodes: nodes, seed: seed, count: faults, window: window)
        let (violation, downed) = run(schedule, nodes: nodes, seed: seed)
        var outcome = Outcome(seed: seed, nodes: nodes, schedule: schedule, violation: violation, downed: downed)
        if let violation { outcome.minimal = shrink(schedule, nodes: nodes, seed: seed, property: violation.property) }
        return outcome
    }

    /// Runs one schedule to its end (the last step, then `quietTail`), or to
    /// its first violation.
    public func run(_ schedule: FaultSchedule, nodes: Int, seed: UInt64) -> (Violation?, downed: Int) {
        let (violation, downed, _) = runKeepingSimulator(schedule, nodes: nodes, seed: seed)
        return (violation, downed)
    }

    /// The run as a story: the faults and every node's cluster events, by
    /// virtual time (seconds after the cluster formed), up to the violation.
    public func trace(_ schedule: FaultSchedule, nodes: Int, seed: UInt64) -> [String] {
        let (violation, _, (sim, start)) = runKeepingSimulator(schedule, nodes: nodes, seed: seed)
        var lines: [(Double, String)] = schedule.steps.map { ($0.at, "nemesis: \($0.fault)") }
        for i in 0..<nodes {
            for (t, event) in sim.events[i] where t >= start {
                if case .leaderChanged = event { continue }
                lines.append((t - start, "node \(i): \(event)"))
            }
        }
        if let violation { lines.append((violation.at, "✗ \(violation)")) }
        return lines.sorted { $0.0 < $1.0 }.filter { $0.0 <= (violation?.at ?? .infinity) }.map {
            "\(FaultSchedule.Fault.format($0.0)) s  \($0.1)"
        }
    }

    private func runKeepingSimulator(
        _ schedule: FaultSchedule, nodes: Int, seed: UInt64
    ) -> (
        Violation?, Int, (ClusterSimulator, Double)
    ) {
        var simSettings = ClusterSimulator.Settings(nodes: nodes, seed: seed)
        simSettings.core = settings
        // Every node lists the same three seeds, as `oscar chaos` starts
        // them and as a deployment must: the cluster invites restarted seeds
        // only if it knows them as seeds.
        simSettings.sharedSeeds = 3
        var sim = ClusterSimulator(settings: simSettings)
        var checker = Checker(nodes: nodes, quiet: quietBeforeMajorityCheck)
        // Form the cluster and let every member learn that every other knows
        // it is up, as a cluster that has run for a while has.
        let formed = sim.run(
            untilTrue: { s in
                (0..<nodes).allSatisfy { i in
                    s.isServing(i) && s.view(i).current.count == nodes && s.states[i].settledCount == nodes
                }
            }, limit: 60, step: 0.25)
        guard let start = formed else {
            return (
                Violation(property: .majorityRemoved, at: 0, detail: "the cluster did not form in 60 s"), 0, (sim, 0)
            )
        }
        checker.noteFault(at: sim.now)
        var steps = schedule.steps[...]
        let end = start + (schedule.steps.last?.at ?? 0) + quietTail
        while sim.now < end {
            while let step = steps.first, start + step.at <= sim.now {
                steps.removeFirst()
                apply(step.fault, to: &sim)
                checker.noteFault(at: sim.now)
            }
            sim.run(until: sim.now + 0.1)
            if let found = checker.check(sim) {
                return (
                    Violation(property: found.0, at: sim.now - start, detail: found.1), checker.downed, (sim, start)
                )
            }
        }
        return (nil, checker.downed, (sim, start))
    }

    /// Removes steps one at a time, keeping each removal after which the
    /// schedule still breaks `property`, until no single step can go.
    func shrink(_ schedule: FaultSchedule, nodes: Int, seed: UInt64, property: Property) -> FaultSchedule {
        var current = schedule
        var progress = true
        while progress {
            progress = false
            var i = 0
            while i < current.steps.count {
                var candidate = current
                candidate.steps.remove(at: i)
                if run(candidate, nodes: nodes, seed: seed).0?.property == property {
                    current = candidate
                    progress = true
                } else {
                    i += 1
                }
            }
        }
        return current
    }

    private func apply(_ fault: FaultSchedule.Fault, to sim: inout ClusterSimulator) {
        let n = sim.settings.nodes
        switch fault {
        case .partition(let groups):
            for (k, a) in groups.enumerated() { for b in groups[(k + 1)...] { sim.partition(a, b) } }
        case .isolate(let node, let peers): sim.partition([node], peers)
        case .block(let from, let to): sim.block(from: from, to: to)
        case .heal:
            sim.heal()
            sim.loss = 0
            // As the chaos runner does: nodes that stopped themselves
            // (downed, left) start again.
            for i in 0..<n where sim.isStopped(i) && !sim.killed.contains(i) { sim.restart(i) }
        case .pause(let node, let seconds): if sim.isRunning(node) { sim.pause(node, for: seconds) }
        case .kill(let node): if sim.isRunning(node) { sim.kill(node) }
        case .restart(let node): if sim.isStopped(node) { sim.restart(node) }
        case .leave(let node): if sim.isServing(node) { sim.leave(node) }
        case .loss(let rate): sim.loss = rate
        }
    }

    /// The properties, checked against the simulator's state as it is.
    struct Checker {
        package let nodes: Int
        let quiet: Double
        var lastFaultAt = 0.0
        package var running: [Bool]
        package var downed = 0

        init(nodes: Int, quiet: Double) {
            self.nodes = nodes
            self.quiet = quiet
            running = Array(repeating: true, count: nodes)
        }

        mutating func noteFault(at t: Double) { lastFaultAt = t }

        package mutating func check(_ sim: ClusterSimulator) -> (Property, String)? {
            let serving = (0..<nodes).filter { sim.isServing($0) }
            for (k, p) in serving.enumerated() {
                let viewP = sim.view(p)
                let uidP = sim.states[p].me.uid
                for q in serving[(k + 1)...] {
                    let viewQ = sim.view(q)
                    let uidQ = sim.states[q].me.uid
                    if Self.isOut(uidQ, in: viewP), Self.isOut(uidP, in: viewQ) {
                        return (
                            .splitBrain,
                            "nodes \(p) and \(q) are both up, and each sees the other down or removed; "
                                + "\(Self.describe(p, viewP)); \(Self.describe(q, viewQ))"
                        )
                    }
                    let upP = Set(viewP.current.lazy.filter { $0.status == .up || $0.status == .leaving }.map(\.uid))
                    if Self.reachesMajority(viewP), Self.reachesMajority(viewQ),
                        !viewQ.current.contains(where: {
                            ($0.status == .up || $0.status == .leaving) && upP.contains($0.uid)
                        })
                    {
                        return (
                            .splitBrain,
                            "nodes \(p) and \(q) are both up with views that share no up member; "
                                + "\(Self.describe(p, viewP)); \(Self.describe(q, viewQ))"
                        )
                    }
                }
            }
            let hosts = serving.filter { sim.hostsSingleton($0) }
            if hosts.count > 1 {
                let views = hosts.map { Self.describe($0, sim.view($0)) }.joined(separator: "; ")
                return (.twoSingletons, "nodes \(hosts) would each host the singleton; \(views)")
            }
            for i in 0..<nodes {
                let now = sim.isRunning(i)
                defer { running[i] = now }
                guard running[i], !now, !sim.killed.contains(i) else { continue }
                let myStatus = sim.states[i].myStatus
                guard myStatus == .down || myStatus == .removed else { continue }  // left, not downed
                downed += 1
                if sim.now - lastFaultAt >= quiet, let group = connectedGroup(of: i, sim), group.count * 2 > nodes {
                    return (.majorityRemoved, "node \(i) was downed in a connected, quiet group of \(group)")
                }
            }
            return nil
        }

        /// "node 0 sees 0′ up, 1 down, 3 unreachable up": members by node
        /// number, a prime per restart.
        package static func describe(_ node: Int, _ view: Gossip) -> String {
            let members = view.members.values.sorted { $0.uid < $1.uid }.map { m in
                let index = m.node.port - 1
                let primes = String(repeating: "′", count: Int(m.uid / 1_000_000))
                let flag = view.unreachable.contains(m.uid) ? " unreachable" : ""
                return "\(index)\(primes)\(flag) \(m.status)"
            }
            return "node \(node) sees " + members.joined(separator: ", ")
        }

        /// Whether a view shows more than half of its voters (members that
        /// were up) up and reachable: a node whose view does not is a
        /// minority that will down itself, and acts for no cluster.
        static func reachesMajority(_ view: Gossip) -> Bool {
            let voters = view.current.filter { $0.upNumber > 0 && $0.status != .joining }
            let reachable = voters.filter { ($0.status == .up || $0.status == .leaving) && view.isReachable($0.uid) }
            return reachable.count * 2 > voters.count
        }

        static func isOut(_ uid: UInt64, in view: Gossip) -> Bool {
            guard let status = view.members[uid]?.status else { return false }
            return status == .down || status == .removed
        }

        /// The running, unpaused nodes connected to `i` both ways, directly,
        /// if `i` itself was running a moment ago (it just stopped).
        func connectedGroup(of i: Int, _ sim: ClusterSimulator) -> [Int]? {
            guard sim.loss == 0 else { return nil }
            let alive = (0..<nodes).filter { $0 == i || (sim.isRunning($0) && !sim.isPaused($0)) }
            let group = alive.filter { j in
                j == i || (!sim.isBlocked(from: i, to: j) && !sim.isBlocked(from: j, to: i))
            }
            // Fully connected among themselves.
            for a in group { for b in group where a != b && sim.isBlocked(from: a, to: b) { return nil } }
            return group
        }
    }
}

extension SplitBrainSearch {
    /// Checks every seed of `seeds`, on one thread per core
    /// (`ParallelJobs`); `nodes` gives a seed's node count. `progress` sees
    /// each outcome as it is known (from any thread, one at a time). The
    /// outcomes come back in seed order.
    public func search(
        seeds: ClosedRange<UInt64>, nodes: @escaping @Sendable (UInt64) -> Int,
        progress: @escaping @Sendable (Outcome) -> Void = { _ in }
    ) -> [Outcome] {
        let all = Array(seeds)
        return ParallelJobs.run(all.count, finished: { _, outcome in progress(outcome) }) { i in
            check(seed: all[i], nodes: nodes(all[i]))
        }
    }
}
