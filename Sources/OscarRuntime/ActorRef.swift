import OscarBase
import OscarCBOR

/// A handle to an actor: the only way to talk to it.
///
/// `tell` and `ask` behave the same whether the actor is on this loop, another
/// loop, or (with the transport) another node. A ref is `Codable` as its
/// address, so it can travel inside a message and be replied to.
public struct ActorRef: Sendable, Hashable, Codable, CustomStringConvertible {
    public let address: ActorAddress
    @usableFromInline package let target: (any MessageTarget)?

    package init(address: ActorAddress, target: (any MessageTarget)?) {
        self.address = address
        self.target = target
    }

    /// Sends a message one way: at most once, FIFO per sender. Never blocks.
    ///
    /// `tell` and `ask` are inlinable so that they are specialized for the
    /// message type in the application's module: the send path then looks
    /// up no generic metadata per message.
    @inlinable
    public func tell<M: Message>(_ message: M) {
        guard let target else {
            OscarLog.shared.info("dead letter: \(M.manifest) to \(address) (no such actor)")
            return
        }
        Self.deliver(message, to: target, reply: nil)
    }

    /// Sends a message and waits for its reply, or for a typed error: exactly
    /// one outcome, at the latest when `timeout` has passed.
    @inlinable
    nonisolated(nonsending) public func ask<M: Message>(
        _ message: M, timeout: Duration = .seconds(5)
    ) async throws(AskError) -> M.Reply {
        guard let target else { throw .actorNotFound(address) }
        let address = self.address
        do {
            return try await withUnsafeThrowingContinuation { (continuation: PendingAsk<M.Reply>.Continuation) in
                Self.deliver(message, to: target, reply: PendingAsk(continuation, timeout: timeout, recipient: address))
            }
        } catch {
            throw AskError.thrown(error)
        }
    }

    /// Hands `message` to its target. An actor on this node takes it through
    /// `ActorCell.deliver`, inlined here and so specialized in the sender's
    /// module for the message's type: through the protocol it ran generically,
    /// and the local tell (W4) was 6 % slower than before the module split
    /// (13 points with this). A final class's cast is one pointer comparison.
    @inlinable
    static func deliver<M: Message>(_ message: M, to target: any MessageTarget, reply: (any ReplyTarget)?) {
        if let cell = target as? ActorCell {
            cell.deliver(message, reply: reply)
        } else {
            target.deliver(message, reply: reply)
        }
    }

    /// Asks with a message known only by its manifest and CBOR value (the
    /// CLI's path: JSON in, JSON out). The recipient decodes it with its own
    /// reaction for that manifest, exactly as if a typed message had been sent.
    package func ask(
        manifest: String, value: CBORValue, timeout: Duration = .seconds(5)
    ) async throws(AskError)
        -> CBORValue
    {
        guard let target else { throw .actorNotFound(address) }
        let address = self.address
        let payload = value.cbor
        do {
            return try await withUnsafeThrowingContinuation { (continuation: PendingAsk<CBORValue>.Continuation) in
                let pending = PendingAsk<CBORValue>(continuation, timeout: timeout, recipient: address)
                target.deliverEncoded(manifest: manifest.utf8.span.bytes, payload: payload.span.bytes, reply: pending)
            }
        } catch {
            throw AskError.thrown(error)
        }
    }

    /// Tells a message known only by its manifest and CBOR value.
    package func tell(manifest: String, value: CBORValue) {
        guard let target else { return }
        let payload = value.cbor
        target.deliverEncoded(manifest: manifest.utf8.span.bytes, payload: payload.span.bytes, reply: nil)
    }

    public var description: String { address.uri }

    public static func == (a: ActorRef, b: ActorRef) -> Bool { a.address == b.address }
    public func hash(into hasher: inout Hasher) { hasher.combine(address) }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(address)
    }

    /// Decodes an address; the ref resolves to the live actor when the
    /// decoder's `userInfo[.oscarActorSystem]` holds the system that hosts it.
    public init(from decoder: any Decoder) throws {
        let address = try decoder.singleValueContainer().decode(ActorAddress.self)
        let info = decoder.userInfo[.oscarActorSystem]
        let system = info as? ActorSystem ?? (info as? SystemReference)?.system
        self = system?.resolve(address) ?? ActorRef(address: address, target: nil)
    }
}

extension CodingUserInfoKey {
    /// The `ActorSystem` that refs decoded with this user info resolve against.
    package static let oscarActorSystem = CodingUserInfoKey(rawValue: "oscar.actorSystem")!
}

/// Delivered to a watcher when an actor it watches stops.
public struct Terminated: Message {
    public let actor: ActorRef
    public init(actor: ActorRef) { self.actor = actor }
}
