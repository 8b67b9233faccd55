extension ActorContext {
    /// Sets the message being handled aside, to be handled again after
    /// `unstashAll()`, as Akka's `StashBuffer` does: an actor that is not
    /// ready for a message yet (it is loading, or waits for a reply) stashes
    /// it and takes it up later, in order.
    ///
    /// ```swift
    /// r.on(GetPrice.self, result: { me, m in
    ///     guard me.loaded else { try me.context.stash() }
    ///     return me.prices[m.sku] ?? 0
    /// })
    /// ```
    ///
    /// It ends the reaction: it always throws, so the rest of the reaction
    /// does not run. An ask of a stashed message is not answered now; it is
    /// answered when the message is handled again, if its asker still waits
    /// (one that timed out meanwhile drops the reply, as always).
    ///
    /// Call it only in a reaction (a future reaction too), on the actor's
    /// loop. The stash holds at most `Reactor.stashCapacity` messages
    /// (1,000 by default); beyond that this throws `StashError.full` and the
    /// message is not stashed: catch it to answer otherwise, or let it fail
    /// the reaction. When the actor stops, stashed messages are refused as
    /// its mailbox's are (an ask fails with `AskError.stopped`, a tell is a
    /// dead letter); when it restarts, they go back to the front of its
    /// mailbox for the fresh instance.
    ///
    /// (On success it throws a marker that the runtime catches, which is how
    /// it ends the reaction; do not catch it. If a reaction catches it and
    /// goes on anyway, the message is still stashed and the reaction's
    /// result is discarded.)
    public func stash() throws -> Never {
        try cell.stashCurrentMessage()
    }

    /// Puts every stashed message back at the front of the mailbox, in the
    /// order they were stashed, before any message that arrived meanwhile.
    /// The actor handles them after the current reaction, and may stash
    /// them again.
    public func unstashAll() {
        cell.checkStashThread()
        cell.putBack(cell.stash.takeAll())
    }

    /// How many messages are stashed now.
    public var stashedCount: Int {
        cell.checkStashThread()
        return cell.stash.count
    }

    /// Why `stash()` did not stash.
    public enum StashError: Error, Hashable, CustomStringConvertible {
        /// The stash already holds `capacity` messages (`Reactor.stashCapacity`).
        case full(capacity: Int)
        /// `stash()` was called outside a reaction, with no message to stash.
        case noMessage

        public var description: String {
            switch self {
            case .full(let capacity): "the stash is full (\(capacity) messages); the message was not stashed"
            case .noMessage: "stash() was called outside a reaction: there is no message to stash"
            }
        }
    }
}

/// What `stash()` throws when it has stashed: it ends the reaction, and the
/// reaction's handler, seeing `stashRequested`, keeps the message.
struct StashedMessage: Error, CustomStringConvertible {
    var description: String { "the message was stashed (stash() ends the reaction; this is not a failure)" }
}

// MARK: - The cell's side

extension ActorCell {
    func checkStashThread() {
        precondition(onOwnThread, "\(address): the stash is used only on the actor's loop (in its reactions)")
    }

    func stashCurrentMessage() throws -> Never {
        checkStashThread()
        guard isHandlingMessage else { throw ActorContext.StashError.noMessage }
        if !stashRequested {
            guard !stash.isFull else { throw ActorContext.StashError.full(capacity: stash.capacity) }
            stashRequested = true
        }
        throw StashedMessage()
    }

    /// Stashes the message of a reaction that called `stash()`; called by
    /// the reaction's handler instead of answering. The place was checked by
    /// `stash()`, and only `unstashAll()` changes the stash in between.
    @usableFromInline
    func keepStashed<M: Message>(_ message: M, reply: (any ReplyTarget)?) -> ReactionOutcome {
        stashRequested = false
        if !stash.add(.message(message, reply: reply)) {
            // Unreachable while the invariant above holds; refused, not lost.
            refuseMessage(
                reply, manifest: M.manifest, to: address,
                .handlerFailed(ActorContext.StashError.full(capacity: stash.capacity).description),
                in: system)
        }
        return .finished
    }
}
