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
    /// Whether a large `Data` in a message encoded off the loop is spliced:
    /// not to a system actor, whose lane holds plain bytes.
    private let splicing: Bool

    init(address: ActorAddress, association: Association, transport: Transport) {
        self.address = address
        self.association = association
        self.transport = transport
        self.splicing = !Association.isControl(address.path)
    }

    package func deliver<M: Message>(_ message: M, reply: (any ReplyTarget)?) {
        if transport.ioLoop.inEventLoop {
            // On the connection's loop: encode straight into the outbound
            // batch, a large `Data` spliced (see `Association.send`).
            association.send(
                kind: reply == nil ? .tell : .ask, recipient: address.path, manifest: M.manifest, uid: address.node.uid,
                reply: reply, splicing: true
            ) { [association] out throws(CBORError) in
                try CBOREncoder().encode(message, appendingTo: &out, using: association.encoding)
            }
            return
        }
        // Off the loop: the whole frame is encoded here, on the caller's
        // thread, and handed over (see `Association.send(frame:)`). A large
        // `Data` in it is not copied but spliced in, chunk by chunk, as the
        // loop sends it (see `splicing`).
        let splicing = self.splicing
        send(manifest: M.manifest, reply: reply) { out, splices throws(CBORError) in
            let encoding = CBOREncoding(capacity: 0)
            if splicing { encoding.splices = [] }
            try CBOREncoder().encode(message, appendingTo: &out, using: encoding)
            splices = encoding.splices ?? []
        }
    }

    package func deliverEncoded(manifest: RawSpan, payload: RawSpan, reply: (any ReplyTarget)?) {
        send(manifest: manifest.utf8Text, reply: reply) { out, _ in payload.append(to: &out) }
    }

    /// Encodes a whole frame here and hands it to the association, on its
    /// loop, which assigns its correlation and checks it against the
    /// maximum size. Its length prefix counts the spliced bytes.
    private func send(
        manifest: String, reply: (any ReplyTarget)?,
        payload: (inout [UInt8], inout [CBORSplice]) throws(CBORError) -> Void
    ) {
        let (association, path, uid) = (self.association, address.path, address.node.uid)
        let kind: WireKind = reply == nil ? .tell : .ask
        var frame: [UInt8] = []
        var splices: [CBORSplice] = []
        do {
            try WireEnvelope.append(to: &frame, kind: kind, recipient: path, manifest: manifest) {
                (out) throws(CBORError) in try payload(&out, &splices)
            }
        } catch {
            refuse(manifest, reply, .handlerFailed("\(manifest) could not be encoded: \(error)"))
            return
        }
        if !splices.isEmpty {
            let length = frame.count - 4 + CBORSplice.byteCount(splices)
            // Checked here too, before the length is written in 32 bits.
            let limit = min(transport.settings.maxMessageSize, Int(UInt32.max))
            guard length <= limit else {
                refuse(manifest, reply, .messageTooLarge(bytes: length, limit: limit))
                return
            }
            WireEnvelope.setLength(length, in: &frame, frameAt: 0)
        }
        let transit = FrameInTransit(frame, splices)
        let send: @Sendable () -> Void = {
            let (frame, splices) = transit.take()
            association.send(
                frame: frame, splices: splices, kind: kind, recipient: path, manifest: manifest, uid: uid, reply: reply)
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
    private var splices: [CBORSplice]
    init(_ frame: [UInt8], _ splices: [CBORSplice]) {
        self.frame = frame
        self.splices = splices
    }
    /// Unchecked but safe: called once, on the loop, after the hand-over
    /// that `EventLoop.execute` orders after `init`.
    func take() -> ([UInt8], [CBORSplice]) {
        var taken: [UInt8] = []
        var takenSplices: [CBORSplice] = []
        swap(&taken, &frame)
        swap(&takenSplices, &splices)
        return (taken, takenSplices)
    }
}
