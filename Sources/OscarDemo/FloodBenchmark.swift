import OscarBase
import OscarCBOR
import OscarCluster
import OscarDistributed
import OscarMembership
import OscarRemote
import OscarRuntime
import OscarTestKit
import Synchronization

/// The control-lane check: node A floods node B with tells for a while,
/// faster than B's receiver can take them, and counts the unreachable events
/// either node sees. Membership shares the connection with the flood; it must
/// not wait behind it or be refused because the flood filled the queue, so
/// the goal is zero events. Dead letters show the flood really filled the
/// bounded queue.
///
/// Both nodes run in this process, each with its own loops; they are two
/// members of one cluster, as two processes would be.
public enum FloodBenchmark {
    /// B's receiver: a little work per message, so that A produces faster
    /// than B consumes and A's outbound queue reaches its bound.
    final class SlowReceiver: Reactor {
        package var count: Int64 = 0
        var mix: UInt64 = 0
        static func reactions(_ r: inout Reactions<SlowReceiver>) {
            r.on(
                Payload.self,
                do: { me, m in
                    me.count += 1
                    var x = UInt64(bitPattern: m.i) &+ me.mix
                    for _ in 0..<200 { x = x &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407 }
                    me.mix = x
                })
            r.on(Flush.self, result: { me, _ in me.count })
        }
    }

    struct Flood: Message {
        typealias Reply = Int64
        package var target: ActorRef
        package var seconds: Int
    }

    /// A's sender: batches of tells, with a short pause between batches so
    /// A's loop also runs its timers and I/O, as a busy application's does.
    final class Flooder: Reactor {
        static func reactions(_ r: inout Reactions<Flooder>) {
            r.on(
                Flood.self,
                future: { _, m in
                    let clock = ContinuousClock()
                    let end = clock.now + .seconds(m.seconds)
                    var sent: Int64 = 0
                    while clock.now < end {
                        for _ in 0..<20_000 {
                            sent += 1
                            m.target.tell(Payload(i: sent))
                        }
                        try await Task.sleep(for: .milliseconds(1))
                    }
                    return sent
                })
        }
    }

    /// Floods for `seconds` and returns the figures.
    public static func run(seconds: Int, secret: String) async throws -> [BenchFigure] {
        let a = try ClusterNode(settings: .init(secret: secret, loopCount: 2)) { actors in
            actors.nodeSingleton("flooder") { Flooder() }
        }
        defer { a.shutdown() }
        let b = try ClusterNode(settings: .init(secret: secret, loopCount: 2, seeds: [a.address])) { actors in
            actors.nodeSingleton("receiver") { SlowReceiver() }
        }
        defer { b.shutdown() }
        let unreachable = Atomic<Int>(0)
        for node in [a, b] {
            let observer = node.address
            node.listen { event in
                guard case .unreachable(let member) = event else { return }
                unreachable.wrappingAdd(1, ordering: .relaxed)
                OscarLog.shared.warning("flood: \(observer) sees \(member.node) unreachable")
            }
        }
        let clock = ContinuousClock()
        let formedBy = clock.now + .seconds(60)
        while clock.now < formedBy {
            let view = try? await a.membership(of: b.address, timeout: .seconds(2))
            if view?.members.filter({ $0.status == .up }).count == 2 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        let receiver = a.system.ref("oscar://127.0.0.1:\(b.address.port)/user/receiver")!
        let flooder = a.system.ref("oscar://127.0.0.1:\(a.address.port)/user/flooder")!
        let deadBefore = a.system.deadLetters
        let before = unreachable.load(ordering: .relaxed)
        let sent = try await flooder.ask(Flood(target: receiver, seconds: seconds), timeout: .seconds(seconds + 60))
        let received = try await receiver.ask(Flush(), timeout: .seconds(120))
        return [
            BenchFigure(
                metric: "flood_unreachable_events", value: Double(unreachable.load(ordering: .relaxed) - before),
                unit: "count"),
            BenchFigure(metric: "flood_tells_sent", value: Double(sent), unit: "msg"),
            BenchFigure(metric: "flood_tells_received", value: Double(received), unit: "msg"),
            BenchFigure(metric: "flood_dead_letters", value: Double(a.system.deadLetters - deadBefore), unit: "msg"),
        ]
    }
}
