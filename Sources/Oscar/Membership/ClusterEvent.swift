/// A change in membership, as one node sees it.
public enum ClusterEvent: Sendable, Hashable, CustomStringConvertible {
    case memberJoined(Member)
    case memberUp(Member)
    case memberLeft(Member)
    case memberExited(Member)
    case memberDowned(Member)
    case memberRemoved(Member)
    case unreachable(Member)
    case reachable(Member)
    case leaderChanged(NodeAddress?)

    public var description: String {
        switch self {
        case .memberJoined(let m): "joined: \(m.node)"
        case .memberUp(let m): "up: \(m.node)"
        case .memberLeft(let m): "leaving: \(m.node)"
        case .memberExited(let m): "exiting: \(m.node)"
        case .memberDowned(let m): "down: \(m.node)"
        case .memberRemoved(let m): "removed: \(m.node)"
        case .unreachable(let m): "unreachable: \(m.node)"
        case .reachable(let m): "reachable again: \(m.node)"
        case .leaderChanged(let n): "leader: \(n.map { "\($0)" } ?? "none")"
        }
    }

    /// The events that take one view of the cluster to the next.
    static func diff(from old: Gossip, to new: Gossip) -> [ClusterEvent] {
        guard old.content != new.content else { return [] }
        var events: [ClusterEvent] = []
        let (oldUnreachable, newUnreachable) = (old.unreachable, new.unreachable)
        for (uid, member) in new.members.sorted(by: { $0.key < $1.key }) {
            let before = old.members[uid]
            if before?.status != member.status {
                switch member.status {
                case .joining: events.append(.memberJoined(member))
                case .up: events.append(.memberUp(member))
                case .leaving: events.append(.memberLeft(member))
                case .exiting: events.append(.memberExited(member))
                case .down: events.append(.memberDowned(member))
                case .removed: events.append(.memberRemoved(member))
                }
            }
            guard member.status != .removed, before != nil else { continue }
            let wasReachable = !oldUnreachable.contains(uid)
            let isReachable = !newUnreachable.contains(uid)
            if wasReachable && !isReachable { events.append(.unreachable(member)) }
            if !wasReachable && isReachable { events.append(.reachable(member)) }
        }
        if old.leader?.node != new.leader?.node { events.append(.leaderChanged(new.leader?.node)) }
        return events
    }
}
