import OscarMembership

/// Where a cluster singleton runs, read from one node's whole view of the
/// cluster (its gossip's current members, every status).
///
/// The decision reads the whole view, never one event at a time: the events
/// of one change come in address order, so a node that learned of itself and
/// an older member in the same change could otherwise judge itself oldest
/// between the two and start a second instance.
package enum SingletonPlacement {
    /// The member that should host: the oldest up member (lowest up number,
    /// then address), or nil while there is none.
    package static func host(in view: [Member]) -> Member? {
        view.filter { $0.status == .up }.min(by: isOlder)
    }

    /// Age: the lower up number, then (members promoted in the same round)
    /// the lower address.
    package static func isOlder(_ a: Member, than b: Member) -> Bool {
        (a.upNumber, a.node.host, a.node.port) < (b.upNumber, b.node.host, b.node.port)
    }

    /// Whether `me` may run the instance: it is up, and every member that
    /// became up before it is gone. Gone means exiting (it left, and stopped
    /// its instance when it saw itself leaving) or out of the view (removed).
    /// A leaving, unreachable or downed-but-present older member still
    /// blocks: the hand-over waits for it, at the price of a gap of up to the
    /// failure-detection and downing bound after a crash.
    package static func mayHost(_ me: UInt64, in view: [Member]) -> Bool {
        guard let mine = view.first(where: { $0.uid == me }), mine.status == .up, host(in: view)?.uid == me else {
            return false
        }
        return !view.contains { older in
            older.uid != me && older.upNumber > 0 && isOlder(older, than: mine) && older.status != .exiting
        }
    }
}
