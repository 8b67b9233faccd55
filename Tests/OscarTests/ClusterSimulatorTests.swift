import Oscar
import OscarTestKit
import Testing

/// The real membership cores, N of them, on the deterministic simulator.
///
/// Simulations advance in 0.1 s virtual steps and yield between them: a long
/// synchronous run would hold one of the cooperative pool's threads (one per
/// core) and stall every other test.
@Suite(.timeLimit(.minutes(5))) struct ClusterSimulatorTests {
    /// Runs until `condition` holds or `limit` (virtual seconds) passes;
    /// returns the virtual time it held, or nil.
    func advance(
        _ sim: inout ClusterSimulator, until condition: (ClusterSimulator) -> Bool, limit: Double
    ) async
        -> Double?
    {
        while sim.now < limit {
            sim.run(until: sim.now + 0.1)
            if condition(sim) { return sim.now }
            await Task.yield()
        }
        return nil
    }

    /// Runs to virtual time `end`.
    func advance(_ sim: inout ClusterSimulator, to end: Double) async {
        _ = await advance(&sim, until: { _ in false }, limit: end)
    }

    func allUp(_ sim: ClusterSimulator, _ nodes: [Int], count: Int) -> Bool {
        nodes.allSatisfy { i in
            let view = sim.view(i).current
            return view.count == count && view.allSatisfy { $0.status == .up }
        }
    }

    @Test func fiftyNodesConverge() async {
        var sim = ClusterSimulator(settings: .init(nodes: 50, seed: 1))
        let at = await advance(&sim, until: { allUp($0, Array(0..<50), count: 50) }, limit: 60)
        #expect(at != nil, "not every node saw 50 members up within 60 virtual seconds")
        // One leader, agreed by all.
        let leaders = Set((0..<50).map { sim.view($0).leader?.uid })
        #expect(leaders.count == 1)
    }

    /// As deployed: every node lists the same seeds (the first to list is
    /// not the lowest address) and they start in a random order. And the
    /// version rule holds: no two states sent under one version differ.
    @Test func nodesListingSharedSeedsInAnyOrderConvergeWithConsistentVersions() async {
        for seed in UInt64(1)...40 {
            var settings = ClusterSimulator.Settings(nodes: 8, seed: seed)
            settings.sharedSeeds = 3
            settings.checkVersions = true
            var sim = ClusterSimulator(settings: settings)
            let at = await advance(&sim, until: { allUp($0, Array(0..<8), count: 8) }, limit: 30)
            #expect(at != nil, "seed \(seed): no convergence")
            #expect(sim.versionConflicts == 0, "seed \(seed)")
        }
    }

    @Test func aKilledNodeIsDetectedThenRemovedEverywhere() async {
        var sim = ClusterSimulator(settings: .init(nodes: 5, seed: 2))
        #expect(await advance(&sim, until: { allUp($0, Array(0..<5), count: 5) }, limit: 30) != nil)
        let killedAt = sim.now
        sim.kill(3)
        let victim = ClusterSimulator.address(3).uid
        let survivors = [0, 1, 2, 4]
        let unreachableAt = await advance(
            &sim, until: { s in survivors.allSatisfy { !s.view($0).isReachable(victim) } }, limit: killedAt + 10)
        #expect(unreachableAt != nil)
        if let t = unreachableAt { #expect(t - killedAt < 3, "unreachable after \(t - killedAt) s") }
        let removedAt = await advance(
            &sim, until: { s in survivors.allSatisfy { s.view($0).members[victim]?.status == .removed } },
            limit: killedAt + 30)
        #expect(removedAt != nil)
        // Detection and the stable window: no removal margin, since the
        // leader's dial to the dead member's address is refused.
        let settings = sim.settings.core
        let bound = 3 + settings.stableAfter + 2
        if let t = removedAt { #expect(t - killedAt < bound, "removed after \(t - killedAt) s") }
        #expect(allUp(sim, survivors, count: 4))
    }

    /// A member whose address refuses connections is gone, and is removed
    /// as soon as it is down; one that is cut off but runs is not, and
    /// waits out the removal margin, which gives it the time to down itself
    /// (docs/DOWNING.md). So does a killed one where the setting is off.
    /// Random cluster sizes, victims and times.
    @Test func aKilledMemberGoesWithoutTheRemovalMarginAndACutOffOneWaitsItOut() async {
        for seed in UInt64(1)...12 {
            var random = SplitMix64(seed: seed)
            let n = 5 + Int(random.next() % 5)
            let cutOff = seed % 2 == 0
            var settings = ClusterSimulator.Settings(nodes: n, seed: seed)
            settings.core.removesRefusingMembers = seed % 4 != 1
            let waits = cutOff || !settings.core.removesRefusingMembers
            var sim = ClusterSimulator(settings: settings)
            guard await advance(&sim, until: { allUp($0, Array(0..<n), count: n) }, limit: 40) != nil else {
                Issue.record("seed \(seed): no cluster")
                continue
            }
            await advance(&sim, to: sim.now + Double(random.next() % 20) / 10)
            let victim = 1 + Int(random.next() % UInt64(n - 1))  // node 0 is the leader
            let uid = sim.uid(of: victim)
            let others = (0..<n).filter { $0 != victim }
            let faultAt = sim.now
            if cutOff { sim.partition([victim], others) } else { sim.kill(victim) }
            // Down, or already past it: the leader removes a dead member as
            // soon as its probe is refused, within one step of this loop.
            let downAt = await advance(
                &sim,
                until: { s in
                    others.contains { [.down, .removed].contains(s.view($0).members[uid]?.status) }
                }, limit: faultAt + 20)
            let removedAt = await advance(
                &sim, until: { s in others.allSatisfy { s.view($0).members[uid]?.status == .removed } },
                limit: faultAt + 40)
            guard let downAt, let removedAt else {
                Issue.record(
                    "seed \(seed), \(cutOff ? "cut off" : "killed"): down at \(String(describing: downAt)), removed at \(String(describing: removedAt))"
                )
                continue
            }
            let margin = sim.settings.core.removalMargin
            if waits {
                #expect(
                    removedAt - downAt >= margin - 0.5, "seed \(seed): removed \(removedAt - downAt) s after its down")
                #expect(sim.isDowned(victim), "seed \(seed): the cut-off member did not down itself")
            } else {
                #expect(
                    removedAt - downAt <= 1.5,
                    "seed \(seed): a dead member removed \(removedAt - downAt) s after its down")
                #expect(removedAt - faultAt < 3 + sim.settings.core.stableAfter + 2, "seed \(seed)")
            }
            #expect(allUp(sim, others, count: n - 1), "seed \(seed): the others did not stay up")
        }
    }

    /// The newest member killed the moment it is promoted, before it has
    /// acknowledged the others' promotion (`oscar cluster up`, then `oscar
    /// cluster kill` of the last node): the other two stay up and remove it.
    /// Before, nobody could count the member promoted beside it, and the
    /// whole cluster downed itself. Seeds vary the timing; the test counts
    /// the runs that hit the window and requires some.
    /// What `oscar chaos` saw once after its final heal (seed 3): two nodes
    /// had just rejoined as new incarnations when every older member downed
    /// itself. A joining node has no say in downing, so the two wait,
    /// joining, for a cluster that is gone; restarted by their supervisor,
    /// the others join through them (a new incarnation replaces the old,
    /// which is downed at once) and all five come up again. Seeds vary the
    /// timing; the test counts the runs that caught both nodes joining.
    @Test func nodesLeftJoiningByAVanishedClusterComeUpWhenItsMembersRestart() async {
        var hits = 0
        for seed in UInt64(1)...12 {
            var settings = ClusterSimulator.Settings(nodes: 5, seed: seed)
            settings.sharedSeeds = 3
            var sim = ClusterSimulator(settings: settings)
            guard await advance(&sim, until: { allUp($0, Array(0..<5), count: 5) }, limit: 40) != nil else {
                Issue.record("seed \(seed): no cluster")
                continue
            }
            sim.restart(2)
            sim.restart(4)
            let rejoined = [2, 4]
            var caught = false
            while sim.now < 80, !caught {
                sim.run(until: sim.now + 0.001)
                if rejoined.allSatisfy({ sim.states[$0].admitted && sim.states[$0].myStatus == .joining }) {
                    caught = true
                } else if rejoined.contains(where: { sim.states[$0].myStatus == .up }) {
                    break
                }
            }
            guard caught else { continue }
            hits += 1
            let older = [0, 1, 3]
            for i in older { sim.kill(i) }
            await advance(&sim, to: sim.now + 15)
            #expect(rejoined.allSatisfy { sim.states[$0].myStatus == .joining }, "seed \(seed)")
            for i in older { sim.restart(i) }
            let up = await advance(&sim, until: { allUp($0, Array(0..<5), count: 5) }, limit: sim.now + 90)
            #expect(up != nil, "seed \(seed): the five did not come up again")
        }
        #expect(hits > 0, "no run caught both nodes joining")
    }

    @Test func killingTheNewestMemberAtItsPromotionLeavesTheOthersUp() async {
        var hits = 0
        for seed in UInt64(1)...20 {
            var sim = ClusterSimulator(settings: .init(nodes: 3, seed: seed))
            var newest: Int?
            while sim.now < 30, newest == nil {
                sim.run(until: sim.now + 0.0005)
                let up = sim.view(0).current.filter { $0.status == .up }
                guard up.count == 3, let last = up.max(by: { $0.upNumber < $1.upNumber }) else { continue }
                newest = (0..<3).first { ClusterSimulator.address($0).uid == last.uid }
            }
            guard let victim = newest else {
                Issue.record("seed \(seed): three members never up")
                continue
            }
            let survivors = (0..<3).filter { $0 != victim }
            // The window: a survivor does not yet know every member saw the
            // other survivor promoted.
            if survivors.contains(where: { sim.states[$0].settledCount < 3 }) { hits += 1 }
            sim.kill(victim)
            let uid = ClusterSimulator.address(victim).uid
            let removed = await advance(
                &sim, until: { s in survivors.allSatisfy { s.view($0).members[uid]?.status == .removed } },
                limit: sim.now + 40)
            #expect(removed != nil, "seed \(seed): node \(victim) was not removed")
            #expect(survivors.allSatisfy { sim.isServing($0) }, "seed \(seed): a survivor stopped")
        }
        #expect(hits > 0, "no run killed the newest member inside the window")
    }

    @Test func aThreeTwoPartitionLeavesOnlyTheMajorityUp() async {
        var sim = ClusterSimulator(settings: .init(nodes: 5, seed: 3))
        #expect(await advance(&sim, until: { allUp($0, Array(0..<5), count: 5) }, limit: 30) != nil)
        sim.partition([0, 1, 2], [3, 4])
        let settled = await advance(
            &sim, until: { s in s.isStopped(3) && s.isStopped(4) && allUp(s, [0, 1, 2], count: 3) }, limit: sim.now + 30
        )
        #expect(settled != nil, "the minority did not stop, or the majority did not settle on 3")
        #expect(!sim.isStopped(0) && !sim.isStopped(1) && !sim.isStopped(2))
    }

    /// A subscriber that folds the reachability events it was given ends
    /// with the node's own view: no change of reachability goes unpublished,
    /// under loss, a pause and a healed partition.
    @Test func reachabilityEventsAddUpToTheView() async {
        for seed in UInt64(11)...14 {
            var settings = ClusterSimulator.Settings(nodes: 6, seed: seed)
            settings.loss = 0.2
            settings.core.downing = .manual  // keep everyone, so views stay comparable
            var sim = ClusterSimulator(settings: settings)
            _ = await advance(&sim, until: { allUp($0, Array(0..<6), count: 6) }, limit: 60)
            sim.pause(5, for: 4)
            await advance(&sim, to: sim.now + 6)
            sim.partition([0, 1], [2, 3, 4, 5])
            await advance(&sim, to: sim.now + 6)
            sim.heal()
            await advance(&sim, to: sim.now + 3)
            for i in 0..<6 {
                var folded: Set<UInt64> = []
                var sawUnreachable = false
                for (_, event) in sim.events[i] {
                    if case .unreachable = event { sawUnreachable = true }
                    switch event {
                    case .unreachable(let m): folded.insert(m.uid)
                    case .reachable(let m), .memberRemoved(let m): folded.remove(m.uid)
                    default: break
                    }
                }
                #expect(sawUnreachable, "seed \(seed), node \(i): the partition went unnoticed")
                #expect(folded == sim.view(i).unreachable, "seed \(seed), node \(i)")
            }
        }
    }

    @Test func tenPercentLossCausesNoFalseRemoval() async {
        var settings = ClusterSimulator.Settings(nodes: 5, seed: 4)
        settings.loss = 0.10
        var sim = ClusterSimulator(settings: settings)
        #expect(await advance(&sim, until: { allUp($0, Array(0..<5), count: 5) }, limit: 60) != nil)
        await advance(&sim, to: sim.now + 60)
        for i in 0..<5 {
            #expect(!sim.isStopped(i))
            #expect(sim.view(i).current.count == 5)
            #expect(!sim.events[i].contains { if case .memberRemoved = $0.event { true } else { false } })
        }
    }

    @Test func aGracefulLeaveEndsInRemovalWithNoUnreachablePhase() async {
        var sim = ClusterSimulator(settings: .init(nodes: 4, seed: 5))
        #expect(await advance(&sim, until: { allUp($0, Array(0..<4), count: 4) }, limit: 30) != nil)
        sim.leave(2)
        let leaver = ClusterSimulator.address(2).uid
        let done = await advance(
            &sim, until: { s in [0, 1, 3].allSatisfy { s.view($0).members[leaver]?.status == .removed } },
            limit: sim.now + 20)
        #expect(done != nil)
        #expect(sim.isStopped(2), "the leaving node must learn it is exiting and stop")
        for i in [0, 1, 3] {
            #expect(
                !sim.events[i].contains { if case .unreachable(let m) = $0.event { m.uid == leaver } else { false } })
        }
    }

    /// A leave asked for before the node sees itself up used to be dropped
    /// (joining → leaving is no transition): it is now kept until the node
    /// is up. Found as a flaky `aGracefulLeaveEndsInRemoval` over sockets.
    @Test func aLeaveAskedForWhileJoiningIsCarriedOutOnceUp() async {
        var sim = ClusterSimulator(settings: .init(nodes: 4, seed: 9))
        await advance(&sim, to: 0.01)
        #expect(sim.view(3).members[ClusterSimulator.address(3).uid]?.status != .up, "still joining")
        sim.leave(3)
        let leaver = ClusterSimulator.address(3).uid
        let done = await advance(
            &sim, until: { s in [0, 1, 2].allSatisfy { s.view($0).members[leaver]?.status == .removed } },
            limit: 40)
        #expect(done != nil)
        let stopped = sim.isStopped(3)
        #expect(stopped, "the leaver stops once it is exiting")
    }

    @Test func theSameSeedReplaysTheSameRun() async {
        func run() async -> [String] {
            var sim = ClusterSimulator(settings: .init(nodes: 8, seed: 42))
            await advance(&sim, to: 10)
            sim.kill(5)
            await advance(&sim, to: 25)
            return (0..<8).flatMap { i in sim.events[i].map { "\(i) \($0.time) \($0.event)" } }
        }
        let first = await run()
        let second = await run()
        #expect(first == second)
    }

    /// `moveStart` replays a run set up with the late start from the
    /// beginning, event for event, whatever the seed, size and start (the
    /// simulation report leans on it to form a cluster once, not twice).
    @Test func movingALateStartReplaysARunSetUpWithIt() {
        var random = SplitMix64(seed: 20_261_203)
        for _ in 0..<12 {
            let n = 3 + Int(random.next() % 10)
            let seed = random.next() % 1_000_000
            let decidedAt = 1 + Double(random.next() % 40) / 4
            let startAt = decidedAt + Double(1 + random.next() % 8) / 4
            func history(_ sim: ClusterSimulator) -> [String] {
                (0..<n).flatMap { i in sim.events[i].map { "\(i) \($0.time) \($0.event)" } }
                    + ["\(sim.messagesSent) \(sim.gossipSent)"]
            }
            var settings = ClusterSimulator.Settings(nodes: n, seed: seed)
            settings.lastNodeStartsAt = startAt
            var setUp = ClusterSimulator(settings: settings)
            setUp.run(until: startAt + 15)  // a few nodes: milliseconds
            settings.lastNodeStartsAt = .infinity
            var moved = ClusterSimulator(settings: settings)
            moved.run(until: decidedAt)
            moved.moveStart(of: n - 1, to: startAt)
            moved.run(until: startAt + 15)
            #expect(allUp(moved, Array(0..<n), count: n), "n \(n) seed \(seed): the late node is not up")
            #expect(history(moved) == history(setUp), "n \(n) seed \(seed), moved at \(decidedAt) to \(startAt)")
        }
    }
}

