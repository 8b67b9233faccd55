import OscarBase
import OscarCBOR
import OscarMembership
import OscarRemote
import OscarRuntime

/// Reliable delivery between one producer and one consumer, as two pure
/// state machines: sequence numbers, cumulative acknowledgements, resends,
/// deduplication, in-order delivery and a flow-control window. The shells
/// (`ReliableProducer`, `ReliableConsumer`) move their directives over the
/// ordinary, at-most-once transport.
///
/// Go-back-N: the consumer takes only the next sequence number, and
/// acknowledges the highest one it has processed; the producer resends
/// everything unacknowledged, in order, on each resend tick without
/// progress. What that promises (nothing is stored on disk, as with Akka's
/// reliable delivery without a durable producer queue):
/// - while both ends live: every message exactly once, in order, across
///   connection loss, partitions and pauses;
/// - the consumer's process restarts: at least once, in order. The new
///   consumer resumes at the oldest unacknowledged message, so a message the
///   old one processed but had not yet had acknowledged is processed again;
///   nothing acknowledged is lost;
/// - the producer's process restarts: a new stream, with a new `stream` id,
///   starts again at 1. Messages the old producer took but had not had
///   acknowledged are lost with it; the consumer takes the new stream from
///   its first message and counts it apart from the old one.
package enum ReliableDelivery {
    /// One message in flight: its stream, its number and its encoded bytes.
    public struct Envelope: Codable, Sendable, Hashable {
        /// The producer's incarnation: random per producer.
        public var stream: UInt64
        public var seq: UInt64
        /// Everything of the stream up to here was acknowledged when this
        /// was sent: a consumer that starts afresh resumes after it.
        public var acked: UInt64
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
        /// This producer's stream id, sent with every envelope and matched
        /// on every acknowledgement.
        public let stream: UInt64
        public private(set) var nextSeq: UInt64 = 1
        public private(set) var acked: UInt64 = 0
        public private(set) var unacked: [Envelope] = []
        /// Set when an ack made progress since the last resend tick.
        private var progressed = false

        public init(window: Int = 64, stream: UInt64) {
            precondition(window > 0)
            self.window = window
            self.stream = stream
        }

        public var hasRoom: Bool { unacked.count < window }

        /// Takes a message if the window has room (nil when full).
        public mutating func offer(_ payload: [UInt8]) -> [Directive]? {
            guard hasRoom else { return nil }
            let envelope = Envelope(stream: stream, seq: nextSeq, acked: acked, payload: payload)
            nextSeq += 1
            unacked.append(envelope)
            return [.transmit(envelope)]
        }

        /// The consumer has processed everything of `stream` up to `seq`
        /// (an acknowledgement for an earlier producer's stream is ignored).
        public mutating func onAck(upTo seq: UInt64, stream: UInt64) -> [Directive] {
            guard stream == self.stream, seq > acked, seq < nextSeq else { return [] }
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
            return unacked.map { envelope in
                var resent = envelope
                resent.acked = acked
                return .transmit(resent)
            }
        }
    }

    public struct Consumer: Sendable {
        public enum Directive: Sendable, Hashable {
            /// Process this message (the next in order, never seen before).
            case deliver(Envelope)
            /// Tell the producer everything of `stream` up to here is processed.
            case ack(upTo: UInt64, stream: UInt64)
        }

        /// The stream being consumed: nil until the first envelope.
        public private(set) var stream: UInt64?
        /// The highest sequence number processed, in order.
        public private(set) var processed: UInt64 = 0
        /// Set while a delivered message is being processed.
        public private(set) var busy = false

        public init() {}

        /// An envelope arrived. Only the next one in order is delivered; a
        /// duplicate or an early one is dropped and the ack repeated, so the
        /// producer learns where to resume. A consumer that has no stream yet
        /// (its process just started), or that sees a new stream (the
        /// producer's did), takes the stream up after what the envelope says
        /// was acknowledged: the old consumer processed that much.
        public mutating func onReceive(_ envelope: Envelope) -> [Directive] {
            guard !busy else { return [] }
            if envelope.stream != stream {
                stream = envelope.stream
                processed = envelope.acked
            }
            guard envelope.seq == processed + 1 else {
                return processed > 0 ? [.ack(upTo: processed, stream: envelope.stream)] : []
            }
            busy = true
            return [.deliver(envelope)]
        }

        /// The delivered message is processed.
        public mutating func onProcessed(_ seq: UInt64) -> [Directive] {
            guard busy, seq == processed + 1 else { return [] }
            busy = false
            processed = seq
            return stream.map { [.ack(upTo: seq, stream: $0)] } ?? []
        }
    }
}
