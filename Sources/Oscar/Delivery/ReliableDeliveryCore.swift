/// Reliable delivery between one producer and one consumer, as two pure
/// state machines: sequence numbers, cumulative acknowledgements, resends,
/// deduplication, in-order delivery and a flow-control window. The shells
/// (`ReliableProducer`, `ReliableConsumer`) move their directives over the
/// ordinary, at-most-once transport.
///
/// Go-back-N: the consumer takes only the next sequence number, and
/// acknowledges the highest one it has processed; the producer resends
/// everything unacknowledged, in order, on each resend tick without
/// progress. So each message is processed exactly once and in order, as
/// long as both sides keep their state: connection loss, partitions and
/// pauses are survived; a crash of either side is not (nothing is stored).
public enum ReliableDelivery {
    /// One message in flight: its number and its encoded bytes.
    public struct Envelope: Codable, Sendable, Hashable {
        public var seq: UInt64
        public var payload: [UInt8]
    }

    public struct Producer: Sendable {
        public enum Directive: Sendable, Hashable {
            /// Send this envelope to the consumer.
            case transmit(Envelope)
            /// Messages up to this number are acknowledged: their senders
            /// may go on, and the window has room again.
            case acknowledged(upTo: UInt64)
        }

        /// Unacknowledged messages the producer keeps at most; `offer`
        /// refuses beyond it, so memory stays bounded by a slow consumer.
        public let window: Int
        public private(set) var nextSeq: UInt64 = 1
        public private(set) var acked: UInt64 = 0
        public private(set) var unacked: [Envelope] = []
        /// Set when an ack made progress since the last resend tick.
        private var progressed = false

        public init(window: Int = 64) {
            precondition(window > 0)
            self.window = window
        }

        public var hasRoom: Bool { unacked.count < window }

        /// Takes a message if the window has room (nil when full).
        public mutating func offer(_ payload: [UInt8]) -> [Directive]? {
            guard hasRoom else { return nil }
            let envelope = Envelope(seq: nextSeq, payload: payload)
            nextSeq += 1
            unacked.append(envelope)
            return [.transmit(envelope)]
        }

        /// The consumer has processed everything up to `seq`.
        public mutating func onAck(upTo seq: UInt64) -> [Directive] {
            guard seq > acked, seq < nextSeq else { return [] }
            acked = seq
            unacked.removeAll { $0.seq <= seq }
            progressed = true
            return [.acknowledged(upTo: seq)]
        }

        /// A resend period passed: with no progress, send everything
        /// unacknowledged again, in order.
        public mutating func onTick() -> [Directive] {
            defer { progressed = false }
            guard !progressed else { return [] }
            return unacked.map { .transmit($0) }
        }
    }

    public struct Consumer: Sendable {
        public enum Directive: Sendable, Hashable {
            /// Process this message (the next in order, never seen before).
            case deliver(Envelope)
            /// Tell the producer everything up to here is processed.
            case ack(upTo: UInt64)
        }

        /// The highest sequence number processed, in order.
        public private(set) var processed: UInt64 = 0
        /// Set while a delivered message is being processed.
        public private(set) var busy = false

        public init() {}

        /// An envelope arrived. Only the next one in order is delivered; a
        /// duplicate or an early one is dropped and the ack repeated, so the
        /// producer learns where to resume.
        public mutating func onReceive(_ envelope: Envelope) -> [Directive] {
            guard !busy, envelope.seq == processed + 1 else {
                return processed > 0 ? [.ack(upTo: processed)] : []
            }
            busy = true
            return [.deliver(envelope)]
        }

        /// The delivered message is processed.
        public mutating func onProcessed(_ seq: UInt64) -> [Directive] {
            guard busy, seq == processed + 1 else { return [] }
            busy = false
            processed = seq
            return [.ack(upTo: seq)]
        }
    }
}
