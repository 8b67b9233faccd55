import OscarBase

/// What a node knows of the cluster, and what nodes gossip to each other:
/// the members (removed ones kept as tombstones, so they cannot come back),
/// who observes whom as unreachable, and who has seen this exact state.
///
/// `members` and `reachability` form a join-semilattice: `merged(with:)` is
/// commutative, associative and idempotent on them (tested on generated
/// states), so nodes converge whatever the order gossip arrives in. The
/// `version` names the content, so most merges are a comparison of versions
/// and no member is touched. `seen` is not part of the join; it tracks
/// convergence: a state is converged when every member that counts has seen
/// it.
package struct Gossip: Codable, Hashable, Sendable {
    public private(set) var members: [UInt64: Member] = [:]
    public private(set) var reachability = Reachability()
    /// Names the content exactly (see `VersionVector`): every change this
    /// node makes raises its own counter.
    public private(set) var version = VersionVector()
    /// Who has seen this exact state: a flag per member of `current`, in the
    /// same order. Two states with the same version have the same `current`,
    /// so their flags line up and unite with an `or`, with no hashing; only
    /// current members count for convergence, so only they are recorded.
    private(set) var seenFlags = MemberFlags(count: 0)
    /// Members that are part of the cluster now (not removed), in address
    /// order. Stored, like `unreachable` and `leader`: they are read many
    /// times per action and change only with the content.
    public private(set) var current: [Member] = []
    /// Removed members' uids, sorted: with `current`, every member.
    package private(set) var tombstones: [UInt64] = []
    /// Current members that some current member observes as unreachable.
    public private(set) var unreachable: Set<UInt64> = []
    /// The same, as a flag per member of `current`: read on every tick for
    /// every member, without hashing.
    private(set) var unreachableFlags = MemberFlags(count: 0)
    /// Current members that are down, and those exiting, as flags: neither
    /// is waited for to converge nor gossiped to, and every tick asks.
    private(set) var downFlags = MemberFlags(count: 0)
    private(set) var exitingFlags = MemberFlags(count: 0)
    /// The reachable member with the lowest address among those up or
    /// leaving (among joining ones while none is up yet).
    public private(set) var leader: Member?

    public init() {}

    /// Coded by hand, flat: `[members, reachability, version, seen]`, the
    /// members one array of their fields in a row (`Member.encodeFields`).
    /// A round carries every member, and at 64 idle nodes decoding them
    /// through keyed containers (a key search for every field of every
    /// member) was a fifth of all the nodes' CPU. A member listed twice, or
    /// anything after `seen`, is an error: an honest node sends neither, and
    /// settling duplicates would let one payload make the decoder sort the
    /// same large record again and again.
    public init(from decoder: any Decoder) throws {
        var c = try decoder.unkeyedContainer()
        var fields = try c.nestedUnkeyedContainer()
        while !fields.isAtEnd {
            let member = try Member(fields: &fields)
            guard members.updateValue(member, forKey: member.uid) == nil else {
                throw DecodingError.dataCorruptedError(
                    in: fields, debugDescription: "member \(member.uid) listed twice")
            }
        }
        reachability = try c.decode(Reachability.self)
        version = try c.decode(VersionVector.self)
        let seen = Set(try c.decode([UInt64].self))
        guard c.isAtEnd else { throw DecodingError.dataCorruptedError(in: c, debugDescription: "items after seen") }
        current = members.values.filter { $0.status != .removed }.sorted(by: Self.addressOrder)
        tombstones = members.values.filter { $0.status == .removed }.map(\.uid).sorted()
        seenFlags = MemberFlags(count: current.count) { [current] in seen.contains(current[$0].uid) }
        refreshDerived()
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.unkeyedContainer()
        var fields = c.nestedUnkeyedContainer()
        for member in members.values { try member.encodeFields(to: &fields) }
        try c.encode(reachability)
        try c.encode(version)
        try c.encode(seenFlags.setIndices.map { current[$0].uid })
    }

    /// The join of both states' members and reachability.
    public struct Content: Hashable, Sendable {
        public var members: [UInt64: Member]
        public var reachability: Reachability
    }

    public var content: Content { Content(members: members, reachability: reachability) }

    // MARK: - Changes made by this node

    /// Adds or advances a member. A status may only move forward
    /// (`MemberStatus.canMove`), and the new record must be the later one by
    /// the merge's order, so a change never takes the state back down the
    /// lattice; anything else is ignored and returns false. `observer` is
    /// the node making the change: this node.
    @discardableResult
    public mutating func update(_ member: Member, by observer: UInt64) -> Bool {
        if let existing = members[member.uid] {
            guard existing != member, existing.status.canMove(to: member.status),
                Member.later(existing, member) == member
            else { return false }
        }
        members[member.uid] = member
        // Keep `current` sorted without sorting it again.
        if member.status == .removed {
            current.removeAll { $0.uid == member.uid }
            let at = tombstones.firstIndex { $0 >= member.uid } ?? tombstones.endIndex
            if at == tombstones.endIndex || tombstones[at] != member.uid { tombstones.insert(member.uid, at: at) }
        } else if let i = currentIndex(of: member.uid) {
            current[i] = member
        } else {
            current.insert(member, at: position(of: member.node))
        }
        changed(by: observer)
        refreshDerived()
        return true
    }

    public mutating func observe(_ observer: UInt64, reaches subject: UInt64, _ reachable: Bool) {
        guard reachability.observe(observer, reaches: subject, reachable) else { return }
        changed(by: observer)
        refreshReachability()
    }

    /// Records that current member `uid` has seen this state.
    public mutating func markSeen(by uid: UInt64) {
        if let i = currentIndex(of: uid) { seenFlags[i] = true }
    }

    /// Where member `uid` sits in `current`: its address from the member
    /// table, then a binary search of the address order, which `current`
    /// keeps (every node takes gossip many times a tick; a scan grows with
    /// the cluster). A uid is one process, so its address never changes;
    /// should a peer's state pair them otherwise, a scan still finds it.
    package func currentIndex(of uid: UInt64) -> Int? {
        guard let node = members[uid]?.node else { return nil }
        let at = position(of: node)
        if at < current.count, current[at].uid == uid { return at }
        return current.firstIndex { $0.uid == uid }
    }

    /// The first place in `current` whose address is not before `node`'s:
    /// where `node` is, or where it goes.
    private func position(of node: NodeAddress) -> Int {
        var low = 0
        var high = current.count
        while low < high {
            let mid = (low + high) / 2
            if Self.addressOrder(current[mid].node, node) { low = mid + 1 } else { high = mid }
        }
        return low
    }

    /// A new state: only the node that made it has seen it.
    private mutating func changed(by observer: UInt64) {
        version.increment(observer)
        seenFlags = MemberFlags(count: current.count)
        markSeen(by: observer)
    }

    // MARK: - Merging

    /// Merges gossip received from another node. The versions decide:
    /// the same version is the same content, so whoever had seen either has
    /// seen the result; a state that includes the other is the result as it
    /// stands; only concurrent states are joined member by member, and then
    /// nobody but the merging node has seen the result (it marks itself).
    public func merged(with other: Gossip) -> Gossip {
        switch version.compare(other.version) {
        case .same where current.count == other.current.count:
            var out = self
            out.seenFlags.formUnion(other.seenFlags)
            return out
        case .after: return self
        case .before: return other
        case .concurrent, .same:
            // (.same with different members only comes from a peer that
            // broke the version rule: join rather than trust it.)
            return joined(with: other)
        }
    }

    /// The join of both contents, whatever the versions say. `merged(with:)`
    /// takes this path only for concurrent states, whose join is new to
    /// both sides: nobody has seen it yet. The tests check that the
    /// shortcuts agree with it.
    ///
    /// Under message loss a thousand-node cluster merges concurrent states
    /// several times a second per node, so this avoids touching every
    /// member: it walks the two sorted `current` arrays and writes only the
    /// records that differ, and merges only the observers whose version
    /// counters differ (an observer's records change only with its counter).
    package func joined(with other: Gossip) -> Gossip {
        var out = self
        out.version = version.merged(with: other.version)
        out.reachability = reachability.merged(
            with: other.reachability, observers: version.nodesDiffering(from: other.version))
        // Most concurrent states differ only in reachability (a suspicion
        // and its refutation): then this side's members stand as they are.
        var same = self.current.count == other.current.count
        if same {
            for i in self.current.indices where !Self.sameRecord(self.current[i], other.current[i]) {
                same = false
                break
            }
        }
        // Most often one side's records are the join (it holds every change
        // the other does: a *down* spreading from the leader meets states
        // that differ from it only in reachability). Then the result keeps
        // that side's tables, shared, not rebuilt: at 10,000 members a
        // rebuilt table is megabytes, held by every node that merged.
        var isTheirs = false
        if !same {
            var current: [Member] = []
            current.reserveCapacity(max(self.current.count, other.current.count))
            var isMine = true
            isTheirs = true
            Self.walk(self.current, other.current) { i, j in
                let mine = i.map { self.current[$0] } ?? members[other.current[j!].uid]
                let theirs = j.map { other.current[$0] } ?? other.members[self.current[i!].uid]
                let member: Member
                switch (mine, theirs) {
                case (let a?, let b?): member = Self.sameRecord(a, b) ? a : .later(a, b)
                case (let a?, nil): member = a
                case (nil, let b?): member = b
                case (nil, nil): return  // cannot happen: the walk visits members of either side
                }
                if member.status != mine?.status || member.upNumber != mine?.upNumber {
                    out.members[member.uid] = member
                    isMine = false
                }
                if !(theirs.map { Self.sameRecord($0, member) } ?? false) { isTheirs = false }
                if member.status != .removed { current.append(member) }
            }
            out.current = isMine ? self.current : current
        }
        // Tombstones on both sides, or only on the other (the walk saw the
        // members current on either side).
        for uid in other.tombstones {
            guard let theirs = other.members[uid] else { continue }
            let mine = members[uid]
            guard mine?.status ?? .removed == .removed else { continue }
            let member = mine.map { Self.sameRecord($0, theirs) ? $0 : Member.later($0, theirs) } ?? theirs
            if member.status != mine?.status || member.upNumber != mine?.upNumber { out.members[uid] = member }
            if !Self.sameRecord(member, theirs) { isTheirs = false }
        }
        if other.tombstones != tombstones { out.tombstones = Array(Set(tombstones).union(other.tombstones)).sorted() }
        // Each of their records is the join's, and they hold every one of
        // mine: both of their tables are the join's.
        if isTheirs, tombstones.allSatisfy({ other.members[$0] != nil }) {
            out.members = other.members
            out.current = other.current
        }
        out.seenFlags = MemberFlags(count: out.current.count)
        out.refreshDerived()
        return out
    }

    /// Two records of the same member at the same stage. A member's address,
    /// roles and version never change for one uid (a restart is a new uid),
    /// so comparing the fields that do change is enough, and cheap.
    static func sameRecord(_ a: Member, _ b: Member) -> Bool {
        a.uid == b.uid && a.status == b.status && a.upNumber == b.upNumber
    }

    /// Visits the indices of two address-sorted member arrays in address
    /// order, in pairs when both hold the member. One merge walk serves both
    /// the join and the event diff, so neither sorts, hashes nor copies
    /// every member.
    static func walk(_ a: [Member], _ b: [Member], _ visit: (Int?, Int?) -> Void) {
        var i = 0
        var j = 0
        while i < a.count, j < b.count {
            if a[i].uid == b[j].uid {
                visit(i, j)
                i += 1
                j += 1
            } else if addressOrder(a[i], b[j]) {
                visit(i, nil)
                i += 1
            } else {
                visit(nil, j)
                j += 1
            }
        }
        for i in i..<a.count { visit(i, nil) }
        for j in j..<b.count { visit(nil, j) }
    }

    /// Recomputes everything derived from `current` and `reachability`.
    private mutating func refreshDerived() {
        refreshStatusFlags()
        refreshReachability()
    }

    /// Recomputes the down and exiting flags from `current`: only a change
    /// of `current` (an update, a join, a decode) moves them.
    private mutating func refreshStatusFlags() {
        downFlags = MemberFlags(count: current.count) { [current] in current[$0].status == .down }
        exitingFlags = MemberFlags(count: current.count) { [current] in current[$0].status == .exiting }
    }

    /// Recomputes `unreachable`, its flags and `leader`, which follow
    /// `reachability` as well as `current`: an observation moves only these.
    private mutating func refreshReachability() {
        func isCurrent(_ uid: UInt64) -> Bool { members[uid].map { $0.status != .removed } ?? false }
        var out: Set<UInt64> = []
        // Few observers hold a suspicion: look members up for those only.
        for (observer, o) in reachability.observers where !o.unreachable.isEmpty && isCurrent(observer) {
            for subject in o.unreachable where subject != observer && isCurrent(subject) {
                out.insert(subject)
            }
        }
        unreachable = out
        unreachableFlags = MemberFlags(count: current.count)
        for uid in out {
            if let i = currentIndex(of: uid) { unreachableFlags[i] = true }
        }
        var firstJoining: Member?
        leader = nil
        for (i, m) in current.enumerated() where !unreachableFlags[i] {
            if m.status == .up || m.status == .leaving {
                leader = m
                break
            }
            if m.status == .joining, firstJoining == nil { firstJoining = m }
        }
        if leader == nil { leader = firstJoining }
    }

    // MARK: - Reading

    public func isReachable(_ uid: UInt64) -> Bool { !unreachable.contains(uid) }

    /// The current members that have seen this exact state.
    public var seen: Set<UInt64> { Set(seenFlags.setIndices.map { current[$0].uid }) }

    public func hasSeen(_ uid: UInt64) -> Bool { currentIndex(of: uid).map { seenFlags[$0] } ?? false }

    /// Converged: every current, reachable member that is not down or exiting
    /// has seen this state. Unreachable members are not waited for (they
    /// cannot see it), so one unreachable member does not block every change;
    /// nor are exiting ones, which stop once they know they are exiting.
    public var isConverged: Bool {
        MemberFlags.cover(current.count, seenFlags, unreachableFlags, downFlags, exitingFlags)
    }

    /// Lowest host, then port, then uid: every node sorts members the same way.
    package static func addressOrder(_ a: Member, _ b: Member) -> Bool { addressOrder(a.node, b.node) }

    static func addressOrder(_ a: NodeAddress, _ b: NodeAddress) -> Bool {
        (a.host, a.port, a.uid) < (b.host, b.port, b.uid)
    }
}
