import OscarBase
import OscarCBOR
import OscarRuntime

/// A ref's target when the actor lives on another node: messages are encoded
/// once, on the sender's thread, and handed to the node's association.
final class RemoteTarget: MessageTarget {
    package let address: ActorAddress
    package var isRemote: Bool { true }
    private let association: Association
    private let transport: Transport

    init(address: ActorAddress, association: Association, transport: Transport) {
        self.address = address
        self.association = association
        self.transport = transport
    }

    package func deliver<M: Message>(_ message: M, reply: (any ReplyTarget)?) {
        if transport.ioLoop.inEventLoop {
            // On the connection's loop: encode straight into the outbound batch.
            association.send(
                kind: reply == nil ? .tell : .ask, recipient: address.path, manifest: M.manifest, uid: address.node.uid,
                reply: reply
            ) { [association] out throws(CBORError) in
                try CBOREncoder().encode(message, appendingTo: &out, using: association.encoding)
            }
            return
        }
        // Off the loop: the whole frame is encoded here, on the caller's
        // thread, and handed over (see `Association.send(frame:)`).
        send(manifest: M.manifest, reply: reply) { out throws(CBORError) in
            try CBOREncoder().encode(message, appendingTo: &out)
        }
    }

    package func deliverEncoded(manifest: RawSpan, payload: RawSpan, reply: (any ReplyTarget)?) {
        send(manifest: manifest.utf8Text, reply: reply) { payload.append(to: &$0) }
    }

    /// Encodes a whole frame here and hands it to the association, on its
    /// loop, which assigns its correlation and checks it against the
    /// maximum size.
    private func send(
        manifest: String, reply: (any ReplyTarget)?, payload: (inout [UInt8]) throws(CBORError) -> Void
    ) {
        let (association, path, uid) = (self.association, address.path, address.node.uid)
        let kind: WireKind = reply == nil ? .tell : .ask
        var frame: [UInt8] = []
        do {
            try WireEnvelope.append(to: &frame, kind: kind, recipient: path, manifest: manifest, payload: payload)
        } catch {
            refuse(manifest, reply, .handlerFailed("\(manifest) could not be encoded: \(error)"))
            return
        }
        let transit = FrameInTransit(frame)
        let send: @Sendable () -> Void = {
            association.send(
                frame: transit.take(), kind: kind, recipient: path, manifest: manifest, uid: uid, reply: reply)
        }
        if transport.ioLoop.inEventLoop {
            send()
        } else if !transport.ioLoop.execute(send) {
            refuse(manifest, reply, .nodeUnreachable(address.node, "this node is shut down"))
        }
    }

    private func refuse(_ manifest: String, _ reply: (any ReplyTarget)?, _ error: AskError) {
        refuseMessage(reply, manifest: manifest, to: address, error, in: transport.system)
    }
}

/// A frame on its way to the association's loop, taken out there once, so
/// that the loop holds the only reference to its buffer: with a second one
/// (a closure's capture), the first write to the batch it became would copy
/// all of it.
private final class FrameInTransit: @unchecked Sendable {
    private var frame: [UInt8]
    init(_ frame: [UInt8]) { self.frame = frame }
    /// Unchecked but safe: called once, on the loop, after the hand-over
    /// that `EventLoop.execute` orders after `init`.
    func take() -> [UInt8] {
        var taken: [UInt8] = []
        swap(&taken, &frame)
        return taken
    }
}
