import OscarBase

/// Where a member is in its life in the cluster.
///
/// ```
/// joining → up → leaving → exiting → removed
///              ↘ down → removed
/// ```
/// Unreachability is not a status: it is an observation, kept apart in
/// `Reachability`, so a member can be up and unreachable at once.
public enum MemberStatus: String, Codable, Sendable, CaseIterable, CustomStringConvertible {
    case joining, up, leaving, exiting, down, removed

    /// Merge precedence: when two views disagree, the later stage of life
    /// wins. A status can only move forward, so taking the maximum is safe.
    var precedence: Int {
        switch self {
        case .joining: 0
        case .up: 1
        case .leaving: 2
        case .exiting: 3
        case .down: 4
        case .removed: 5
        }
    }

    /// True when `next` is a legal next status (or the same one).
    public func canMove(to next: MemberStatus) -> Bool {
        switch (self, next) {
        case (let a, let b) where a == b: true
        case (.joining, .up), (.up, .leaving), (.leaving, .exiting), (.exiting, .removed), (.down, .removed): true
        case (.joining, .down), (.up, .down), (.leaving, .down), (.exiting, .down): true
        case (.joining, .removed): true  // a joining node that leaves before it is up
        default: false
        }
    }

    public var description: String { rawValue }
}

/// One node as the cluster knows it.
public struct Member: Codable, Hashable, Sendable, CustomStringConvertible {
    /// Address and uid: a restarted node is a new member.
    public var node: NodeAddress
    public var status: MemberStatus
    public var roles: Set<String>
    public var appVersion: String
    /// The round in which the leader promoted this member to up (1 =
    /// first); 0 while joining. Members promoted together share it. Age is
    /// (up number, address): the oldest up member hosts cluster singletons.
    public var upNumber: Int

    public init(
        node: NodeAddress, status: MemberStatus = .joining, roles: Set<String> = [], appVersion: String = "",
        upNumber: Int = 0
    ) {
        self.node = node
        self.status = status
        self.roles = roles
        self.appVersion = appVersion
        self.upNumber = upNumber
    }

    public var uid: UInt64 { node.uid }

    public var description: String { "\(node) (\(status))" }

    /// The later of two records of the same member: the higher status wins,
    /// then the higher up number. A total order, so merging by it is
    /// commutative, associative and idempotent.
    package static func later(_ a: Member, _ b: Member) -> Member {
        if a.status.precedence != b.status.precedence { return a.status.precedence > b.status.precedence ? a : b }
        if a.upNumber != b.upNumber { return a.upNumber > b.upNumber ? a : b }
        // Same stage: fields that never change for one uid; pick deterministically.
        return a.roles.sorted().lexicographicallyPrecedes(b.roles.sorted()) ? b : a
    }
}

extension Member {
    /// A member as its fields in a row: host, port, uid, status, roles,
    /// app version, up number. For gossip, which carries every member each
    /// round (`Gossip`'s coding); `Member`'s own `Codable` stays keyed.
    package func encodeFields(to fields: inout any UnkeyedEncodingContainer) throws {
        try node.encodeFields(to: &fields)
        try fields.encode(status)
        try fields.encode(Array(roles))
        try fields.encode(appVersion)
        try fields.encode(upNumber)
    }

    package init(fields: inout any UnkeyedDecodingContainer) throws {
        self.init(
            node: try NodeAddress(fields: &fields), status: try fields.decode(MemberStatus.self),
            roles: Set(try fields.decode([String].self)),
            appVersion: try fields.decode(String.self), upNumber: try fields.decode(Int.self))
    }
}
