import CoreEngine
import Oscar
import Testing

/// A few `MembershipCore`s driven by hand: a message is delivered at once,
/// unless the test has cut its link; time moves only when the test ticks.
/// No sockets, no simulator latency, no randomness in delivery: each test
/// sets up one situation and checks one rule of the core.
struct HandDrivenCluster {
    let core: MembershipCore
    private(set) var states: [UInt64: MembershipCore.State] = [:]
    private(set) var now = 0.0
    /// Events each node published, in order.
    private(set) var events: [UInt64: [ClusterEvent]] = [:]
    /// Why each node shut down, once it has.
    private(set) var shutDown: [UInt64: String] = [:]
    /// Links (from, to) that drop every message.
    private var cut: Set<[UInt64]> = []
    private var inFlight: [(to: UInt64, action: MembershipCore.Action)] = []
    /// Every action each node applied and the directives it returned, in
    /// order: a run to replay elsewhere.
    private(set) var log: [(uid: UInt64, action: MembershipCore.Action, directives: [MembershipCore.Directive])] = []

    static func address(_ uid: UInt64) -> NodeAddress { NodeAddress(host: "10.0.0.1", port: 7000 + Int(uid), uid: uid) }

    init(settings: MembershipCore.Settings = .init()) { core = MembershipCore(settings: settings) }

    /// Starts nodes 1...count, node 1 forming the cluster and the others
    /// joining through it, and ticks until every node sees every one up and
    /// knows that every other node sees it so (settled: each side of a
    /// later partition counts every member as a voter).
    static func formed(_ count: UInt64, settings: MembershipCore.Settings = .init()) -> HandDrivenCluster {
        var cluster = HandDrivenCluster(settings: settings)
        for uid in 1...count { cluster.start(uid) }
        let formed = cluster.tick(until: { c in
            (1...count).allSatisfy {
                c.sees($0, all: Array(1...count), are: .up) && c.states[$0]!.settledCount == count
            }
        })
        precondition(formed, "the cluster did not form")
        return cluster
    }

    /// Starts node `uid`, joining through node 1 (node 1 forms the cluster).
    mutating func start(_ uid: UInt64) {
        states[uid] = MembershipCore.State(me: Self.address(uid), seed: uid)
        apply(.join(seeds: uid == 1 ? [] : [Self.address(1)]), to: uid)
        deliver()
    }

    func view(_ uid: UInt64) -> Gossip { states[uid]!.gossip }

    func status(of subject: UInt64, at observer: UInt64) -> MemberStatus? { view(observer).members[subject]?.status }

    func sees(_ observer: UInt64, all subjects: [UInt64], are status: MemberStatus) -> Bool {
        subjects.allSatisfy { self.status(of: $0, at: observer) == status }
    }

    func isRunning(_ uid: UInt64) -> Bool { shutDown[uid] == nil }

    /// Drops every message between `a` and `b`, both ways.
    mutating func cut(_ a: [UInt64], from b: [UInt64]) {
        for x in a { for y in b { cut.insert([x, y]); cut.insert([y, x]) } }
    }

    mutating func heal() { cut.removeAll() }

    /// Every running node ticks at `now + seconds`, in uid order, and what
    /// the ticks send is delivered.
    mutating func tick(_ seconds: Double = 0.5) {
        now += seconds
        for uid in states.keys.sorted() where isRunning(uid) { apply(.tick(now: now), to: uid) }
        deliver()
    }

    /// Ticks every 0.5 s until `condition` holds, for at most `limit`
    /// seconds; returns whether it held.
    @discardableResult
    mutating func tick(until condition: (HandDrivenCluster) -> Bool, limit: Double = 30) -> Bool {
        let end = now + limit
        while now < end {
            tick()
            if condition(self) { return true }
        }
        return false
    }

    /// Applies an action to one node and delivers what follows from it.
    mutating func act(_ action: MembershipCore.Action, on uid: UInt64) {
        apply(action, to: uid)
        deliver()
    }

