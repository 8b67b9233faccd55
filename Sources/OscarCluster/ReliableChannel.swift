import CoreEngine
import OscarBase
import OscarCBOR
import OscarMembership
import OscarRemote
import OscarRuntime
import Synchronization

/// The wire messages between a reliable producer and its consumer.
enum ReliableWire {
    struct Transmit: Message {
        package static var manifest: String { "oscar.reliable.transmit" }
        var envelope: ReliableDelivery.Envelope
        /// Where acknowledgements go.
        package var producer: ActorRef
    }
    struct Ack: Message {
        package static var manifest: String { "oscar.reliable.ack" }
        var upTo: UInt64
        package var stream: UInt64
    }
    struct Tick: Message {
        package static var manifest: String { "oscar.reliable.tick" }
    }
}

/// The consumer end of a reliable channel: an actor that processes each
/// message once, in order, and acknowledges it after `handle` returns.
/// Create it with `ReliableConsumer.spawn(on:name:_:handle:)` and give its
/// ref to the producer.
public final class ReliableConsumer<M: Message>: Reactor {
    private var core = ReliableDelivery.Consumer()
    private let handle: (M) -> Void
    private var decoder: CBORDecoder?

    package init(handle: @escaping (M) -> Void) { self.handle = handle }

    /// Spawns the consumer actor on `system` and returns its ref. `handle`
    /// runs on the consumer actor's loop, one message at a time, in order;
    /// the message is acknowledged when it returns. A producer learns how
    /// far the consumer got from `ReliableProducer.acknowledged`.
    public static func spawn(
        on system: ActorSystem, name: String, _ type: M.Type = M.self, handle: @escaping @Sendable (M) -> Void
    ) throws -> ActorRef {
        try system.spawn(name) { ReliableConsumer<M>(handle: handle) }
    }

    public func started(_ context: ActorContext) { decoder = context.system?.decoder }

    public static func reactions(_ r: inout Reactions<ReliableConsumer<M>>) {
        r.on(
            ReliableWire.Transmit.self,
            do: { me, m in
                for directive in me.core.onReceive(m.envelope) { me.perform(directive, producer: m.producer) }
            })
    }

    private func perform(_ directive: ReliableDelivery.Consumer.Directive, producer: ActorRef) {
        switch directive {
        case .deliver(let envelope):
            if envelope.seq == 5, PlantedBug.skipsFifthDelivery.load(ordering: .relaxed) {
                OscarLog.shared.warning("planted fault: message \(envelope.seq) acknowledged without processing")
            } else if let decoder, let message = try? decoder.decode(M.self, from: envelope.payload) {
                handle(message)
            } else {
                OscarLog.shared.error(
                    "reliable consumer: message \(envelope.seq) does not decode as \(M.manifest); skipped")
            }
            for next in core.onProcessed(envelope.seq) { perform(next, producer: producer) }
        case .ack(let upTo, let stream):
            producer.tell(ReliableWire.Ack(upTo: upTo, stream: stream))
        }
    }
}

/// The producer end of a reliable channel to one consumer (usually on
/// another node). `send` suspends while the window is full, so a slow
/// consumer bounds the producer's memory; `acknowledged` says how far the
/// consumer has processed.
public final class ReliableProducer<M: Message>: Sendable {
    private struct State {
        var core: ReliableDelivery.Producer
        var roomWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state: Mutex<State>
    private let consumer: ActorRef
    private let endpoint = Mutex<ActorRef?>(nil)
    private let system: ActorSystem

    /// A producer on `system` sending to `consumer`; `name` names its
    /// acknowledgement endpoint there. Unacknowledged messages are resent
    /// every `resendInterval` without progress.
    public init(
        on system: ActorSystem, name: String, to consumer: ActorRef, _ type: M.Type = M.self, window: Int = 64,
        resendInterval: Duration = .milliseconds(500)
    ) throws {
        self.system = system
        self.consumer = consumer
        self.state = Mutex(
            State(core: ReliableDelivery.Producer(window: window, stream: UInt64.random(in: 1...UInt64.max))))
        let ref = try system.spawn(name) { [weak self] in ProducerEndpoint(interval: resendInterval, owner: self) }
        endpoint.withLock { $0 = ref }
    }

