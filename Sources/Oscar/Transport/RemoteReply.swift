/// The reply side of an ask that came from another node: the reaction's
/// outcome is encoded and sent back with the ask's correlation id.
final class RemoteReply: ReplyTarget, @unchecked Sendable {
    private let association: Association
    private let correlation: UInt64
    private let loop: EventLoop

    init(association: Association, correlation: UInt64) {
        self.association = association
        self.correlation = correlation
        self.loop = EventLoop.current!
    }

    /// The asker runs the timeout; nothing to arm here.
    func arm(on loop: EventLoop) {}
    func waitOn(_ table: any PendingAskTable, correlation: UInt64) {}

    func succeed<R: Encodable & Sendable>(_ value: R) {
        let association = self.association
        let correlation = self.correlation
        if loop.inEventLoop {
            // On the connection's loop: encode straight into the outbound batch.
            do {
                try association.sendOutcome(.reply, correlation: correlation) { out throws(CBORError) in
                    try CBOREncoder().encode(value, appendingTo: &out, using: association.encoding)
                }
            } catch {
                fail(.handlerFailed("the reply could not be encoded: \(error)"))
            }
            return
        }
        do {
            send(.reply, try CBOREncoder().encode(value))
        } catch {
            fail(.handlerFailed("the reply could not be encoded: \(error)"))
        }
    }

    func fail(_ error: AskError) {
        send(.failure, (try? CBOREncoder().encode(error)) ?? [])
    }

    func complete(wire kind: WireKind, payload: UnsafeRawBufferPointer, decoder: CBORDecoder) {
        send(kind, Array(payload))
    }

    private func send(_ kind: WireKind, _ payload: [UInt8]) {
        let (association, correlation) = (self.association, self.correlation)
        let append: @Sendable () -> Void = {
            try? association.sendOutcome(kind, correlation: correlation) { $0.append(contentsOf: payload) }
        }
        if loop.inEventLoop { append() } else { loop.execute(append) }
    }
}
