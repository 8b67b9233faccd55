/// What a node knows of the cluster, and what nodes gossip to each other:
/// the members (removed ones kept as tombstones, so they cannot come back),
/// who observes whom as unreachable, and who has seen this exact state.
///
/// `members` and `reachability` form a join-semilattice: `merged(with:)` is
/// commutative, associative and idempotent on them (tested on generated
/// states), so nodes converge whatever the order gossip arrives in. `seen`
/// is not part of the join; it tracks convergence: a state is converged when
/// every member that counts has seen it.
public struct Gossip: Codable, Hashable, Sendable {
    public private(set) var members: [UInt64: Member] = [:] {
        didSet { current = Self.currentMembers(of: members) }
    }
    public private(set) var reachability = Reachability()
    public private(set) var seen: Set<UInt64> = []
    /// Members that are part of the cluster now (not removed), in address
    /// order. Stored, not computed: it is read many times per action and
    /// changes only with `members` (profiling showed sorting it per read
    /// dominating the simulator).
    public private(set) var current: [Member] = []

    public init() {}

    enum CodingKeys: String, CodingKey { case members, reachability, seen }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        reachability = try c.decode(Reachability.self, forKey: .reachability)
        seen = try c.decode(Set<UInt64>.self, forKey: .seen)
        members = try c.decode([UInt64: Member].self, forKey: .members)
        current = Self.currentMembers(of: members)
    }

    private static func currentMembers(of members: [UInt64: Member]) -> [Member] {
        members.values.filter { $0.status != .removed }.sorted(by: addressOrder)
    }

    /// The join of both states' members and reachability.
    public struct Content: Hashable, Sendable {
        public var members: [UInt64: Member]
        public var reachability: Reachability
    }

    public var content: Content { Content(members: members, reachability: reachability) }

    // MARK: - Changes made by this node

    /// Adds or advances a member. A status may only move forward
    /// (`MemberStatus.canMove`); anything else is ignored and returns false.
    @discardableResult
    public mutating func update(_ member: Member, by observer: UInt64) -> Bool {
        if let current = members[member.uid] {
            guard current.status.canMove(to: member.status), current != member else { return false }
        }
        members[member.uid] = member
        seen = [observer]
        return true
    }

    public mutating func observe(_ observer: UInt64, reaches subject: UInt64, _ reachable: Bool) {
        let before = reachability
        reachability.observe(observer, reaches: subject, reachable)
        if reachability != before { seen = [observer] }
    }

    public mutating func markSeen(by uid: UInt64) { seen.insert(uid) }

    // MARK: - Merging

    /// Merges gossip received from another node. When both held the same
    /// content, whoever had seen either has seen the result; otherwise nobody
    /// but the merging node has (it marks itself).
    public func merged(with other: Gossip) -> Gossip {
        var out = Gossip()
        out.members = members.merging(other.members) { Member.later($0, $1) }
        out.reachability = reachability.merged(with: other.reachability)
        if out.content == content && out.content == other.content {
            out.seen = seen.union(other.seen)
        } else if out.content == content {
            out.seen = seen
        } else if out.content == other.content {
            out.seen = other.seen
        }
        return out
    }

    // MARK: - Reading

    /// Current members that some current member observes as unreachable.
    /// Computed once per question: callers ask it for every member.
    public var unreachable: Set<UInt64> {
        let observers = Set(current.map(\.uid))
        var out: Set<UInt64> = []
        for (observer, o) in reachability.observers where observers.contains(observer) {
            for subject in o.unreachable where subject != observer && observers.contains(subject) {
                out.insert(subject)
            }
        }
        return out
    }

    public func isReachable(_ uid: UInt64) -> Bool { !unreachable.contains(uid) }

    /// Converged: every current, reachable member that is not down or exiting
    /// has seen this state. Unreachable members are not waited for (they
    /// cannot see it), so one unreachable member does not block every change;
    /// nor are exiting ones, which stop once they know they are exiting.
    public var isConverged: Bool {
        let unreachable = self.unreachable
        return current.allSatisfy {
            $0.status == .down || $0.status == .exiting || unreachable.contains($0.uid) || seen.contains($0.uid)
        }
    }

    /// The leader: the reachable member with the lowest address among those
    /// up or leaving (among joining ones while none is up yet).
    public var leader: Member? {
        let unreachable = self.unreachable
        let reachable = current.filter { !unreachable.contains($0.uid) }
        let candidates = reachable.filter { $0.status == .up || $0.status == .leaving }
        return (candidates.isEmpty ? reachable.filter { $0.status == .joining } : candidates).first
    }

    /// Lowest host, then port, then uid: every node sorts members the same way.
    static func addressOrder(_ a: Member, _ b: Member) -> Bool {
        (a.node.host, a.node.port, a.node.uid) < (b.node.host, b.node.port, b.node.uid)
    }
}
