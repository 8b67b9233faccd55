import OscarBase

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

    /// "up: 127.0.0.1:7001 (uid 1750…)": the uid names the incarnation, so
    /// a restarted node's "up" and its old incarnation's "removed", which
    /// share an address, read as two processes, not one.
    public var description: String {
        switch self {
        case .memberJoined(let m): "joined: \(Self.incarnationText(m))"
        case .memberUp(let m): "up: \(Self.incarnationText(m))"
        case .memberLeft(let m): "leaving: \(Self.incarnationText(m))"
        case .memberExited(let m): "exiting: \(Self.incarnationText(m))"
        case .memberDowned(let m): "down: \(Self.incarnationText(m))"
        case .memberRemoved(let m): "removed: \(Self.incarnationText(m))"
        case .unreachable(let m): "unreachable: \(Self.incarnationText(m))"
        case .reachable(let m): "reachable again: \(Self.incarnationText(m))"
        case .leaderChanged(let n): "leader: \(n.map { "\($0)" } ?? "none")"
        }
    }

    private static func incarnationText(_ member: Member) -> String { "\(member.node) (uid \(member.uid))" }

    /// The events that take one view of the cluster to the next, in address
    /// order. A member leaves `current` only by being removed, so walking the
    /// two address-sorted `current` arrays finds every change without
    /// touching the member table (diffing the whole table on every change
    /// was the cost at 1,000 nodes).
    static func diff(from old: Gossip, to new: Gossip) -> [ClusterEvent] {
        guard old.version != new.version else { return [] }
        var events: [ClusterEvent] = []
        Gossip.walk(old.current, new.current) { i, j in
            guard let j else {
                // Gone from `current`: removed.
                if let i, let removed = new.members[old.current[i].uid] { events.append(.memberRemoved(removed)) }
                return
            }
            let status = new.current[j].status
            guard i.map({ old.current[$0].status }) != status else { return }
            let after = new.current[j]
            switch status {
            case .joining: events.append(.memberJoined(after))
            case .up: events.append(.memberUp(after))
            case .leaving: events.append(.memberLeft(after))
            case .exiting: events.append(.memberExited(after))
            case .down: events.append(.memberDowned(after))
            case .removed: break  // never in `current`
            }
        }
        // Reachability changes: the difference of two small sets, then only
        // members that were and still are current.
        if old.unreachable != new.unreachable {
            let changes =
                new.unreachable.subtracting(old.unreachable).map { ($0, false) }
                + old.unreachable.subtracting(new.unreachable).map { ($0, true) }
            for (uid, reachable) in changes.sorted(by: { $0.0 < $1.0 }) {
                guard old.members[uid].map({ $0.status != .removed }) ?? false,
                    let member = new.members[uid], member.status != .removed
                else { continue }
                events.append(reachable ? .reachable(member) : .unreachable(member))
            }
        }
        if old.leader?.node != new.leader?.node { events.append(.leaderChanged(new.leader?.node)) }
        return events
    }
}
