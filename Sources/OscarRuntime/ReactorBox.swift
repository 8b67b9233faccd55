import OscarBase
import OscarCBOR

/// Holds one actor instance with its reaction table, and runs the reaction for
/// a message whose type is known only at run time. The base class is the
/// empty box: no instance and no reactions, so every message is unhandled.
@usableFromInline package class AnyReactorBox {
    /// How many messages the instance may stash (`Reactor.stashCapacity`).
    package var stashCapacity: Int { 0 }
    package func start(_ context: ActorContext) {}
    package func stop() {}
    /// Runs the reaction for `message`. Returns `.suspended` when a future
    /// reaction was started; the cell is told when it finishes. Returns nil
    /// when the actor has no reaction for that type.
    @usableFromInline package func receive(
        _ message: borrowing ErasedMessage, reply: (any ReplyTarget)?, cell: ActorCell
    ) -> ReactionOutcome? {
        nil
    }

    /// Decodes and runs a message that arrived encoded; nil when the actor has
    /// no reaction for that manifest.
    package func receive(
        manifest: RawSpan, payload: RawSpan, reply: (any ReplyTarget)?, cell: ActorCell
    ) -> ReactionOutcome? {
        nil
    }
}

package final class ReactorBox<A: Reactor>: AnyReactorBox {
    private let instance: A
    private let table: Reactions<A>

    package init(_ instance: A) {
        self.instance = instance
        var table = Reactions<A>(for: instance)
        A.reactions(&table)
        self.table = table
    }

    package override var stashCapacity: Int { A.stashCapacity }
    package override func start(_ context: ActorContext) { instance.started(context) }
    package override func stop() { instance.stopped() }

    package override func receive(
        _ message: borrowing ErasedMessage, reply: (any ReplyTarget)?, cell: ActorCell
    ) -> ReactionOutcome? {
        guard let handler = table.handler(for: message.type) else { return nil }
        return handler(message, reply, cell)
    }

    package override func receive(
        manifest: RawSpan, payload: RawSpan, reply: (any ReplyTarget)?, cell: ActorCell
    ) -> ReactionOutcome? {
        guard let handler = table.decodingHandler(for: manifest) else { return nil }
        return handler(payload, reply, cell)
    }
}
