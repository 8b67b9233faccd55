import Testing

@testable import Oscar

/// The pure membership state, with no sockets: merge laws on generated
/// states, status rules, convergence and the leader.
@Suite struct MembershipStateTests {
    static func node(_ uid: UInt64) -> NodeAddress { NodeAddress(host: "127.0.0.1", port: 7000 + Int(uid), uid: uid) }

    /// A random state over uids 1...6, as one node might hold it.
    static func randomGossip(_ rng: inout SeededRandom) -> Gossip {
        var g = Gossip()
        for uid in UInt64(1)...6 where Bool.random(using: &rng) {
            let status = MemberStatus.allCases.randomElement(using: &rng)!
            let member = Member(
                node: node(uid), status: status, roles: uid % 2 == 0 ? ["worker"] : [],
                upNumber: status == .joining ? 0 : Int.random(in: 1...3, using: &rng))
            g.update(member, by: uid)
        }
        for observer in UInt64(1)...6 {
            for _ in 0..<Int.random(in: 0...3, using: &rng) {
                g.observe(observer, reaches: UInt64.random(in: 1...6, using: &rng), Bool.random(using: &rng))
            }
        }
        return g
    }

    @Test func mergeIsCommutativeAssociativeAndIdempotent() {
        var rng = SeededRandom(seed: 2026)
        for _ in 0..<2_000 {
            let a = Self.randomGossip(&rng)
            let b = Self.randomGossip(&rng)
            let c = Self.randomGossip(&rng)
            #expect(a.merged(with: b).content == b.merged(with: a).content)
            #expect(a.merged(with: b.merged(with: c)).content == a.merged(with: b).merged(with: c).content)
            #expect(a.merged(with: a).content == a.content)
        }
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

    @Test func seenSetsUniteOnlyWhenBothSidesHoldTheSameState() {
        var a = Gossip()
        a.update(Member(node: Self.node(1), status: .up, upNumber: 1), by: 1)
        var b = a
        b.markSeen(by: 2)
        #expect(a.merged(with: b).seen == [1, 2])
        var c = a
        c.update(Member(node: Self.node(2), status: .joining), by: 2)
        #expect(a.merged(with: c).seen == [2])  // equals c's content: c's seen carries over
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

@Suite struct PhiAccrualDetectorTests {
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

    @Test func noHeartbeatYetMeansNoSuspicion() {
        #expect(PhiAccrualDetector().phi(at: 1_000) == 0)
    }
}
