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
        let payload: [UInt8]
        do {
            payload = try CBOREncoder().encode(message)
        } catch {
            refuse(M.manifest, reply, .handlerFailed("\(M.manifest) could not be encoded: \(error)"))
            return
        }
        send(manifest: M.manifest, payload: payload, reply: reply)
    }

    package func deliverEncoded(manifest: RawSpan, payload: RawSpan, reply: (any ReplyTarget)?) {
        send(manifest: manifest.utf8Text, payload: payload.copiedBytes, reply: reply)
    }

    /// Hands already encoded bytes to the association, on its loop. The
    /// association checks the frame against the maximum size.
    private func send(manifest: String, payload: [UInt8], reply: (any ReplyTarget)?) {
        let (association, path, uid) = (self.association, address.path, address.node.uid)
        let kind: WireKind = reply == nil ? .tell : .ask
        let send: @Sendable () -> Void = {
            association.send(kind: kind, recipient: path, manifest: manifest, uid: uid, reply: reply) { out in
                out.append(contentsOf: payload)
            }
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
