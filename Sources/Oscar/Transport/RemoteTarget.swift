/// A ref's target when the actor lives on another node: messages are encoded
/// once, on the sender's thread, and handed to the node's association.
final class RemoteTarget: MessageTarget {
    let address: ActorAddress
    private let association: Association
    private let transport: Transport

    init(address: ActorAddress, association: Association, transport: Transport) {
        self.address = address
        self.association = association
        self.transport = transport
    }

    func deliver<M: Message>(_ message: M, reply: (any ReplyTarget)?) {
        let payload: [UInt8]
        do {
            payload = try CBOREncoder().encode(message)
        } catch {
            refuse(M.manifest, reply, .handlerFailed("\(M.manifest) could not be encoded: \(error)"))
            return
        }
        send(manifest: M.manifest, payload: payload, reply: reply)
    }

    func deliverEncoded(manifest: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer, reply: (any ReplyTarget)?) {
        send(manifest: String(decoding: manifest, as: UTF8.self), payload: Array(payload), reply: reply)
    }

    private func send(manifest: String, payload: [UInt8], reply: (any ReplyTarget)?) {
        let limit = transport.settings.maxFrameSize
        let size = payload.count + manifest.utf8.count + address.path.utf8.count + 16
        guard size <= limit else {
            refuse(manifest, reply, .messageTooLarge(bytes: size, limit: limit))
            return
        }
        let (association, path, uid) = (self.association, address.path, address.node.uid)
        let kind: WireKind = reply == nil ? .tell : .ask
        if transport.ioLoop.inEventLoop {
            association.send(kind: kind, recipient: path, manifest: manifest, uid: uid, payload: payload, reply: reply)
        } else {
            let accepted = transport.ioLoop.execute {
                association.send(
                    kind: kind, recipient: path, manifest: manifest, uid: uid, payload: payload, reply: reply)
            }
            if !accepted { refuse(manifest, reply, .nodeUnreachable(address.node, "this node is shut down")) }
        }
    }

    private func refuse(_ manifest: String, _ reply: (any ReplyTarget)?, _ error: AskError) {
        if let reply {
            reply.fail(error)
        } else {
            transport.system.deadLetter(manifest, to: address, reason: error)
        }
    }
}