extension ClusterSimulatorTests {
    @Test func aNodePausedForTwoSecondsIsNotRemoved() async {
        var sim = ClusterSimulator(settings: .init(nodes: 5, seed: 6))
        #expect(await advance(&sim, until: { allUp($0, Array(0..<5), count: 5) }, limit: 30) != nil)
        sim.pause(3, for: 2)
        await advance(&sim, to: sim.now + 20)
        for i in 0..<5 {
            #expect(!sim.isStopped(i))
            #expect(sim.view(i).current.count == 5, "node \(i) sees \(sim.view(i).current.count)")
            #expect(!sim.events[i].contains { if case .memberRemoved = $0.event { true } else { false } })
        }
        #expect(allUp(sim, Array(0..<5), count: 5))
    }
}

extension ClusterSimulatorTests {
    @Test func nodesWaitingForALateSeedDoNotFormClustersOfTheirOwn() async {
        var settings = ClusterSimulator.Settings(nodes: 5, seed: 7)
        settings.seedStartDelay = 5
        var sim = ClusterSimulator(settings: settings)
        await advance(&sim, to: 4)
        for i in 1..<5 { #expect(sim.view(i).members.values.allSatisfy { $0.status == .joining }) }
        #expect(await advance(&sim, until: { allUp($0, Array(0..<5), count: 5) }, limit: 40) != nil)
        // One cluster: only the seed became up on its own (round 1); the
        // others were promoted into its cluster in later rounds.
        let upNumbers = sim.view(0).current.map(\.upNumber).sorted()
        #expect(upNumbers.first == 1 && upNumbers.dropFirst().allSatisfy { $0 > 1 }, "\(upNumbers)")
    }
}
