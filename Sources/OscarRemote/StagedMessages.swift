import OscarCBOR
import Synchronization

/// Large messages that arrived on the bulk lane and wait for their commit
/// frame on the main connection, which says where among the sender's other
/// frames they are delivered (see `BulkLane`).
///
/// Bounded: every staged body holds its reservation of the transport's
/// reassembly bound until it is taken or dropped. Dropped are a sender's
/// entries older than one it commits (their commits went on a connection
/// that was lost, so they never come), and any entry older than `expiry`
/// (its sender is gone).
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

    private let entries = Mutex<[Key: Entry]>([:])
    private let release: @Sendable (Int) -> Void

    /// `release` gives back the reassembly bytes of a dropped entry.
    init(release: @escaping @Sendable (Int) -> Void) { self.release = release }

    /// Keeps `staged`, sent by incarnation `peer` with `id`, for its commit.
    func stage(_ staged: Staged, from peer: UInt64, id: UInt64, now: ContinuousClock.Instant = .now) {
        let dropped = entries.withLock { entries in
            entries[Key(peer: peer, id: id)] = Entry(staged: staged, stagedAt: now)
            return Self.remove(from: &entries) { $0.value.stagedAt + Self.expiry < now }
        }
        release(dropped)
    }

    /// The message `id` from `peer`, taken out; every older one from the
    /// same peer is dropped.
    func take(from peer: UInt64, id: UInt64) -> Staged? {
        let (taken, dropped) = entries.withLock { entries in
            let taken = entries.removeValue(forKey: Key(peer: peer, id: id))?.staged
            return (taken, Self.remove(from: &entries) { $0.key.peer == peer && $0.key.id < id })
        }
        release(dropped)
        return taken
    }

    /// Drops everything (the transport shuts down).
    func removeAll() {
        release(entries.withLock { Self.remove(from: &$0) { _ in true } })
    }

    var count: Int { entries.withLock { $0.count } }

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