    private mutating func apply(_ action: MembershipCore.Action, to uid: UInt64) {
        guard isRunning(uid), var state = states[uid] else { return }
        let directives = core.reduce(&state, action)
        states[uid] = state
        log.append((uid, action, directives))
        let me = state.me
        for directive in directives {
            switch directive {
            case .sendJoin(let to, let member): send(from: uid, to: to, .joinRequest(member))
            case .sendGossip(let to, let gossip): send(from: uid, to: to, .gossip(gossip, from: me.node))
            case .sendHeartbeatRequest(let to), .probe(let to):
                send(from: uid, to: to, .heartbeatRequest(from: me.node))
            case .sendHeartbeat(let to): send(from: uid, to: to, .heartbeat(from: me.uid))
            case .publish(let event): events[uid, default: []].append(event)
            case .shutDown(let reason): shutDown[uid] = reason
            }
        }
    }

    private mutating func send(from: UInt64, to address: NodeAddress, _ action: MembershipCore.Action) {
        guard !cut.contains([from, address.uid]) else { return }
        inFlight.append((address.uid, action))
    }

    private mutating func deliver() {
        var delivered = 0
        while !inFlight.isEmpty {
            let (to, action) = inFlight.removeFirst()
            apply(action, to: to)
            delivered += 1
            precondition(delivered < 100_000, "messages never settle")
        }
    }
}

