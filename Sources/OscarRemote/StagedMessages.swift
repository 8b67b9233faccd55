import OscarCBOR
import Synchronization

/// Large messages that arrived on the bulk lane and wait for their commit
/// frame on the main connection, which says where among the sender's other
/// frames they are delivered (see `BulkLane`).
///
/// Bounded: every staged body holds its reservation of the transport's
/// reassembly bound until it is taken or dropped. Dropped are any entry
/// older than `expiry` (its sender is gone, or its commit went on a lost
/// connection), swept whenever one is staged or taken and when the bound
/// has no room; and a sender's entries with smaller ids than one it
/// commits, once they are `supersededAfter` old (a commit on a connection
/// being replaced may come just after the next one on the new connection).
final class StagedMessages: Sendable {
    enum Staged {
        case whole(LendableBuffer)
        /// Over this node's maximum: the head of its body (kind, flags,
        /// correlation), so an ask can be answered with `messageTooLarge`.
        case refused(length: Int, head: [UInt8])

        /// Reassembly bytes it holds.
        var reserved: Int {
            switch self {
            case .whole(let body): body.count
            case .refused: 0
            }
        }
    }

    private struct Key: Hashable {
        var peer: UInt64
        var id: UInt64
    }

    private struct Entry {
        var staged: Staged
        var stagedAt: ContinuousClock.Instant
    }

    /// How long a staged message waits for its commit at most. A commit
    /// follows its message's acknowledgement by one trip over the main
    /// connection; a minute means that connection is gone.
    static let expiry: Duration = .seconds(60)
    static let supersededAfter: Duration = .seconds(10)

    private let entries = Mutex<[Key: Entry]>([:])
    private let release: @Sendable (Int) -> Void

    /// `release` gives back the reassembly bytes of a dropped entry.
    init(release: @escaping @Sendable (Int) -> Void) { self.release = release }

    /// Keeps `staged`, sent by incarnation `peer` with `id`, for its commit.
    func stage(_ staged: Staged, from peer: UInt64, id: UInt64, now: ContinuousClock.Instant = .now) {
        let dropped = entries.withLock { entries in
            // A peer that sends an id twice gets the second; the first's
            // bytes are given back.
            let replaced = entries.updateValue(Entry(staged: staged, stagedAt: now), forKey: Key(peer: peer, id: id))
            return (replaced?.staged.reserved ?? 0) + Self.removeExpired(from: &entries, now: now)
        }
        release(dropped)
    }

    /// Drops every entry past its expiry (the bound has no room).
    func removeExpired(now: ContinuousClock.Instant = .now) {
        release(entries.withLock { Self.removeExpired(from: &$0, now: now) })
    }

    /// The message `id` from `peer`, taken out; every older one from the
    /// same peer is dropped.
    func take(from peer: UInt64, id: UInt64, now: ContinuousClock.Instant = .now) -> Staged? {
        let (taken, dropped) = entries.withLock { entries in
            let taken = entries.removeValue(forKey: Key(peer: peer, id: id))?.staged
            let superseded = Self.remove(from: &entries) {
                $0.key.peer == peer && $0.key.id < id && $0.value.stagedAt + Self.supersededAfter < now
            }
            return (taken, superseded + Self.removeExpired(from: &entries, now: now))
        }
        release(dropped)
        return taken
    }

    /// Drops everything (the transport shuts down).
    func removeAll() {
        release(entries.withLock { Self.remove(from: &$0) { _ in true } })
    }

    var count: Int { entries.withLock { $0.count } }

    private static func removeExpired(from entries: inout [Key: Entry], now: ContinuousClock.Instant) -> Int {
        remove(from: &entries) { $0.value.stagedAt + expiry < now }
    }

    /// Removes the entries `matching` and returns the bytes they reserved.
    private static func remove(
        from entries: inout [Key: Entry], matching: ((key: Key, value: Entry)) -> Bool
    )
        -> Int
    {
        let gone = entries.filter(matching)
        for key in gone.keys { entries.removeValue(forKey: key) }
        return gone.values.reduce(0) { $0 + $1.staged.reserved }
    }
}
