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
    fileprivate let instance: A
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
            let job = UncheckedSendable(FutureJob(box: self, body: body))
            Task(executorPreference: cell.loop.taskExecutor) {
                do {
                    let value = try await job.value.run(message)
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

/// A running future reaction: holds the box (and so the instance) until the
/// reaction's task ends.
///
/// A named struct, not a tuple: with Swift 6.3.1, capturing `(instance, body)`
/// in an `UncheckedSendable` and destructuring it inside the task released the
/// instance once too often (a use-after-free that AddressSanitizer caught in
/// `FutureLifetimeTests`).
private struct FutureJob<A: Reactor, M: Message> {
    let box: ReactorBox<A>
    let body: (A, M) async throws -> M.Reply

    func run(_ message: M) async throws -> M.Reply {
        try await body(box.instance, message)
    }
}
