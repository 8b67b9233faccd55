import Testing

@testable import Oscar

/// The pure producer and consumer over a simulated channel that loses,
/// duplicates and reorders envelopes and acks, from a fixed seed.
@Suite struct ReliableDeliveryTests {
    struct Channel {
        var random: SplitMix64
        var loss: Double
        var inFlightToConsumer: [ReliableDelivery.Envelope] = []
        var inFlightToProducer: [UInt64] = []

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
        var producer = ReliableDelivery.Producer(window: window)
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
                    case .ack(let upTo): channel.inFlightToProducer = channel.carry(upTo, channel.inFlightToProducer)
                    }
                }
            }
            if !channel.inFlightToProducer.isEmpty {
                transmit(producer.onAck(upTo: channel.inFlightToProducer.removeFirst()))
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
        var p = ReliableDelivery.Producer(window: 2)
        #expect(p.offer([1]) != nil)
        #expect(p.offer([2]) != nil)
        #expect(p.offer([3]) == nil)
        #expect(p.onAck(upTo: 1) == [.acknowledged(upTo: 1)])
        #expect(p.offer([3]) != nil)
        #expect(p.onAck(upTo: 9) == [], "an ack for something never sent is ignored")
    }

    @Test func theConsumerDropsDuplicatesAndEarlyMessagesAndRepeatsItsAck() {
        var c = ReliableDelivery.Consumer()
        let e1 = ReliableDelivery.Envelope(seq: 1, payload: [1])
        let e2 = ReliableDelivery.Envelope(seq: 2, payload: [2])
        #expect(c.onReceive(e2) == [], "early, before anything: dropped")
        #expect(c.onReceive(e1) == [.deliver(e1)])
        #expect(c.onReceive(e1) == [], "a duplicate while processing: dropped")
        #expect(c.onProcessed(1) == [.ack(upTo: 1)])
        #expect(c.onReceive(e1) == [.ack(upTo: 1)], "a duplicate later: the ack again")
        #expect(c.onReceive(e2) == [.deliver(e2)])
    }

    @Test func withoutProgressATickResendsEverythingUnacknowledgedInOrder() {
        var p = ReliableDelivery.Producer(window: 8)
        _ = p.offer([1])
        _ = p.offer([2])
        let resent = p.onTick().compactMap { d -> UInt64? in if case .transmit(let e) = d { e.seq } else { nil } }
        #expect(resent == [1, 2])
        _ = p.onAck(upTo: 1)
        #expect(p.onTick() == [], "progress since the last tick: no resend yet")
        #expect(p.onTick().count == 1)
    }
}
