import Glibc
import OscarBase
import OscarCBOR

/// The table of an actor type's reactions, one per message type, in the three
/// kinds of Oscar's model.
///
/// Each reaction is stored as a handler that takes the message by pointer,
/// built once when the table is made, where the message type is known. That
/// keeps the per-message path free of Swift runtime type lookups (generic
/// metadata, casts), which profiling showed cost more than the send itself.
public struct Reactions<A: Reactor> {
    /// Not generic on purpose: an array of a generic function type makes the
    /// runtime look up that type's metadata on every access.
    package typealias Handler = (AnyObject, UnsafeRawPointer, (any ReplyTarget)?, ActorCell) -> ReactionOutcome

    /// Decodes a message that arrived encoded, then runs its handler. Built
    /// per message type, so the receiver needs no global type registry: the
    /// actor knows the types it accepts.
    typealias DecodingHandler = (AnyObject, UnsafeRawBufferPointer, (any ReplyTarget)?, ActorCell) -> ReactionOutcome

    private var types: [ObjectIdentifier] = []
    private var handlers: [Handler] = []
    private var manifests: [[UInt8]] = []
    private var decodingHandlers: [DecodingHandler] = []

    package init() {}

    /// A *void* reaction: do the work, reply nothing (an ask gets `Done()`).
    public mutating func on<M: Message>(_: M.Type, do body: @escaping (A, M) throws -> Void)
    where M.Reply == Done {
        add(M.self) { object, pointer, reply, cell in
            let actor = unsafeDowncast(object, to: A.self)
            let message = pointer.assumingMemoryBound(to: M.self).pointee
            do {
                try body(actor, message)
                reply?.succeed(Done())
            } catch {
                cell.reactionFailed(error, manifest: M.manifest, reply: reply)
                return .failed
            }
            return .finished
        }
    }

    /// A *result* reaction: return the reply at once.
    public mutating func on<M: Message>(_: M.Type, result body: @escaping (A, M) throws -> M.Reply) {
        add(M.self) { object, pointer, reply, cell in
            let actor = unsafeDowncast(object, to: A.self)
            let message = pointer.assumingMemoryBound(to: M.self).pointee
            do {
                // Not `reply?.succeed(try body(...))`: optional chaining would
                // skip the reaction itself when nobody asked for a reply.
                let value = try body(actor, message)
                reply?.succeed(value)
            } catch {
                cell.reactionFailed(error, manifest: M.manifest, reply: reply)
                return .failed
            }
            return .finished
        }
    }

    /// A *future* reaction: an `async` reply, for work that waits on I/O or on
    /// other actors. It runs on the actor's loop, and the actor takes its next
    /// message only when it has finished, so its state is never shared between
    /// two reactions.
    public mutating func on<M: Message>(_: M.Type, future body: @escaping (A, M) async throws -> M.Reply) {
        add(M.self) { object, pointer, reply, cell in
            let actor = unsafeDowncast(object, to: A.self)
            let message = pointer.assumingMemoryBound(to: M.self).pointee
            // Safe to send: the instance and the closure are used only by this
            // task, which runs on the actor's loop, and the cell takes no other
            // message until `futureFinished` (the actor is suspended).
            let job = UncheckedSendable(FutureJob(actor: actor, body: body))
            Task(executorPreference: cell.loop.taskExecutor) {
                do {
                    let value = try await job.value.run(message)
                    reply?.succeed(value)
                    cell.futureFinished()
                } catch {
                    cell.reactionFailed(error, manifest: M.manifest, reply: reply)
                    cell.futureFinished(failed: true)
                }
            }
            return .suspended
        }
    }

    private mutating func add<M: Message>(_: M.Type, _ handler: @escaping Handler) {
        let decoding: DecodingHandler = { object, payload, reply, cell in
            let message: M
            do {
                message = try cell.decode(M.self, from: payload)
            } catch {
                cell.decodeFailed(error, manifest: M.manifest, reply: reply)
                return .finished
            }
            return withUnsafePointer(to: message) { handler(object, $0, reply, cell) }
        }
        let key = ObjectIdentifier(M.self)
        if let i = types.firstIndex(of: key) {
            handlers[i] = handler
            decodingHandlers[i] = decoding
        } else {
            types.append(key)
            handlers.append(handler)
            manifests.append(Array(M.manifest.utf8))
            decodingHandlers.append(decoding)
        }
    }

    /// The decoding handler for a manifest, compared byte for byte.
    func decodingHandler(for manifest: UnsafeRawBufferPointer) -> DecodingHandler? {
        for i in manifests.indices where manifests[i].count == manifest.count {
            let equal = manifests[i].withUnsafeBytes { mine in
                guard let a = mine.baseAddress, let b = manifest.baseAddress else { return manifest.isEmpty }
                return memcmp(a, b, manifest.count) == 0
            }
            if equal { return decodingHandlers[i] }
        }
        return nil
    }

    /// The handler for `M`, if declared. A linear scan: actors declare a
    /// handful of types, and comparing pointers beats hashing at that size.
    @inline(__always)
    package func handler(for type: ObjectIdentifier) -> Handler? {
        for i in types.indices where types[i] == type { return handlers[i] }
        return nil
    }
}

/// How a reaction ended: `failed` when it threw (its ask has been failed
/// already, and supervision decides what the actor does next).
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
