import Oscar
import Testing

@testable import OscarMembership

/// The pure membership state, with no sockets: merge laws on generated
/// states, status rules, convergence and the leader.
@Suite(.timeLimit(.minutes(5))) struct MembershipStateTests {
    static func node(_ uid: UInt64) -> NodeAddress { NodeAddress(host: "127.0.0.1", port: 7000 + Int(uid), uid: uid) }

    /// Random states as nodes 1...6 would hold them: each node changes only
    /// its own state (a member moved forward, an observation) and merges
    /// others' states, in random order. Returns snapshots taken along the
    /// way, so pairs include ancestors, descendants and concurrent states.
    static func randomHistory(_ rng: inout SeededRandom, steps: Int = 60) -> [Gossip] {
        let uids = Array(UInt64(1)...6)
        var replicas = uids.map { _ in Gossip() }
        var snapshots: [Gossip] = []
        for _ in 0..<steps {
            let i = Int.random(in: 0..<replicas.count, using: &rng)
            let me = uids[i]
            switch Int.random(in: 0..<3, using: &rng) {
            case 0:
                let uid = uids.randomElement(using: &rng)!
                let status = MemberStatus.allCases.randomElement(using: &rng)!
                let member = Member(
                    node: node(uid), status: status, roles: uid % 2 == 0 ? ["worker"] : [],
                    upNumber: status == .joining ? 0 : Int.random(in: 1...3, using: &rng))
                replicas[i].update(member, by: me)
            case 1:
                replicas[i].observe(me, reaches: uids.randomElement(using: &rng)!, Bool.random(using: &rng))
            default:
                let j = Int.random(in: 0..<replicas.count, using: &rng)
                replicas[i] = replicas[i].merged(with: replicas[j])
            }
            snapshots.append(replicas[i])
        }
        return snapshots
    }

    @Test func mergeIsCommutativeAssociativeAndIdempotent() {
        var rng = SeededRandom(seed: 2026)
        for _ in 0..<100 {
            let states = Self.randomHistory(&rng)
            for _ in 0..<50 {
                let a = states.randomElement(using: &rng)!
                let b = states.randomElement(using: &rng)!
                let c = states.randomElement(using: &rng)!
                #expect(a.merged(with: b).content == b.merged(with: a).content)
                #expect(a.merged(with: b.merged(with: c)).content == a.merged(with: b).merged(with: c).content)
                #expect(a.merged(with: a).content == a.content)
            }
        }
    }

    /// The join by definition: every member and every observer's records,
    /// the later of each.
    static func naiveJoin(_ a: Gossip, _ b: Gossip) -> Gossip.Content {
        Gossip.Content(
            members: a.members.merging(b.members) { Member.later($0, $1) },
            reachability: a.reachability.merged(with: b.reachability))
    }

    /// The versions' shortcuts (same version: same content; a dominating
    /// version: that side already holds the join) and the walking join agree
    /// with the join by definition, and derived fields match a fresh
    /// computation.
    @Test func versionShortcutsAgreeWithTheFullJoin() throws {
        var rng = SeededRandom(seed: 7)
        var shortcuts = 0
        for _ in 0..<100 {
            let states = Self.randomHistory(&rng)
            for _ in 0..<50 {
                let a = states.randomElement(using: &rng)!
                let b = states.randomElement(using: &rng)!
                if a.version == b.version { #expect(a.content == b.content) }
                if a.version.compare(b.version) != .concurrent { shortcuts += 1 }
                let merged = a.merged(with: b)
                #expect(merged.content == Self.naiveJoin(a, b))
                #expect(a.joined(with: b).content == Self.naiveJoin(a, b))
                let decoded = try CBORDecoder().decode(Gossip.self, from: CBOREncoder().encode(merged))
                #expect(decoded == merged)  // includes current, unreachable and leader, recomputed
            }
        }
        #expect(shortcuts > 1_000)  // the shortcuts were exercised
    }

    @Test func statusesOnlyMoveForward() {
        let legal: [(MemberStatus, MemberStatus)] = [
            (.joining, .up), (.up, .leaving), (.leaving, .exiting), (.exiting, .removed), (.down, .removed),
            (.up, .down), (.joining, .down), (.joining, .removed),
        ]
        for (from, to) in legal { #expect(from.canMove(to: to), "\(from) -> \(to)") }
        let illegal: [(MemberStatus, MemberStatus)] = [
            (.up, .joining), (.removed, .up), (.down, .up), (.exiting, .leaving), (.removed, .joining),
            (.joining, .exiting),
        ]
        for (from, to) in illegal { #expect(!from.canMove(to: to), "\(from) -> \(to)") }

        var g = Gossip()
        g.update(Member(node: Self.node(1), status: .up, upNumber: 1), by: 1)
        let movedBack = g.update(Member(node: Self.node(1), status: .joining), by: 1)
        #expect(!movedBack)
        #expect(g.members[1]?.status == .up)
    }

    @Test func aMergeNeverMovesAMemberBackwards() {
        var old = Gossip()
        old.update(Member(node: Self.node(1), status: .up, upNumber: 1), by: 1)
        var newer = old
        newer.update(Member(node: Self.node(1), status: .leaving, upNumber: 1), by: 2)
        #expect(old.merged(with: newer).members[1]?.status == .leaving)
        #expect(newer.merged(with: old).members[1]?.status == .leaving)
    }

    @Test func convergenceNeedsEveryReachableMemberToHaveSeenTheState() {
        var g = Gossip()
        for uid in UInt64(1)...3 { g.update(Member(node: Self.node(uid), status: .up, upNumber: Int(uid)), by: 1) }
        #expect(!g.isConverged)
        g.markSeen(by: 2)
        #expect(!g.isConverged)
        g.markSeen(by: 3)
        #expect(g.isConverged)
        // A new observation is a new state: nobody else has seen it yet.
        g.observe(1, reaches: 3, false)
        #expect(!g.isConverged)
        g.markSeen(by: 2)
        // Node 3 is unreachable, so it is not waited for.
        #expect(g.isConverged)
    }

    /// Equal versions with different members break the version rule; only
    /// a faulty or hostile peer sends them. The merge joins them in full.
    @Test func aStateThatBreaksTheVersionRuleIsJoinedNotTrusted() {
        var a = Gossip()
        a.update(Member(node: Self.node(1), status: .up, upNumber: 1), by: 1)
        var b = Gossip()
        b.update(Member(node: Self.node(2), status: .up, upNumber: 1), by: 1)
        b.update(Member(node: Self.node(3), status: .joining), by: 1)
        a.observe(1, reaches: 2, false)  // same counters: {1: 2} on both sides
        #expect(a.version == b.version)
        #expect(Set(a.merged(with: b).members.keys) == [1, 2, 3])
        #expect(Set(b.merged(with: a).members.keys) == [1, 2, 3])
    }

    @Test func seenSetsUniteOnlyWhenBothSidesHoldTheSameState() {
        var a = Gossip()
        a.update(Member(node: Self.node(1), status: .up, upNumber: 1), by: 1)
        a.update(Member(node: Self.node(2), status: .up, upNumber: 2), by: 1)
        var b = a
        b.markSeen(by: 2)
        #expect(a.merged(with: b).seen == [1, 2])
        var c = a
        c.update(Member(node: Self.node(3), status: .joining), by: 2)
        #expect(a.merged(with: c).seen == [2])  // c's version includes a's: c's seen carries over
    }

    @Test func theLeaderIsTheLowestReachableUpMember() {
        var g = Gossip()
        g.update(Member(node: Self.node(3), status: .joining), by: 3)
        g.update(Member(node: Self.node(2), status: .joining), by: 3)
        #expect(g.leader?.uid == 2)  // no one is up yet: the lowest joining member
        g.update(Member(node: Self.node(3), status: .up, upNumber: 1), by: 3)
        #expect(g.leader?.uid == 3)  // up members come first
        g.update(Member(node: Self.node(1), status: .up, upNumber: 2), by: 3)
        #expect(g.leader?.uid == 1)
        g.observe(3, reaches: 1, false)
        #expect(g.leader?.uid == 3)  // an unreachable member cannot lead
        g.observe(3, reaches: 1, true)
        #expect(g.leader?.uid == 1)
    }
}

@Suite(.timeLimit(.minutes(5))) struct PhiAccrualDetectorTests {
    func regular(every interval: Double, count: Int) -> (PhiAccrualDetector, Double) {
        var d = PhiAccrualDetector()
        var t = 0.0
        for _ in 0..<count {
            d.heartbeat(at: t)
            t += interval
        }
        return (d, t - interval)
    }

    @Test func regularHeartbeatsKeepPhiLow() {
        let (d, last) = regular(every: 0.5, count: 40)
        #expect(d.phi(at: last + 0.5) < 1)
        #expect(d.isAvailable(at: last + 1.0))
    }

    @Test func silenceRaisesPhiPastTheThresholdWithinThreeSeconds() {
        let (d, last) = regular(every: 0.5, count: 40)
        var t = last
        while d.isAvailable(at: t) { t += 0.01 }
        let detection = t - last
        #expect(detection > 1.0)  // not before the acceptable pause
        #expect(detection < 3.0)  // the loopback bound
    }

    @Test func phiGrowsMonotonicallyWithSilence() {
        let (d, last) = regular(every: 0.5, count: 40)
        var previous = -1.0
        for step in stride(from: 0.0, through: 5.0, by: 0.1) {
            let phi = d.phi(at: last + step)
            #expect(phi >= previous)
            #expect(phi.isFinite)
            previous = phi
        }
    }

    /// Outages are not learned: after three 10 s silences, a fourth is
    /// detected as fast as the first was (chaos seed 23's 7106 looked
    /// reachable through a whole partition because they were).
    @Test func aDetectorThatLivedThroughOutagesStillDetectsTheNextOneAsFast() {
        var (d, last) = regular(every: 0.5, count: 40)
        func detection(_ d: PhiAccrualDetector, after last: Double) -> Double {
            var t = last
            while d.isAvailable(at: t) { t += 0.01 }
            return t - last
        }
        let first = detection(d, after: last)
        var t = last
        for _ in 0..<3 {
            t += 10  // an outage: the next heartbeat comes 10 s later
            d.heartbeat(at: t)
            for _ in 0..<10 {
                t += 0.5
                d.heartbeat(at: t)
            }
        }
        #expect(abs(detection(d, after: t) - first) < 0.05, "the outages widened what counts as normal")
    }

    @Test func noHeartbeatYetMeansNoSuspicion() {
        #expect(PhiAccrualDetector().phi(at: 1_000) == 0)
    }
}
