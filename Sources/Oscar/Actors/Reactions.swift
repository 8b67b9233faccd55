/// The table of an actor type's reactions, one per message type, in the three
/// kinds of Oscar's model.
public struct Reactions<A: Reactor> {
    var entries: [(type: ObjectIdentifier, reaction: AnyReaction<A>)] = []

    init() {}

    /// A *void* reaction: do the work, reply nothing (an ask gets `Done()`).
    public mutating func on<M: Message>(_: M.Type, do body: @escaping (A, M) throws -> Void)
    where M.Reply == Done {
        add(M.self, .void(body))
    }

    /// A *result* reaction: return the reply at once.
    public mutating func on<M: Message>(_: M.Type, result body: @escaping (A, M) throws -> M.Reply) {
        add(M.self, .result(body))
    }

    /// A *future* reaction: an `async` reply, for work that waits on I/O or on
    /// other actors. It runs on the actor's loop, and the actor takes its next
    /// message only when it has finished, so its state is never shared between
    /// two reactions.
    public mutating func on<M: Message>(_: M.Type, future body: @escaping (A, M) async throws -> M.Reply) {
        add(M.self, .future(body))
    }

    private mutating func add<M: Message>(_: M.Type, _ kind: Reaction<A, M>.Kind) {
        let key = ObjectIdentifier(M.self)
        let reaction = Reaction<A, M>(kind)
        if let i = entries.firstIndex(where: { $0.type == key }) {
            entries[i].reaction = reaction
        } else {
            entries.append((key, reaction))
        }
    }

    /// The reaction for `M`, if declared. A linear scan: actors declare a
    /// handful of types, and comparing pointers beats hashing at that size.
    @inline(__always)
    func reaction<M: Message>(for _: M.Type) -> Reaction<A, M>? {
        let key = ObjectIdentifier(M.self)
        for entry in entries where entry.type == key {
            // Safe: entries are keyed by the message type they were built for.
            return unsafeDowncast(entry.reaction, to: Reaction<A, M>.self)
        }
        return nil
    }
}

class AnyReaction<A: Reactor> {}

final class Reaction<A: Reactor, M: Message>: AnyReaction<A> {
    enum Kind {
        case void((A, M) throws -> Void)
        case result((A, M) throws -> M.Reply)
        case future((A, M) async throws -> M.Reply)
    }

    let kind: Kind

    init(_ kind: Kind) { self.kind = kind }
}
