/// A message lent to its actor's reaction with its type erased, so that an
/// actor's reactions are one plain array of closures of one type, however
/// many message types it takes.
///
/// Why erased by hand: a message reaches its reaction through a mailbox
/// that holds any message, and the reaction is a closure built for one type.
/// A checked cast (`as!` to the message type, or to a handler class generic
/// over it) costs a Swift runtime type lookup on every message, which
/// profiling showed cost more than the send itself; comparing the message's
/// type identity with the one asked for is one pointer comparison.
///
/// Invariants: the message is only lent (noncopyable and borrowed, the view
/// cannot outlive `lend`), and it is read only as the type it was lent as.
@usableFromInline
package struct ErasedMessage: ~Copyable {
    /// The message's type.
    @usableFromInline package let type: ObjectIdentifier
    @usableFromInline let pointer: UnsafeRawPointer

    @usableFromInline
    init(type: ObjectIdentifier, pointer: UnsafeRawPointer) {
        self.type = type
        self.pointer = pointer
    }

    /// Runs `body` with `message` lent to it, erased. Not generic in what
    /// `body` returns: where it runs unspecialized, a generic result would
    /// be returned indirectly.
    @inlinable @inline(__always)
    package static func lend<M: Message>(
        _ message: borrowing M, _ body: (borrowing ErasedMessage) -> ReactionOutcome?
    ) -> ReactionOutcome? {
        withUnsafePointer(to: message) { body(ErasedMessage(type: ObjectIdentifier(M.self), pointer: $0)) }
    }

    /// The message, as the type it was lent as. Asking for another type is a
    /// bug in the reaction table (reactions are found by this type), never a
    /// matter of input, so it traps.
    @inlinable @inline(__always)
    package func read<M: Message>(_: M.Type) -> M {
        precondition(type == ObjectIdentifier(M.self), "a reaction for \(M.self) was lent another message type")
        return pointer.assumingMemoryBound(to: M.self).pointee
    }
}
