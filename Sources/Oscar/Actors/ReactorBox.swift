/// Holds one actor instance with its reaction table, and invokes a reaction for
/// a message whose type is known only at run time, without a dynamic cast.
class AnyReactorBox {
    enum Outcome { case finished, suspended }

    func start(_ context: ActorContext) {}
    func stop() {}
    /// Runs the reaction for `message`. Returns `.suspended` when a future
    /// reaction was started; the cell is told when it finishes.
    func receive<M: Message>(_ message: M, reply: (any ReplyTarget)?, cell: ActorCell) -> Outcome {
        fatalError("abstract")
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

    override func receive<M: Message>(_ message: M, reply: (any ReplyTarget)?, cell: ActorCell) -> Outcome {
        guard let reaction = table.reaction(for: M.self) else {
            cell.unhandled(message, reply: reply)
            return .finished
        }
        switch reaction.kind {
        case .void(let body):
            do {
                try body(instance, message)
                reply?.succeed(Done())
            } catch {
                cell.reactionFailed(error, message: M.self, reply: reply)
            }
            return .finished
        case .result(let body):
            do {
                let value = try body(instance, message)
                reply?.succeed(value)
            } catch {
                cell.reactionFailed(error, message: M.self, reply: reply)
            }
            return .finished
        case .future(let body):
            // Safe to send: the instance and the closure are used only by this
            // task, which runs on the actor's loop, and the cell takes no other
            // message until `futureFinished` (the actor is suspended).
            let job = UncheckedSendable((instance, body))
            Task(executorPreference: cell.loop.taskExecutor) {
                let (instance, body) = job.value
                do {
                    let value = try await body(instance, message)
                    reply?.succeed(value)
                } catch {
                    cell.reactionFailed(error, message: M.self, reply: reply)
                }
                cell.futureFinished()
            }
            return .suspended
        }
    }
}
