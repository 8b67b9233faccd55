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
    let address: ActorAddress
    let size: Int
    private let makeRoutee: @Sendable (Int) -> ActorCell
    private let routees = Mutex<[ActorCell]>([])

    init(address: ActorAddress, size: Int, makeRoutee: @escaping @Sendable (Int) -> ActorCell) {
        precondition(size > 0, "a pool needs at least one actor")
        self.address = address
        self.size = size
        self.makeRoutee = makeRoutee
    }

    func deliver<M: Message>(_ message: M, reply: (any ReplyTarget)?) {
        route().deliver(message, reply: reply)
    }

    func deliverEncoded(manifest: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer, reply: (any ReplyTarget)?) {
        route().deliverEncoded(manifest: manifest, payload: payload, reply: reply)
    }

    /// Picks the routee for the next message (Oscar's rule).
    func route() -> ActorCell {
        routees.withLock { cells in
            if let free = cells.first(where: { $0.load == 0 }) { return free }
            if cells.count < size {
                let cell = makeRoutee(cells.count)
                cells.append(cell)
                return cell
            }
            return cells.min(by: { $0.load < $1.load })!
        }
    }

    /// The routees created so far, in creation order.
    var members: [ActorCell] { routees.withLock { $0 } }

    func stopAll() {
        for cell in members { cell.stop() }
    }
}
