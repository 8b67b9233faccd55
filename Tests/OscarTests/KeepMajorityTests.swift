import Oscar
import Testing

@testable import OscarMembership

/// The keep-majority decision on views built by hand: who is on my side,
/// what counts as a voter, and when a node must wait or down itself.
@Suite(.timeLimit(.minutes(5))) struct KeepMajorityTests {
    static func address(_ uid: UInt64, port: Int? = nil) -> NodeAddress {
        NodeAddress(host: "10.0.0.1", port: port ?? 7000 + Int(uid), uid: uid)
    }

    /// Members 1...n up (up number = uid), seen by `seenBy`, with
    /// `unreachable` flagged by member 1 (or by 2 when 1 is flagged).
    static func view(_ n: UInt64, unreachable: [UInt64] = [], seenBy: [UInt64]? = nil) -> Gossip {
        var g = Gossip()
        for uid in 1...n { g.update(Member(node: address(uid), status: .up, upNumber: Int(uid)), by: 1) }
        for uid in unreachable { g.observe(unreachable.contains(1) && uid != 2 ? 2 : 1, reaches: uid, false) }
        for uid in seenBy ?? Array(1...n) { g.markSeen(by: uid) }
        return g
    }

    @Test func aConsistentSettledMajorityDownsTheOthers() {
        let g = Self.view(5, unreachable: [4, 5])
        #expect(KeepMajority.decide(me: 2, gossip: g, settled: Set(1...5)) == .downOthers([4, 5]))
    }

    /// Unsettled: promoted after an unreachable voter, which may not know it.
    @Test func membersWhosePromotionNotEveryoneSawDoNotCountOnMySide() {
        let g = Self.view(5, unreachable: [1, 2])
        #expect(KeepMajority.decide(me: 3, gossip: g, settled: [1, 2, 3, 4]) == .downSelf, "5 is unsettled: 2 of 5")
    }

    /// A member promoted before every unreachable voter counts: each of those,
    /// if alive elsewhere, was promoted in a state that holds it up. The kill
    /// of the newest member before it acknowledged the others' promotion
    /// (`cluster up`, then `cluster kill` of the last node) leaves the rest
    /// a majority; that of an older one still downs them (2 of 3 may not
    /// know 3 is up).
    @Test func membersPromotedBeforeEveryUnreachableVoterCountOnMySide() {
        let newestKilled = Self.view(3, unreachable: [3])
        #expect(KeepMajority.decide(me: 1, gossip: newestKilled, settled: [1]) == .downOthers([3]))
        #expect(KeepMajority.decide(me: 2, gossip: newestKilled, settled: [1]) == .downOthers([3]))
        let olderKilled = Self.view(3, unreachable: [2])
        #expect(KeepMajority.decide(me: 1, gossip: olderKilled, settled: [1]) == .downSelf)
        let g = Self.view(5, unreachable: [4, 5])
        #expect(KeepMajority.decide(me: 2, gossip: g, settled: [1, 2, 4, 5]) == .downOthers([4, 5]), "3 < 4: 3 of 5")
    }

    /// Members promoted in one round became up in one state: a voter of
    /// that round alive elsewhere knows the others up. The kill of one of
    /// two members promoted together, before it acknowledged the state,
    /// leaves the rest a majority (found under the sanitizer, where a test
    /// killed a node 30 ms after its promotion and all three went down).
    @Test func membersPromotedInTheSameRoundAsAnUnreachableVoterCountOnMySide() {
        var g = Gossip()
        for uid: UInt64 in 1...3 {
            g.update(Member(node: Self.address(uid), status: .up, upNumber: uid == 1 ? 1 : 2), by: 1)
        }
        g.observe(1, reaches: 2, false)
        for uid: UInt64 in 1...3 { g.markSeen(by: uid) }
        #expect(KeepMajority.decide(me: 1, gossip: g, settled: [1]) == .downOthers([2]))
        #expect(KeepMajority.decide(me: 3, gossip: g, settled: [1]) == .downOthers([2]))
        let tie = Self.view(2, unreachable: [2])
        #expect(
            KeepMajority.decide(me: 1, gossip: tie, settled: [1]) == .downOthers([2]),
            "the lowest voter of two, the other promoted after it: every voter is counted by both")
    }

    @Test func aViewMySideHasNotAllSeenMakesMeWait() {
        let g = Self.view(5, unreachable: [4, 5], seenBy: [1, 2])
        #expect(KeepMajority.decide(me: 2, gossip: g, settled: Set(1...5)) == .wait)
    }

    @Test func aTieGoesToTheLowestVoterOnlyWhenEveryVoterIsSettled() {
        let g = Self.view(4, unreachable: [3, 4])
        #expect(KeepMajority.decide(me: 2, gossip: g, settled: Set(1...4)) == .downOthers([3, 4]))
        #expect(KeepMajority.decide(me: 2, gossip: g, settled: [1, 2, 3]) == .downSelf)
        let other = Self.view(4, unreachable: [1, 2])
        #expect(KeepMajority.decide(me: 3, gossip: other, settled: Set(1...4)) == .downSelf, "the side without 1")
    }

    @Test func aNodeOthersCannotReachDownsItself() {
        let g = Self.view(5, unreachable: [2])
        #expect(KeepMajority.decide(me: 2, gossip: g, settled: Set(1...5)) == .downSelf)
        #expect(KeepMajority.decide(me: 1, gossip: g, settled: Set(1...5)) == .downOthers([2]))
    }

    /// A downed member still counts in the total, unless a new incarnation
    /// holds its address: then its process is certainly gone.
    @Test func aDownedMemberCountsUntilANewIncarnationReplacesIt() {
        var g = Self.view(5, unreachable: [3, 4])
        var five = g.members[5]!
        five.status = .down
        g.update(five, by: 1)
        for uid in UInt64(1)...5 { g.markSeen(by: uid) }
        #expect(KeepMajority.decide(me: 1, gossip: g, settled: Set(1...5)) == .downSelf, "2 of 5 voters")
        g.update(Member(node: Self.address(50, port: 7005), status: .joining), by: 1)
        for uid: UInt64 in [1, 2, 3, 4, 50] { g.markSeen(by: uid) }
        #expect(KeepMajority.isReplaced(g.members[5]!, in: g))
        #expect(
            KeepMajority.decide(me: 1, gossip: g, settled: Set(1...5)) == .downOthers([3, 4]),
            "2 of 4 voters, with the lowest")
    }
}
