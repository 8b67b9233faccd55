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
}