/// The membership core's rules, one situation each, on hand-driven cores:
/// status transitions, the leader's rules, downing decisions and the
/// refutation of a false suspicion.
@Suite(.timeLimit(.minutes(5))) struct MembershipCoreTests {
    typealias Cluster = HandDrivenCluster

    // MARK: - Status transitions

    @Test func theFirstNodeIsUpAtOnceAndAJoinerGoesFromJoiningToUp() {
        var c = Cluster()
        c.start(1)
        #expect(c.status(of: 1, at: 1) == .up)
        c.start(2)
        #expect(c.status(of: 2, at: 1) == .joining, "the leader admits before it promotes")
        #expect(c.status(of: 2, at: 2) == .joining)
        let held1 = c.tick(
            until: { $0.sees(1, all: [1, 2], are: .up) && $0.sees(2, all: [1, 2], are: .up) }, limit: 5)
        #expect(held1)
        #expect(c.view(1).members[2]?.upNumber == 2)
        let events = c.events[2, default: []]
        #expect(events.contains(.memberUp(c.view(2).members[2]!)))
    }

    @Test func aGracefulLeaveGoesThroughLeavingAndExitingToRemoved() {
        var c = Cluster.formed(3)
        c.act(.leave, on: 3)
        #expect(c.status(of: 3, at: 3) == .leaving)
        var seenAtLeader: [MemberStatus] = [.up]
        let removed = c.tick(
            until: { c in
                if let s = c.status(of: 3, at: 1), s != seenAtLeader.last { seenAtLeader.append(s) }
                return c.status(of: 3, at: 1) == .removed && c.status(of: 3, at: 2) == .removed
            }, limit: 10)
        #expect(removed)
        // The leave reached the leader before its first tick: it may see
        // leaving first or only exiting, but never a step backwards.
        #expect(seenAtLeader.first == .up && seenAtLeader.last == .removed)
        #expect(seenAtLeader.contains(.exiting))
        #expect(c.shutDown[3]?.contains("exiting") == true, "the leaver stops once it sees itself exiting")
        let unreachableEvents = c.events[1, default: []].filter { if case .unreachable = $0 { true } else { false } }
        #expect(unreachableEvents.isEmpty, "a graceful leave is not a failure: \(unreachableEvents)")
    }

    @Test func anOperatorDownIsCarriedOutByTheLeaderAndStopsTheDownedNode() {
        var c = Cluster.formed(3, settings: Self.manual)
        c.act(.down(3), on: 2)  // on any member, not only the leader
        #expect(c.status(of: 3, at: 2) == .down)
        // Removed only after the removal margin, which gives a downed side
        // the time to down itself.
        let downedAt = c.now
        let held2 = c.tick(
            until: { $0.status(of: 3, at: 1) == .removed && $0.status(of: 3, at: 2) == .removed },
            limit: c.core.settings.removalMargin + 5)
        #expect(c.now - downedAt >= c.core.settings.removalMargin)
        #expect(held2)
        #expect(c.isRunning(1) && c.isRunning(2))
        // Nobody gossips to a down member; its own gossip is answered with
        // the state that names it down.
        #expect(c.shutDown[3] != nil, "the downed node learns it and stops")
    }

    @Test func aLeaveAskedForWhileJoiningWaitsUntilTheNodeIsUp() {
        var c = Cluster()
        c.start(1)
        c.start(2)
        c.act(.leave, on: 2)
        #expect(c.status(of: 2, at: 2) == .joining, "joining → leaving is not a transition")
        let held3 = c.tick(until: { $0.status(of: 2, at: 1) == .removed }, limit: 10)
        #expect(held3)
        #expect(c.shutDown[2] != nil)
    }

    // MARK: - The leader

    @Test func theLeaderPromotesOnlyAfterEveryReachableMemberHasSeenTheJoiner() {
        var c = Cluster.formed(2)
        c.cut([2], from: [1, 3])
        c.start(3)
        c.tick()
        #expect(c.view(1).leader?.uid == 1)
        #expect(!c.view(1).hasSeen(2))
        #expect(c.status(of: 3, at: 1) == .joining, "member 2 has not seen the joiner yet")
        c.heal()
        let held4 = c.tick(until: { $0.sees(1, all: [1, 2, 3], are: .up) }, limit: 3)
        #expect(held4)
        #expect(c.status(of: 2, at: 2) == .up, "member 2 was never unreachable, so it was waited for")
    }

    /// While a member is unreachable the voters must stay as every side
    /// knows them, so a joiner waits (as in Akka) until the unreachable
    /// member is reachable again or downed.
    @Test func aJoinerIsPromotedOnlyOnceNoMemberIsUnreachable() {
        var c = Cluster.formed(3, settings: Self.manual)
        c.cut([3], from: [1, 2, 4])
        let held5 = c.tick(until: { !$0.view(1).isReachable(3) }, limit: 5)
        #expect(held5)
        c.start(4)
        c.tick(until: { $0.sees(1, all: [4], are: .up) }, limit: 5)
        #expect(c.status(of: 4, at: 1) == .joining, "promoted while member 3 was unreachable")
        #expect(c.status(of: 3, at: 1) == .up, "unreachable is a flag, not a status")
        c.act(.down(3), on: 1)
        let held6 = c.tick(
            until: { $0.sees(1, all: [4], are: .up) && $0.sees(2, all: [4], are: .up) },
            limit: c.core.settings.removalMargin + 5)
        #expect(held6)
    }

    @Test func leadershipPassesToTheLowestAddressWhenTheLeaderLeaves() {
        var c = Cluster.formed(3)
        #expect((1...3).allSatisfy { c.view($0).leader?.uid == 1 })
        c.act(.leave, on: 1)
        let held7 = c.tick(until: { c in [2, 3].allSatisfy { c.status(of: 1, at: $0) == .removed } }, limit: 10)
        #expect(held7)
        #expect(c.view(2).leader?.uid == 2 && c.view(3).leader?.uid == 2)
        #expect(c.events[3, default: []].contains(.leaderChanged(Cluster.address(2))))
    }

    // MARK: - Downing

    static var manual: MembershipCore.Settings {
        var settings = MembershipCore.Settings()
        settings.downing = .manual
        return settings
    }

    @Test func keepMajorityDownsAnUnreachableMemberOnlyAfterTheStableWindow() {
        var c = Cluster.formed(3)
        c.cut([3], from: [1, 2])
        let held8 = c.tick(until: { !$0.view(1).isReachable(3) && !$0.view(2).isReachable(3) }, limit: 5)
        #expect(held8)
        let detectedAt = c.now
        c.tick(until: { $0.status(of: 3, at: 1) != .up }, limit: c.core.settings.stableAfter - 1)
        #expect(c.status(of: 3, at: 1) == .up, "downed before the unreachable set was stable")
        let held9 = c.tick(until: { $0.status(of: 3, at: 1) == .down || $0.status(of: 3, at: 1) == .removed }, limit: 3)
        #expect(held9)
        #expect(c.now - detectedAt >= c.core.settings.stableAfter)
        let held10 = c.tick(until: { $0.status(of: 3, at: 2) == .removed }, limit: c.core.settings.removalMargin + 5)
        #expect(held10)
        #expect(c.isRunning(1) && c.isRunning(2))
        // The minority of one downed itself on its side of the cut.
        #expect(c.shutDown[3]?.contains("down") == true)
        #expect(c.status(of: 3, at: 3) == .down)
    }

    @Test func aTieGoesToTheSideHoldingTheLowestAddress() {
        var c = Cluster.formed(4)
        c.cut([1, 2], from: [3, 4])
        let held11 = c.tick(until: { c in !c.isRunning(3) && !c.isRunning(4) }, limit: 15)
        #expect(held11)
        #expect(c.isRunning(1) && c.isRunning(2))
        let held12 = c.tick(
            until: { c in [3, 4].allSatisfy { c.status(of: $0, at: 1) == .removed } },
            limit: c.core.settings.removalMargin + 10)
        #expect(held12)
        #expect(c.sees(2, all: [1, 2], are: .up))
    }

    /// The cluster node runs the core in an `Engine`; the simulator and these
    /// tests call `reduce`. Replaying a whole run (forming, a partition, a
    /// minority downing itself, removal) through one engine per node gives
    /// the same directives at every step and the same final views.
    @Test func anEngineRunsTheSameReduceAsTheTestsAndTheSimulator() {
        var c = Cluster.formed(5)
        c.cut([4, 5], from: [1, 2, 3])
        _ = c.tick(
            until: { c in [1, 2, 3].allSatisfy { c.sees($0, all: [4, 5], are: .removed) } },
            limit: c.core.settings.stableAfter + c.core.settings.removalMargin + 20)
        let engines = Dictionary(
            uniqueKeysWithValues: (1...5 as ClosedRange<UInt64>).map { uid in
                (uid, Engine(c.core, state: MembershipCore.State(me: Cluster.address(uid), seed: uid)))
            })
        var mismatches = 0
        for step in c.log where engines[step.uid]!.send(step.action) != step.directives { mismatches += 1 }
        #expect(c.log.count > 500)
        #expect(mismatches == 0)
        for uid in 1...5 as ClosedRange<UInt64> {
            #expect(engines[uid]!.withState { $0.gossip } == c.view(uid))
        }
        #expect(engines[4]!.withState { $0.stopped } && engines[5]!.withState { $0.stopped })
    }

    @Test func aMinorityDownsItselfAndTheMajorityKeepsGoing() {
        var c = Cluster.formed(5)
        c.cut([4, 5], from: [1, 2, 3])
        let held13 = c.tick(until: { c in !c.isRunning(4) && !c.isRunning(5) }, limit: 15)
        #expect(held13)
        #expect([1, 2, 3].allSatisfy { c.isRunning($0) })
        let held14 = c.tick(
            until: { c in [1, 2, 3].allSatisfy { c.sees($0, all: [4, 5], are: .removed) } },
            limit: c.core.settings.removalMargin + 5)
        #expect(held14)
    }

    /// `oscar chaos --seed 23`, on hand-driven cores (node 2 is 7106):
    /// node 2 is cut off twice, briefly; then {1, 3} are cut from {2, 4, 5}.
    /// Before the fix, 1 and 3 had learned node 2's outages as heartbeat
    /// intervals, so they still saw it reachable, counted {1, 2, 3} as a
    /// majority and downed 4 and 5 while {2, 4, 5} downed them: split brain.
    /// Now they see node 2 unreachable and, as a minority, down themselves.
    @Test func chaosSeedTwentyThreeLeavesOnlyTheMajoritySideUp() {
        var c = Cluster.formed(5)
        for _ in 0..<2 {
            c.cut([2], from: [1, 3, 4, 5])
            c.tick(until: { _ in false }, limit: 4)
            c.heal()
            c.tick(until: { _ in false }, limit: 3)
        }
        #expect((1...5).allSatisfy { c.isRunning($0) }, "a 4 s cut downs nobody")
        c.cut([1, 3], from: [2, 4, 5])
        let settled = c.tick(until: { c in !c.isRunning(1) && !c.isRunning(3) }, limit: 30)
        #expect(settled, "the minority {1, 3} did not down itself")
        #expect([2, 4, 5].allSatisfy { c.isRunning($0) }, "the majority side must stay up")
        func downed(_ subject: UInt64, by observer: UInt64) -> Bool {
            c.events[observer, default: []].contains {
                if case .memberDowned(let m) = $0 { m.uid == subject } else { false }
            }
        }
        #expect(
            !downed(4, by: 1) && !downed(5, by: 1) && !downed(4, by: 3) && !downed(5, by: 3),
            "the minority downed the majority")
        #expect(
            c.events[1, default: []].contains { if case .unreachable(let m) = $0 { m.uid == 2 } else { false } },
            "node 1 must see node 2 unreachable in the last partition")
    }

    /// A partition healed before the stable window ends downs nobody: each
    /// side's verdicts on the other reach it with the heal and are
    /// withdrawn within a tick or two (chaos sweep seed 2 downed every node).
    @Test func aPartitionHealedBeforeTheStableWindowDownsNobody() {
        var c = Cluster.formed(5)
        c.cut([1, 3], from: [2, 4, 5])
        c.tick(until: { _ in false }, limit: 5.5)
        #expect(!c.view(2).isReachable(1) && !c.view(1).isReachable(2), "both sides see the cut")
        // As on real sockets, the gossip queued at the heal lands first:
        // every node then sees every member flagged by someone.
        c.heal()
        c.act(.gossip(c.view(1), from: Cluster.address(1)), on: 2)
        c.act(.gossip(c.view(2), from: Cluster.address(2)), on: 1)
        for uid in UInt64(1)...5 {
            for other in UInt64(1)...5 where other != uid {
                c.act(.gossip(c.view(other), from: Cluster.address(other)), on: uid)
            }
        }
        #expect((1...5).allSatisfy { c.view($0).unreachable.count == 5 }, "every member flagged by someone")
        let healed = c.tick(until: { c in (1...5).allSatisfy { c.view($0).unreachable.isEmpty } }, limit: 3)
        #expect(healed, "\((1...5).map { c.view(UInt64($0)).unreachable.sorted() })")
        c.tick(until: { _ in false }, limit: c.core.settings.stableAfter * 3)
        #expect((1...5).allSatisfy { c.isRunning($0) && c.sees($0, all: [1, 2, 3, 4, 5], are: .up) })
    }

    @Test func manualDowningLeavesAnUnreachableMemberUntilAnOperatorActs() {
        var c = Cluster.formed(3, settings: Self.manual)
        c.cut([3], from: [1, 2])
        let held15 = c.tick(until: { !$0.view(1).isReachable(3) }, limit: 5)
        #expect(held15)
        c.tick(until: { c in !c.isRunning(3) || c.status(of: 3, at: 1) != .up }, limit: 30)
        #expect(c.status(of: 3, at: 1) == .up && !c.view(1).isReachable(3))
        #expect(c.isRunning(3), "with manual downing, no side downs itself")
        c.act(.down(3), on: 1)
        let held16 = c.tick(until: { $0.status(of: 3, at: 2) == .removed }, limit: c.core.settings.removalMargin + 5)
        #expect(held16)
    }

    // MARK: - Failure detection

    @Test func aFalseSuspicionIsRefutedWhenHeartbeatsResumeAndNobodyIsDowned() {
        var c = Cluster.formed(3)
        c.cut([3], from: [1, 2])
        let held17 = c.tick(until: { !$0.view(1).isReachable(3) }, limit: 5)
        #expect(held17)
        #expect(c.events[1, default: []].contains { if case .unreachable(let m) = $0 { m.uid == 3 } else { false } })
        c.heal()
        let held18 = c.tick(until: { c in (1...3).allSatisfy { c.view($0).isReachable(3) } }, limit: 3)
        #expect(held18)
        #expect(c.events[1, default: []].contains { if case .reachable(let m) = $0 { m.uid == 3 } else { false } })
        // Well past the stable window: still three members up, all running.
        c.tick(until: { _ in false }, limit: c.core.settings.stableAfter * 2)
        #expect((1...3).allSatisfy { c.isRunning($0) && c.sees($0, all: [1, 2, 3], are: .up) })
    }
}
