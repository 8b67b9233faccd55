import Foundation
import Oscar
import OscarBase
import OscarTestSupport
import Testing

/// An application's large `Data` between two nodes over TCP: decoded from
/// the reassembled buffer without a copy where it is large enough, it must
/// arrive whole, and an actor that keeps it must still hold the same bytes
/// after later messages have come and gone.
@Suite(.timeLimit(.minutes(3))) struct LargeDataTests {
    struct Pair: Codable, Sendable, Equatable {
        var a: Data
        var b: Data
    }
    struct Keep: Message {
        typealias Reply = Pair
        var pair: Pair
    }
    struct Kept: Message {
        typealias Reply = [Pair]
    }

    /// A numbered tell of some size, for the order test.
    struct Numbered: Message {
        typealias Reply = Done
        var seq: Int
        var data: Data
    }
    struct Received: Message {
        typealias Reply = [Int]
    }

    /// Records the number and size of every `Numbered` tell, in arrival order.
    final class Recorder: Reactor {
        var arrived: [Int] = []
        static func reactions(_ r: inout Reactions<Recorder>) {
            r.on(
                Numbered.self,
                do: { me, m in
                    // The bytes are checked too: each is the message's number.
                    let whole = m.data.allSatisfy { $0 == UInt8(truncatingIfNeeded: m.seq) }
                    me.arrived += [m.seq, whole ? m.data.count : -1]
                })
            r.on(Received.self, result: { me, _ in me.arrived })
        }
    }

    /// Tells `to` a `Numbered` of each size, from its reaction: on the
    /// node's only loop, where the connection lives, so each is encoded
    /// straight into the outbound batch.
    struct Burst: Message {
        typealias Reply = Int
        var to: ActorRef
        var firstSeq: Int
        var sizes: [Int]
    }
    final class Sender: Reactor {
        static func reactions(_ r: inout Reactions<Sender>) {
            r.on(
                Burst.self,
                result: { _, m in
                    for (n, size) in m.sizes.enumerated() {
                        let seq = m.firstSeq + n
                        m.to.tell(
                            Numbered(seq: seq, data: Data(repeating: UInt8(truncatingIfNeeded: seq), count: size)))
                    }
                    return m.sizes.count
                })
        }
    }

    /// Keeps every pair it is sent and echoes it back.
    final class Keeper: Reactor {
        var kept: [Pair] = []
        static func reactions(_ r: inout Reactions<Keeper>) {
            r.on(
                Keep.self,
                result: { me, m in
                    me.kept.append(m.pair)
                    return m.pair
                })
            r.on(Kept.self, result: { me, _ in me.kept })
        }
    }

    @Test func largeDataArrivesWholeBothWaysAndWhatAnActorKeepsStaysIntact() async throws {
        let settings = ClusterNode.Settings(port: 0, secret: "a-long-cluster-secret", loopCount: 2)
        let a = try ClusterNode(settings: settings)
        let b = try ClusterNode(settings: settings) { $0.nodeSingleton("keeper") { Keeper() } }
        defer { shutDown(a, b) }
        let keeper = a.system.ref("oscar://127.0.0.1:\(b.address.port)/user/keeper")!
        var random = SplitMix64(seed: 20_261_205)
        // Below the sharing threshold, above it, and large enough to be chunked.
        let sizes = [1_000, 40_000, 70_000, 200_000, 1_500_000]
        var sent: [Pair] = []
        for round in 0..<12 {
            func data() -> Data {
                let count = sizes[Int.random(in: 0..<sizes.count, using: &random)]
                return Data((0..<count).map { _ in UInt8.random(in: 0...255, using: &random) })
            }
            let pair = Pair(a: data(), b: data())
            sent.append(pair)
            let echoed = try await keeper.ask(Keep(pair: pair), timeout: .seconds(30))
            #expect(echoed == pair, "round \(round): \(pair.a.count) and \(pair.b.count) bytes")
        }
        let kept = try await keeper.ask(Kept(), timeout: .seconds(30))
        #expect(kept == sent)
    }

    /// Tells of random sizes, from off the transport's loop, in bursts: small
    /// ones batch up while large ones (some just over a chunk) arrive and
    /// go to the large lane, and tells to a second actor mix in. Each
    /// recipient gets its own in the order sent, whole.
    @Test func tellsOfMixedSizesFromOffTheLoopArriveWholeAndInOrder() async throws {
        let settings = ClusterNode.Settings(port: 0, secret: "a-long-cluster-secret", loopCount: 2)
        let a = try ClusterNode(settings: settings)
        let b = try ClusterNode(settings: settings) {
            $0.nodeSingleton("first") { Recorder() }
            $0.nodeSingleton("second") { Recorder() }
        }
        defer { shutDown(a, b) }
        let first = a.system.ref("oscar://127.0.0.1:\(b.address.port)/user/first")!
        let second = a.system.ref("oscar://127.0.0.1:\(b.address.port)/user/second")!
        _ = try await first.ask(Received(), timeout: .seconds(30))  // connected
        let sizes = [0, 10, 1_000, 65_400, 65_600, 70_000, 300_000, 1_000_000]
        var sent: [[Int]] = [[], []]  // what each recorder has got so far
        for seed in UInt64(1)...4 {
            var random = SplitMix64(seed: seed)
            for seq in 0..<60 {
                let size = sizes[Int.random(in: 0..<sizes.count, using: &random)]
                let to = Int.random(in: 0...3, using: &random) == 0 ? 1 : 0
                let message = Numbered(seq: seq, data: Data(repeating: UInt8(truncatingIfNeeded: seq), count: size))
                ([first, second][to]).tell(message)
                sent[to] += [seq, size]
            }
            // Asked after the tells, so answered after they arrived.
            let arrived = [
                try await first.ask(Received(), timeout: .seconds(60)),
                try await second.ask(Received(), timeout: .seconds(60)),
            ]
            #expect(arrived[0] == sent[0], "seed \(seed): to the first actor")
            #expect(arrived[1] == sent[1], "seed \(seed): to the second actor")
        }
    }

    /// The same from an actor on the sending node's only loop, where the
    /// connection lives: there a message is encoded straight into the
    /// outbound batch, its large `Data` spliced.
    @Test func tellsOfMixedSizesFromTheConnectionsLoopArriveWholeAndInOrder() async throws {
        let a = try ClusterNode(settings: .init(port: 0, secret: "a-long-cluster-secret", loopCount: 1))
        let b = try ClusterNode(settings: .init(port: 0, secret: "a-long-cluster-secret", loopCount: 2)) {
            $0.nodeSingleton("recorder") { Recorder() }
        }
        defer { shutDown(a, b) }
        let recorder = a.system.ref("oscar://127.0.0.1:\(b.address.port)/user/recorder")!
        _ = try await recorder.ask(Received(), timeout: .seconds(30))  // connected
        let sender = try a.system.spawn("sender") { Sender() }
        let sizes = [0, 10, 1_000, 65_400, 65_600, 70_000, 300_000, 1_000_000]
        var sent: [Int] = []
        for seed in UInt64(1)...4 {
            var random = SplitMix64(seed: seed)
            let burst = (0..<40).map { _ in sizes[Int.random(in: 0..<sizes.count, using: &random)] }
            let first = sent.count / 2
            #expect(
                try await sender.ask(Burst(to: recorder, firstSeq: first, sizes: burst), timeout: .seconds(30)) == 40)
            for (n, size) in burst.enumerated() { sent += [first + n, size] }
            // Asked after the burst was queued, so answered after it arrived.
            #expect(try await recorder.ask(Received(), timeout: .seconds(60)) == sent, "seed \(seed)")
        }
    }
}
