import Glibc
import OscarBase
import OscarCBOR

/// The table of an actor's reactions, one per message type, in the three
/// kinds of Oscar's model.
///
/// Built once per instance, when the actor starts, so each reaction holds
/// its instance and its message type is known where it is made. That keeps
/// the per-message path free of Swift runtime type lookups (generic metadata,
/// casts), which profiling showed cost more than the send itself.
public struct Reactions<A: Reactor> {
    /// Not generic on purpose: an array of a generic function type makes the
    /// runtime look up that type's metadata on every access.
    @usableFromInline package typealias Handler = (borrowing ErasedMessage, (any ReplyTarget)?, ActorCell) ->
        ReactionOutcome

    /// Decodes a message that arrived encoded, then runs its reaction. Built
    /// per message type, so the receiver needs no global type registry: the
    /// actor knows the types it accepts.
    @usableFromInline typealias DecodingHandler = (RawSpan, (any ReplyTarget)?, ActorCell) -> ReactionOutcome

    /// The instance the reactions run on.
    @usableFromInline let actor: A
    private var types: [ObjectIdentifier] = []
    private var handlers: [Handler] = []
    private var manifests: [[UInt8]] = []
    private var decodingHandlers: [DecodingHandler] = []

    package init(for actor: A) { self.actor = actor }

    /// A *void* reaction: do the work, reply nothing (an ask gets `Done()`).
    ///
    /// Inlinable, as `on(_:result:)` is: the reaction closure is then
    /// specialized for `A` and `M` in the application's module, not run
    /// generically through witness tables on every message.
    ///
    /// Every kind checks `stashRequested` before it answers: a reaction that
    /// called `stash()` has its message kept, not answered (nor failed).
    @inlinable
    public mutating func on<M: Message>(_: M.Type, do body: @escaping (A, M) throws -> Void)
    where M.Reply == Done {
        let actor = self.actor
        add(M.self) { erased, reply, cell in
            let message = erased.read(M.self)
            do {
                try body(actor, message)
            } catch {
                if cell.stashRequested { return cell.keepStashed(message, reply: reply) }
                cell.reactionFailed(error, manifest: M.manifest, reply: reply)
                return .failed
            }
            if cell.stashRequested { return cell.keepStashed(message, reply: reply) }
            cell.answer(reply, with: Done())
            return .finished
        }
    }

    /// A *result* reaction: return the reply at once.
    @inlinable
    public mutating func on<M: Message>(_: M.Type, result body: @escaping (A, M) throws -> M.Reply) {
        let actor = self.actor
        add(M.self) { erased, reply, cell in
            let message = erased.read(M.self)
            let value: M.Reply
            do {
                // Not `reply?.succeed(try body(...))`: optional chaining would
                // skip the reaction itself when nobody asked for a reply.
                value = try body(actor, message)
            } catch {
                if cell.stashRequested { return cell.keepStashed(message, reply: reply) }
                cell.reactionFailed(error, manifest: M.manifest, reply: reply)
                return .failed
            }
            if cell.stashRequested { return cell.keepStashed(message, reply: reply) }
            cell.answer(reply, with: value)
            return .finished
        }
    }

    /// A *future* reaction: an `async` reply, for work that waits on I/O or on
    /// other actors. It runs on the actor's loop, and the actor takes its next
    /// message only when it has finished, so its state is never shared between
    /// two reactions.
    public mutating func on<M: Message>(_: M.Type, future body: @escaping (A, M) async throws -> M.Reply) {
        let actor = self.actor
        add(M.self) { erased, reply, cell in
            let message = erased.read(M.self)
            // Safe to send: the instance and the closure are used only by this
            // task, which runs on the actor's loop, and the cell takes no other
            // message until `futureFinished` (the actor is suspended).
            let job = UncheckedSendable(FutureJob(actor: actor, body: body))
            Task(executorPreference: cell.loop.taskExecutor) {
                do {
                    let value = try await job.value.run(message)
                    if cell.stashRequested {
                        _ = cell.keepStashed(message, reply: reply)
                    } else {
                        cell.answer(reply, with: value)
                    }
                    cell.futureFinished()
                } catch {
                    if cell.stashRequested {
                        _ = cell.keepStashed(message, reply: reply)
                        cell.futureFinished()
                    } else {
                        cell.reactionFailed(error, manifest: M.manifest, reply: reply)
                        cell.futureFinished(failed: true)
                    }
                }
            }
            return .suspended
        }
    }

    /// Inlinable, so the decoding handler is specialized for `M` in the
    /// module that declares the reaction (see `CBORDecoder.decode`).
    @inlinable
    mutating func add<M: Message>(_: M.Type, _ handler: @escaping Handler) {
        let decoding: DecodingHandler = { payload, reply, cell in
            let message: M
            do {
                message = try cell.decode(M.self, from: payload)
            } catch {
                cell.decodeFailed(error, manifest: M.manifest, reply: reply)
                return .finished
            }
            return ErasedMessage.lend(message) { handler($0, reply, cell) } ?? .finished  // never nil
        }
        register(ObjectIdentifier(M.self), manifest: M.manifest, handler, decoding)
    }

    /// Adds a reaction, or replaces the one declared before for that type.
    @usableFromInline
    mutating func register(
        _ key: ObjectIdentifier, manifest: String, _ handler: @escaping Handler,
        _ decoding: @escaping DecodingHandler
    ) {
        if let i = types.firstIndex(of: key) {
            handlers[i] = handler
            decodingHandlers[i] = decoding
        } else {
            types.append(key)
            handlers.append(handler)
            manifests.append(Array(manifest.utf8))
            decodingHandlers.append(decoding)
        }
    }

    /// The handler for messages of `type`, if declared. A linear scan: actors
    /// declare a handful of types, and comparing pointers beats hashing at
    /// that size.
    @inline(__always)
    package func handler(for type: ObjectIdentifier) -> Handler? {
        for i in types.indices where types[i] == type { return handlers[i] }
        return nil
    }

    /// The decoding handler for a manifest, compared byte for byte.
    func decodingHandler(for manifest: RawSpan) -> DecodingHandler? {
        for i in manifests.indices where manifest.equals(manifests[i]) { return decodingHandlers[i] }
        return nil
    }
}

/// How a reaction ended: `failed` when it threw (its ask has been failed
/// already, and supervision decides what the actor does next).
@usableFromInline
package enum ReactionOutcome { case finished, failed, suspended }

/// A running future reaction: holds the instance until the reaction's task ends.
///
/// A named struct, not a tuple: with Swift 6.3.1, capturing `(instance, body)`
/// in an `UncheckedSendable` and destructuring it inside the task released the
/// instance once too often (a use-after-free that AddressSanitizer caught in
/// `FutureLifetimeTests`).
private struct FutureJob<A: Reactor, M: Message> {
    let actor: A
    let body: (A, M) async throws -> M.Reply

    func run(_ message: M) async throws -> M.Reply {
        try await body(actor, message)
    }
}
