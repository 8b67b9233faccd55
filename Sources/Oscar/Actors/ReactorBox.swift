/// Holds one actor instance with its reaction table, and runs the reaction for
/// a message whose type is known only at run time. The base class is the
/// empty box: no instance and no reactions, so every message is unhandled.
class AnyReactorBox {
    func start(_ context: ActorContext) {}
    func stop() {}
    /// Runs the reaction for the message at `pointer`, of type `type`. Returns
    /// `.suspended` when a future reaction was started; the cell is told when
    /// it finishes. Returns nil when the actor has no reaction for that type.
    func receive(
        _ pointer: UnsafeRawPointer, type: ObjectIdentifier, reply: (any ReplyTarget)?, cell: ActorCell
    ) -> ReactionOutcome? {
        nil
    }

    /// Decodes and runs a message that arrived encoded; nil when the actor has
    /// no reaction for that manifest.
    func receive(
        manifest: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer, reply: (any ReplyTarget)?, cell: ActorCell
    ) -> ReactionOutcome? {
        nil
    }
}

final class ReactorBox<A: Reactor>: AnyReactorBox {
    private let instance: A
    private let table: Reactions<A>

    init(_ instance: A) {
        self.instance = instance
        var table = Reactions<A>()
        A.reactions(&table)
        self.table = table
    }

    override func start(_ context: ActorContext) { instance.started(context) }
    override func stop() { instance.stopped() }

    override func receive(
        _ pointer: UnsafeRawPointer, type: ObjectIdentifier, reply: (any ReplyTarget)?, cell: ActorCell
    ) -> ReactionOutcome? {
        guard let handler = table.handler(for: type) else { return nil }
        return handler(instance, pointer, reply, cell)
    }

    override func receive(
        manifest: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer, reply: (any ReplyTarget)?, cell: ActorCell
    ) -> ReactionOutcome? {
        guard let handler = table.decodingHandler(for: manifest) else { return nil }
        return handler(instance, payload, reply, cell)
    }
}
