/// One reaction of an actor's table with its message type erased, so that the
/// table is one plain array however many message types the actor takes.
///
/// Why erased by hand: a message reaches its actor's reaction through a
/// mailbox that holds any message, and the reaction is a closure built for
/// one type. A checked cast (`as!` to the message type, or to a handler class
/// generic over it) costs a Swift runtime type lookup on every message,
/// which profiling showed cost more than the send itself; comparing the
/// message's type identity with the reaction's is one pointer comparison.
///
/// Invariant (what makes the one unchecked read below sound): a reaction is
/// run only on a value whose type is the `M` it was built for. `run` checks
/// it and is the only way in; the message is lent for the call only.
package struct ErasedReaction {
    /// The message type the reaction was built for.
    package let messageType: ObjectIdentifier
    private let body: (UnsafeRawPointer, (any ReplyTarget)?, ActorCell) -> ReactionOutcome

    package init<M: Message>(
        _: M.Type, _ reaction: @escaping (M, (any ReplyTarget)?, ActorCell) -> ReactionOutcome
    ) {
        messageType = ObjectIdentifier(M.self)
        body = { pointer, reply, cell in reaction(pointer.assumingMemoryBound(to: M.self).pointee, reply, cell) }
    }

    /// Runs the reaction on `message`; nil when it was built for another type.
    @inline(__always)
    package func run<M: Message>(
        _ message: borrowing M, reply: (any ReplyTarget)?, cell: ActorCell
    ) -> ReactionOutcome? {
        guard messageType == ObjectIdentifier(M.self) else { return nil }
        return withUnsafePointer(to: message) { body($0, reply, cell) }
    }
}
