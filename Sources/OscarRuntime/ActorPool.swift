import OscarBase
import OscarCBOR
import Synchronization

/// A pool of up to `size` identical actors behind one ref, routed by Oscar's
/// rule: take the first free actor; if none is free and the pool is not full,
/// create one; otherwise take the least loaded.
///
/// Why that rule: an actor handles one message at a time, so a slow message
/// (a network call) would hold up everything queued behind it. The pool spreads
/// work while keeping the number of actors bounded and creating them only when
/// load asks for them.
final class ActorPool: MessageTarget {
    package let address: ActorAddress
    package let size: Int
    private let makeRoutee: @Sendable (Int) -> ActorCell
    private let routees = Mutex<[ActorCell]>([])
    /// Set by `stopAll`: from then on the pool creates no routee.
    private let stopped = Atomic<Bool>(false)

    init(address: ActorAddress, size: Int, makeRoutee: @escaping @Sendable (Int) -> ActorCell) {
        precondition(size > 0, "a pool needs at least one actor")
        self.address = address
        self.size = size
        self.makeRoutee = makeRoutee
    }

    package func deliver<M: Message>(_ message: M, reply: (any ReplyTarget)?) {
        guard let cell = route() else {
            return refuseMessage(reply, manifest: M.manifest, to: address, .stopped(address), in: nil)
        }
        cell.deliver(message, reply: reply)
    }

    package func deliverEncoded(manifest: RawSpan, payload: RawSpan, reply: (any ReplyTarget)?) {
        guard let cell = route() else {
            let name = manifest.utf8Text
            return refuseMessage(reply, manifest: name, to: address, .stopped(address), in: nil)
        }
        cell.deliverEncoded(manifest: manifest, payload: payload, reply: reply)
    }

    /// Picks the routee for the next message (Oscar's rule). A routee that
    /// stopped (its supervision said so) is replaced in its slot by a fresh
    /// one under the same name, so the pool never routes to a dead actor.
    /// Nil once the pool is stopped.
    package func route() -> ActorCell? {
        routees.withLock { cells -> ActorCell? in
            guard !stopped.load(ordering: .acquiring) else { return nil }
            for i in cells.indices where cells[i].isTerminated { cells[i] = makeRoutee(i) }
            if let free = cells.first(where: { $0.load == 0 }) { return free }
            if cells.count < size || cells.isEmpty {
                let cell = makeRoutee(cells.count)
                cells.append(cell)
                return cell
            }
            var least = cells[0]
            for cell in cells.dropFirst() where cell.load < least.load { least = cell }
            return least
        }
    }

    /// The routees created so far, in creation order.
    package var members: [ActorCell] { routees.withLock { $0 } }

    package func stopAll() {
        stopped.store(true, ordering: .releasing)
        for cell in members { cell.stop() }
    }
}
