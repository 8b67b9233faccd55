import OscarBase
import OscarCBOR
import OscarRuntime

/// The reply side of an ask that came from another node: the reaction's
/// outcome is encoded and sent back with the ask's correlation id, on the
/// connection the ask came on (correlation ids are per connection).
final class RemoteReply: ReplyTarget, @unchecked Sendable {
    private let association: Association
    private let connection: Connection
    private let correlation: UInt64
    /// The lane the ask came on: a system actor's reply is system traffic.
    private let lane: Association.Lane
    private let loop: EventLoop

    init(association: Association, connection: Connection, correlation: UInt64, lane: Association.Lane) {
        self.association = association
        self.connection = connection
        self.correlation = correlation
        self.lane = lane
        self.loop = connection.loop
    }

    /// The asker runs the timeout; nothing to arm here.
    package func arm(on loop: EventLoop) {}
    package func waitOn(_ table: any PendingAskTable, correlation: UInt64) {}

    package func succeed<R: Encodable & Sendable>(_ value: R) {
        let (association, connection, correlation, lane) = (
            self.association, self.connection, self.correlation, self.lane
        )
        if loop.inEventLoop {
            // On the connection's loop: encode straight into the outbound batch.
            do {
                try association.sendOutcome(.reply, correlation: correlation, on: connection, lane: lane) {
                    out throws(CBORError) in
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

    package func fail(_ error: AskError) {
        send(.failure, (try? CBOREncoder().encode(error)) ?? [])
    }

    package func complete(_ kind: EncodedOutcome, payload: RawSpan, decoder: CBORDecoder) {
        send(kind == .reply ? .reply : .failure, payload.copiedBytes)
    }

    private func send(_ kind: WireKind, _ payload: [UInt8]) {
        let (association, connection, correlation, lane) = (
            self.association, self.connection, self.correlation, self.lane
        )
        let append: @Sendable () -> Void = {
            try? association.sendOutcome(kind, correlation: correlation, on: connection, lane: lane) {
                $0.append(contentsOf: payload)
            }
        }
        if loop.inEventLoop { append() } else { loop.execute(append) }
    }
}
