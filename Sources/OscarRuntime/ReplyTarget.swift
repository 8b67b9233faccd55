import OscarBase
import OscarCBOR

/// What an encoded outcome holds: the reply value, or an `AskError`.
@usableFromInline
package enum EncodedOutcome: Sendable {
    case reply, failure
}

/// Where a reply goes: a local pending ask now, a remote asker later.
///
/// Generic over the reply value so that a remote target can encode it without
/// any type registry.
@usableFromInline
package protocol ReplyTarget: AnyObject, Sendable {
    /// Starts the timeout on the loop that will produce the reply. Called once
    /// the message is in the recipient's loop; later calls do nothing.
    func arm(on loop: EventLoop)
    func succeed<R: Encodable & Sendable>(_ value: R)
    func fail(_ error: AskError)
    /// Completes from a reply or failure frame, decoding the payload. The
    /// bytes are only borrowed: a target that completes later copies them.
    func complete(_ kind: EncodedOutcome, payload: RawSpan, decoder: CBORDecoder)
    /// Set when the ask waits on another node: told when the ask completes,
    /// so that node's table of waiting asks forgets it.
    func waitOn(_ table: any PendingAskTable, correlation: UInt64)
}

/// A reply that a local asker awaiting another type can still take: across
/// the network the asker decodes the reply as its own type, and this lets a
/// local reply do the same where the two types differ but mean the same
/// (a distributed call's typed outcome, awaited in its encoded form).
package protocol ReplyConvertible: Encodable {
    /// This reply as a value of `type`, or nil if it cannot be one.
    func converted(to type: Any.Type) -> Any?
}

extension ReplyConvertible {
    /// Through its encoding, as a remote asker would read it.
    package func converted(to type: Any.Type) -> Any? {
        guard let decodable = type as? any Decodable.Type, let bytes = try? CBOREncoder().encode(self) else {
            return nil
        }
        return try? CBORDecoder().decode(decodable, from: bytes)
    }
}

/// Ends a message that cannot be handled: an ask fails with `error`, a tell
/// becomes a dead letter of `system` (counted and logged). The one place that
/// rule lives, for mailboxes and the transport alike.
package func refuseMessage(
    _ reply: (any ReplyTarget)?, manifest: @autoclosure () -> String, to address: ActorAddress, _ error: AskError,
    in system: ActorSystem?
) {
    if let reply {
        reply.fail(error)
    } else {
        system?.deadLetter(manifest(), to: address, reason: error)
    }
}

/// Where asks to another node wait for their replies (one per connection).
@usableFromInline
package protocol PendingAskTable: AnyObject {
    func forget(_ correlation: UInt64)
}

/// Something messages can be delivered to: one actor, a pool that routes, or
/// an actor on another node.
@usableFromInline
package protocol MessageTarget: AnyObject, Sendable {
    func deliver<M: Message>(_ message: M, reply: (any ReplyTarget)?)
    /// Delivers a message that arrived encoded; the bytes are only borrowed
    /// (a span cannot escape the call), so a target that keeps the message
    /// copies them.
    func deliverEncoded(manifest: RawSpan, payload: RawSpan, reply: (any ReplyTarget)?)
    /// True for an actor on another node (watched through membership).
    var isRemote: Bool { get }
}

extension MessageTarget {
    @usableFromInline package var isRemote: Bool { false }
}

/// A local target that tells its watchers `Terminated` when it ends: an
/// actor cell, or a distributed actor.
package protocol Watchable: MessageTarget {
    func addWatcher(_ watcher: ActorRef)
    func removeWatcher(_ watcher: ActorRef)
}

/// A message waiting in a mailbox: a value sent locally, the bytes of one
/// that arrived from another node (decoded only when the actor takes it), or
/// one of the actor's timers' messages (handled only if that timer is still
/// the one it came from).
enum MailboxEntry {
    case message(any Message, reply: (any ReplyTarget)?)
    case encoded(manifest: [UInt8], payload: [UInt8], reply: (any ReplyTarget)?)
    case tick(any Message, key: TimerKey, generation: UInt64)

    package var reply: (any ReplyTarget)? {
        switch self {
        case .message(_, let reply), .encoded(_, _, let reply): reply
        case .tick: nil
        }
    }

    package var manifest: String {
        switch self {
        case .message(let m, _), .tick(let m, _, _): type(of: m).manifest
        case .encoded(let manifest, _, _): String(decoding: manifest, as: UTF8.self)
        }
    }
}