    /// This producer's stream id: a restarted producer starts a new stream.
    public var stream: UInt64 { state.withLock { $0.core.stream } }
    /// Messages acknowledged so far (all sequence numbers up to this).
    public var acknowledged: UInt64 { state.withLock { $0.core.acked } }
    /// Messages accepted by `send` so far.
    public var sent: UInt64 { state.withLock { $0.core.nextSeq - 1 } }

    /// Sends `message`, waiting while the window is full. Returns once the
    /// channel has taken it (not when it is acknowledged). A message that
    /// cannot be encoded is refused as a remote ask refuses it
    /// (`AskError.handlerFailed`, saying so), and nothing is sent.
    public func send(_ message: M) async throws(AskError) {
        let payload: [UInt8]
        do { payload = try CBOREncoder().encode(message) } catch {
            throw .handlerFailed("\(M.manifest) could not be encoded: \(error)")
        }
        while true {
            let directives = state.withLock { $0.core.offer(payload) }
            if let directives {
                perform(directives)
                return
            }
            await withCheckedContinuation { continuation in
                let resumeNow = state.withLock { s -> Bool in
                    if s.core.hasRoom { return true }
                    s.roomWaiters.append(continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        }
    }

    fileprivate func onAck(_ upTo: UInt64, stream: UInt64) {
        let (directives, resume) = state.withLock {
            s -> ([ReliableDelivery.Producer.Directive], [CheckedContinuation<Void, Never>]) in
            let d = s.core.onAck(upTo: upTo, stream: stream)
            guard s.core.hasRoom else { return (d, []) }
            defer { s.roomWaiters.removeAll() }
            return (d, s.roomWaiters)
        }
        perform(directives)
        for c in resume { c.resume() }
    }

    fileprivate func onTick() { perform(state.withLock { $0.core.onTick() }) }

    private func perform(_ directives: [ReliableDelivery.Producer.Directive]) {
        guard let me = endpoint.withLock({ $0 }) else { return }
        for directive in directives {
            if case .transmit(let envelope) = directive {
                consumer.tell(ReliableWire.Transmit(envelope: envelope, producer: me))
            }
        }
    }

    /// Stops the acknowledgement endpoint (and its resend timer).
    public func close() {
        if let ref = endpoint.withLock({ $0 }) { system.stop(ref) }
    }
}

/// Receives a producer's acknowledgements and drives its resend ticks.
final class ProducerEndpoint<M: Message>: Reactor {
    private let interval: Duration
    private weak var owner: ReliableProducer<M>?
    private var timer: LoopTimer?
    private var context: ActorContext?

    init(interval: Duration, owner: ReliableProducer<M>?) {
        self.interval = interval
        self.owner = owner
    }

    package func started(_ context: ActorContext) {
        self.context = context
        schedule()
    }

    package func stopped() {
        if let timer, let loop = EventLoop.current { loop.cancelTimer(timer) }
    }

    private func schedule() {
        guard let loop = EventLoop.current, let me = context?.ref else { return }
        timer = loop.scheduleTimer(after: interval) { [weak self] in
            me.tell(ReliableWire.Tick())
            self?.schedule()
        }
    }

    package static func reactions(_ r: inout Reactions<ProducerEndpoint<M>>) {
        r.on(ReliableWire.Ack.self, do: { me, m in me.owner?.onAck(m.upTo, stream: m.stream) })
        r.on(ReliableWire.Tick.self, do: { me, _ in me.owner?.onTick() })
    }
}

/// A bug the test kit can plant on purpose, to prove that a chaos run catches
/// broken reliable delivery: every consumer acknowledges message 5 without
/// processing it. Off unless the test kit's `PlantedFault` turns it on;
/// nothing in the library does.
package enum PlantedBug {
    package static let skipsFifthDelivery = Atomic<Bool>(false)
}
