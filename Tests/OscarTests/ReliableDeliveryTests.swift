import Oscar
import Testing

@testable import OscarCluster

/// The pure producer and consumer over a simulated channel that loses,
/// duplicates and reorders envelopes and acks, from a fixed seed.
@Suite(.timeLimit(.minutes(5))) struct ReliableDeliveryTests {
    struct Channel {
        var random: SplitMix64
        var loss: Double
        var inFlightToConsumer: [ReliableDelivery.Envelope] = []
        var inFlightToProducer: [UInt64] = []
        static let stream: UInt64 = 7

        /// Lost, or delivered at a random place (reordered), sometimes twice.
        mutating func carry<T>(_ item: T, _ queue: [T]) -> [T] {
            var queue = queue
            if random.unit() < loss { return queue }
            queue.insert(item, at: Int(random.next() % UInt64(queue.count + 1)))
            if random.unit() < 0.1 { queue.append(item) }
            return queue
        }
    }

    static func run(
        count: Int, window: Int, loss: Double, seed: UInt64
    ) -> (delivered: [Int], maxUnacked: Int, acked: UInt64) {
        var producer = ReliableDelivery.Producer(window: window, stream: Channel.stream)
        var consumer = ReliableDelivery.Consumer()
        var channel = Channel(random: SplitMix64(seed: seed), loss: loss)
        var delivered: [Int] = []
        var next = 0
        var maxUnacked = 0
        func transmit(_ directives: [ReliableDelivery.Producer.Directive]) {
            for case .transmit(let e) in directives {
                channel.inFlightToConsumer = channel.carry(e, channel.inFlightToConsumer)
            }
        }
        for _ in 0..<200_000 {
            while next < count, let d = producer.offer([UInt8(next % 256), UInt8(next / 256)]) {
                next += 1
                transmit(d)
            }
            maxUnacked = max(maxUnacked, producer.unacked.count)
            if producer.acked == UInt64(count) { break }
            if channel.inFlightToConsumer.isEmpty && channel.inFlightToProducer.isEmpty {
                transmit(producer.onTick())  // a resend period passes
                continue
            }
            if !channel.inFlightToConsumer.isEmpty {
                let e = channel.inFlightToConsumer.removeFirst()
                var work = consumer.onReceive(e)
                while !work.isEmpty {
                    switch work.removeFirst() {
                    case .deliver(let env):
                        delivered.append(Int(env.payload[0]) + Int(env.payload[1]) * 256)
                        work += consumer.onProcessed(env.seq)
                    case .ack(let upTo, _): channel.inFlightToProducer = channel.carry(upTo, channel.inFlightToProducer)
                    }
                }
            }
            if !channel.inFlightToProducer.isEmpty {
                transmit(producer.onAck(upTo: channel.inFlightToProducer.removeFirst(), stream: Channel.stream))
            }
        }
        return (delivered, maxUnacked, producer.acked)
    }

    @Test func everyMessageIsProcessedExactlyOnceInOrderDespiteLossDuplicatesAndReordering() {
        for seed in UInt64(1)...20 {
            let r = Self.run(count: 500, window: 16, loss: 0.3, seed: seed)
            #expect(r.acked == 500, "seed \(seed): not everything acknowledged")
            #expect(r.delivered == Array(0..<500), "seed \(seed): processed out of order, twice or not at all")
            #expect(r.maxUnacked <= 16, "the window bounds the producer's memory")
        }
    }

    @Test func theWindowRefusesWhenFullAndAnAckMakesRoom() {
        var p = ReliableDelivery.Producer(window: 2, stream: 7)
        #expect(p.offer([1]) != nil)
        #expect(p.offer([2]) != nil)
        #expect(p.offer([3]) == nil)
        #expect(p.onAck(upTo: 1, stream: 8) == [], "an ack for another producer's stream is ignored")
        #expect(p.onAck(upTo: 1, stream: 7) == [.acknowledged(upTo: 1)])
        #expect(p.offer([3]) != nil)
        #expect(p.onAck(upTo: 9, stream: 7) == [], "an ack for something never sent is ignored")
    }

    @Test func theConsumerDropsDuplicatesAndEarlyMessagesAndRepeatsItsAck() {
        var c = ReliableDelivery.Consumer()
        let e1 = ReliableDelivery.Envelope(stream: 7, seq: 1, acked: 0, payload: [1])
        let e2 = ReliableDelivery.Envelope(stream: 7, seq: 2, acked: 0, payload: [2])
        #expect(c.onReceive(e2) == [], "early, before anything: dropped")
        #expect(c.onReceive(e1) == [.deliver(e1)])
        #expect(c.onReceive(e1) == [], "a duplicate while processing: dropped")
        #expect(c.onProcessed(1) == [.ack(upTo: 1, stream: 7)])
        #expect(c.onReceive(e1) == [.ack(upTo: 1, stream: 7)], "a duplicate later: the ack again")
        #expect(c.onReceive(e2) == [.deliver(e2)])
    }

    @Test func withoutProgressATickResendsEverythingUnacknowledgedInOrder() {
        var p = ReliableDelivery.Producer(window: 8, stream: 7)
        _ = p.offer([1])
        _ = p.offer([2])
        let resent = p.onTick().compactMap { d -> UInt64? in if case .transmit(let e) = d { e.seq } else { nil } }
        #expect(resent == [1, 2])
        _ = p.onAck(upTo: 1, stream: 7)
        #expect(p.onTick() == [], "progress since the last tick: no resend yet")
        #expect(p.onTick().count == 1)
    }

    // MARK: - Restarts: what the stream promises

    /// A FIFO channel (as Oscar's per-pair order is) whose consumer process
    /// restarts at random points, losing what was in flight to it: every
    /// message is processed at least once, each consumer incarnation
    /// processes in order without gaps, and a message is processed again
    /// only by a new consumer, and only if its acknowledgement had not
    /// reached the producer.
    @Test func aRestartedConsumerResumesAtTheOldestUnacknowledgedMessage() {
        for seed in UInt64(1)...30 {
            var random = SplitMix64(seed: seed)
            var producer = ReliableDelivery.Producer(window: 8, stream: 7)
            var consumer = ReliableDelivery.Consumer()
            var incarnation = 0
            var toConsumer: [ReliableDelivery.Envelope] = []
            var toProducer: [UInt64] = []
            var processed: [(seq: UInt64, by: Int, ackedThen: UInt64)] = []
            var next: UInt8 = 0
            for _ in 0..<20_000 where producer.acked < 200 {
                if next < 200, let d = producer.offer([next]) {
                    next += 1
                    for case .transmit(let e) in d { toConsumer.append(e) }
                }
                if random.unit() < 0.01 {  // the consumer's process restarts
                    consumer = ReliableDelivery.Consumer()
                    incarnation += 1
                    toConsumer.removeAll()
                }
                if let e = toConsumer.first, random.unit() < 0.7 {
                    toConsumer.removeFirst()
                    var work = consumer.onReceive(e)
                    while !work.isEmpty {
                        switch work.removeFirst() {
                        case .deliver(let env):
                            processed.append((env.seq, incarnation, producer.acked))
                            work += consumer.onProcessed(env.seq)
                        case .ack(let upTo, _): toProducer.append(upTo)
                        }
                    }
                }
                if let a = toProducer.first, random.unit() < 0.7 {
                    toProducer.removeFirst()
                    _ = producer.onAck(upTo: a, stream: 7)
                }
                if random.unit() < 0.05 { for case .transmit(let e) in producer.onTick() { toConsumer.append(e) } }
            }
            #expect(producer.acked == 200, "seed \(seed): stuck at \(producer.acked)")
            #expect(Set(processed.map(\.seq)) == Set(1...200), "seed \(seed): a message was never processed")
            for by in Set(processed.map(\.by)) {
                let seqs = processed.filter { $0.by == by }.map(\.seq)
                #expect(zip(seqs, seqs.dropFirst()).allSatisfy { $1 == $0 + 1 }, "seed \(seed): gap or disorder")
            }
            var first: [UInt64: Int] = [:]
            for p in processed {
                if let by = first[p.seq] {
                    #expect(p.by != by, "seed \(seed): one consumer processed \(p.seq) twice")
                    #expect(p.ackedThen < p.seq, "seed \(seed): \(p.seq) processed again after it was acknowledged")
                } else {
                    first[p.seq] = p.by
                }
            }
        }
    }

    /// A restarted producer is a new stream: the consumer takes it from its
    /// first message, not as a duplicate of the old stream's.
    @Test func aRestartedProducerStartsANewStreamThatTheConsumerTakesFromOne() {
        var c = ReliableDelivery.Consumer()
        let old = ReliableDelivery.Envelope(stream: 7, seq: 1, acked: 0, payload: [1])
        #expect(c.onReceive(old) == [.deliver(old)])
        #expect(c.onProcessed(1) == [.ack(upTo: 1, stream: 7)])
        let fresh = ReliableDelivery.Envelope(stream: 9, seq: 1, acked: 0, payload: [2])
        #expect(c.onReceive(fresh) == [.deliver(fresh)])
        #expect(c.onProcessed(1) == [.ack(upTo: 1, stream: 9)])
        #expect(c.stream == 9)
        var p = ReliableDelivery.Producer(window: 4, stream: 9)
        _ = p.offer([2])
        #expect(p.onAck(upTo: 1, stream: 7) == [], "the old stream's ack does not count for the new one")
    }
}
