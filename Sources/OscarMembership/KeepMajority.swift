import OscarBase

/// Keep-majority downing, as one pure decision over a node's view: which
/// side this node is on, and whether that side may down the other, must
/// down itself, or must wait.
///
/// The rule (docs/DOWNING.md has the proof sketch and what it costs):
/// - **Voters** are the current members that were up at some point: up,
///   leaving, exiting and down ones. A downed or exiting member still counts
///   in the total until removed, so a side cannot shrink the total by
///   downing, and an exit that one side has seen and the other has not
///   changes neither total. The exceptions are members certainly gone: a
///   downed one replaced by a new incarnation on its endpoint, and an
///   exiting one that told this node it is exiting (it stops as it sees
///   that).
/// - **My side** is the voters that are up or leaving, that no observer in
///   this view calls unreachable, and that are *settled*: their promotion to
///   up was seen by every member, so every other side counts them as voters
///   too. A member promoted just before a partition counts in my total but
///   not on my side.
/// - **Consistent**: the view is converged, so every member of my side has
///   seen exactly this state, and so agrees on who is unreachable.
/// - **Majority**: my side holds more than half of the voters, or exactly
///   half and the lowest voter, and then only when every voter is settled
///   (otherwise the other side may count a different total).
///
/// Two sides that both pass this test share a member (two strict majorities
/// of one voter set intersect; a side's total only ever includes more voters
/// than another side knows of, never fewer, until removal), and that member
/// saw both states, which the gossip lattice orders: one side's state
/// includes the other's. A member outside my side is downed; one that finds
/// itself outside its own side downs itself.
struct KeepMajority {
    enum Decision: Equatable {
        /// Not stable, or not consistent, yet.
        case wait
        /// This side is the majority: down these (the unreachable ones).
        case downOthers([UInt64])
        /// This node is not on a majority side: it downs itself.
        case downSelf
    }

    /// Decides for node `me` from its view. `settled` are the members known
    /// to have been seen up by every member; `exited`, exiting members that
    /// told this node so (they have stopped).
    static func decide(me: UInt64, gossip: Gossip, settled: Set<UInt64>, exited: Set<UInt64> = []) -> Decision {
        decide(me: me, gossip: gossip, isSettled: settled.contains, exited: exited)
    }

    /// The same, asking `isSettled` whether every member is known to have
    /// seen a member up.
    static func decide(
        me: UInt64, gossip: Gossip, isSettled: (UInt64) -> Bool, exited: Set<UInt64> = []
    ) -> Decision {
        guard gossip.isConverged else { return .wait }
        // A member promoted no later than every unreachable voter (in an
        // earlier round, or in the same one) counts as settled even when an
        // unreachable one never acknowledged its promotion: an unreachable
        // voter promoted later was promoted by a leader that knew it up, and
        // one promoted in the same round became up in the same state, so if
        // that voter is alive on another side, its view counts it as a voter
        // too, as a settled member's would. A kill right after a promotion
        // (before the killed member acknowledged the state that promoted it
        // and the others beside it) then leaves the rest a majority instead
        // of downing everyone.
        //
        // Indices, not member copies (each copy retains the member's
        // strings): every node runs this on every tick while a member is
        // unreachable, at 10,000 members too.
        let members = gossip.current
        var firstUnreachableUp = Int.max
        for i in gossip.unreachableFlags.setIndices
        where members[i].upNumber > 0 && (members[i].status == .up || members[i].status == .leaving) {
            firstUnreachableUp = min(firstUnreachableUp, members[i].upNumber)
        }
        var voters = 0
        var mine = 0
        var allSettled = true
        var lowestIsMine: Bool?
        var unreachable: [UInt64] = []
        for i in members.indices {
            let (status, upNumber, uid) = (members[i].status, members[i].upNumber, members[i].uid)
            let flagged = gossip.unreachableFlags[i]
            if flagged, status != .down, status != .exiting { unreachable.append(uid) }
            guard upNumber > 0, status != .joining, !(status == .down && isReplaced(members[i], in: gossip)),
                !(status == .exiting && exited.contains(uid))
            else { continue }
            voters += 1
            let settled = upNumber <= firstUnreachableUp || isSettled(uid)
            if !settled { allSettled = false }
            let isMine = (status == .up || status == .leaving) && !flagged && settled
            if isMine { mine += 1 }
            if lowestIsMine == nil { lowestIsMine = isMine }  // `current` is in address order
        }
        let meOnMySide = gossip.currentIndex(of: me).map { i in
            !gossip.unreachableFlags[i] && members[i].status != .down
        }
        guard meOnMySide == true else { return .downSelf }
        let majority = mine * 2 > voters || (allSettled && mine * 2 == voters && lowestIsMine == true)
        return majority ? .downOthers(unreachable) : .downSelf
    }

    /// A downed member whose endpoint a newer incarnation holds in this
    /// view: its process is certainly gone (the new one bound its port), so
    /// it needs no removal margin and counts as a voter nowhere.
    static func isReplaced(_ member: Member, in gossip: Gossip) -> Bool {
        gossip.current.contains { $0.uid != member.uid && $0.status != .down && $0.node.hasEndpoint(of: member.node) }
    }
}
