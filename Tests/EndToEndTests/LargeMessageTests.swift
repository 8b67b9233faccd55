import Foundation
import Glibc
import Oscar
import OscarDemo
import OscarTestSupport
import Synchronization
import Testing

@testable import OscarCluster

/// Messages larger than a frame travel in chunks between `oscar node`
/// processes and this one: whole, both ways, without holding up small
/// messages, and a stream cut by a kill fails its own ask only.
@Suite(.serialized, .timeLimit(.minutes(5))) struct LargeMessageTests {
    static let size = 32 << 20
    /// Chunks of a 32 MiB message (64 KiB less a header each).
    static let chunks = (size + 16 + 65_519) / 65_520

    final class Flag: Sendable {
        private let value = Atomic<Bool>(false)
        func set() { value.store(true, ordering: .releasing) }
        var isSet: Bool { value.load(ordering: .acquiring) }
    }

    /// Asks `counter` again and again until `finished`, and counts the
    /// asks answered while a large message's chunks were going out.
    final class SmallAsker: Reactor {
        struct Run: Message {
            typealias Reply = Int
            var counter: ActorRef
        }
        let finished: Flag
        let chunksOut: @Sendable () -> Int

        init(finished: Flag, chunksOut: @escaping @Sendable () -> Int) {
            self.finished = finished
            self.chunksOut = chunksOut
        }

        static func reactions(_ r: inout Reactions<SmallAsker>) {
            r.on(
                Run.self,
                future: { me, m in
                    let (finished, chunksOut) = (me.finished, me.chunksOut)
                    var during = 0
                    while !finished.isSet {
                        _ = try await m.counter.ask(Demo.GetCount(), timeout: .seconds(30))
                        let sent = chunksOut()
                        if sent > 0, sent < LargeMessageTests.chunks { during += 1 }
                    }
                    return during
                })
        }
    }

    @Test func a32MiBMessageCrossesNodesBothWaysWhileSmallAsksKeepFlowing() async throws {
        let server = try OscarProcess(["node", "--port", "0", "--loops", "2"])
        let port = try #require(await server.listeningPort())
        let client = try ClusterNode(settings: .init(secret: "e2e-cluster-secret-01", loopCount: 2))
        defer { client.shutdown() }
        let echo = client.system.ref("oscar://127.0.0.1:\(port)/user/echo")!
        let counter = client.system.ref("oscar://127.0.0.1:\(port)/user/counter")!
        _ = try await counter.ask(Demo.GetCount())

        let text = String(repeating: "y", count: Self.size)
        let finished = Flag()
        let large = Task {
            defer { finished.set() }
            return try await echo.ask(Demo.Echo(text: text), timeout: .seconds(120))
        }
        // Small asks to another actor of that node, from two actors of the
        // client node, for as long as the large one (out and back) is under
        // way. They run on the node's loops, not on Swift's cooperative
        // pool, which the rest of the suite may keep busy. Those answered
        // while its chunks were still going out count: encoding and decoding
        // 32 MiB holds a loop whatever the transport does, but the transfer
        // itself must not hold up small messages.
        let stats = client.stats
        let askers = try (0..<2).map { n in
            try client.system.spawn("asker-\(n)") {
                SmallAsker(finished: finished, chunksOut: { stats.value(.chunksOut) })
            }
        }
        var during = 0
        for asker in askers {
            during += try await asker.ask(SmallAsker.Run(counter: counter), timeout: .seconds(280))
        }
        let reply = try await large.value
        #expect(reply.text.utf8.count == Self.size)
        #expect(reply.text == text)
        // It went out and came back in chunks, and small asks were answered
        // meanwhile (a single 32 MiB frame would have held them up).
        #expect(client.stats.value(.chunksOut) >= Self.chunks)
        #expect(client.stats.value(.chunksIn) >= Self.chunks)
        #expect(during >= 3, "only \(during) small asks were answered while its chunks went out")
    }

    @Test func aLargeMessageCutByAKillFailsOnlyItsOwnAsk() async throws {
        let victim = try OscarProcess(["node", "--port", "0", "--loops", "1"])
        let other = try OscarProcess(["node", "--port", "0", "--loops", "1"])
        let victimPort = try #require(await victim.listeningPort())
        let otherPort = try #require(await other.listeningPort())
        let client = try ClusterNode(settings: .init(secret: "e2e-cluster-secret-01", loopCount: 2))
        defer { client.shutdown() }
        let victimEcho = client.system.ref("oscar://127.0.0.1:\(victimPort)/user/echo")!
        let otherEcho = client.system.ref("oscar://127.0.0.1:\(otherPort)/user/echo")!
        _ = try await victimEcho.ask(Demo.Echo(text: "up?"))
        _ = try await otherEcho.ask(Demo.Echo(text: "up?"))

        let text = String(repeating: "z", count: Self.size)
        let cut = Task { try await victimEcho.ask(Demo.Echo(text: text), timeout: .seconds(120)) }
        // Once chunks went out past the first window, the victim has taken
        // some (it acknowledged them): stop it there, mid-stream. Watched
        // from a thread of its own, spinning: the stream moves in
        // milliseconds, faster than a sleeping poll would see.
        let stats = client.stats
        let pid = victim.process.processIdentifier
        let stoppedAt = try await offThePool {
            let deadline = ContinuousClock.now + .seconds(60)
            while stats.value(.chunksOut) < 12, ContinuousClock.now < deadline {}
            kill(pid, SIGSTOP)
            return stats.value(.chunksOut)
        }
        #expect(stoppedAt >= 12)

        // While the victim is stopped, another node gets a 32 MiB message and
        // small asks: the stalled stream holds up nothing but itself.
        let victimChunks = client.stats.value(.chunksOut)
        #expect(victimChunks < Self.chunks, "the stream was whole before the stop: \(victimChunks) chunks")
        let reply = try await otherEcho.ask(Demo.Echo(text: text), timeout: .seconds(120))
        #expect(reply.text == text)

        kill(pid, SIGKILL)
        do {
            _ = try await cut.value
            Issue.record("the ask whose stream was cut must fail")
        } catch {
            guard case .nodeUnreachable = error as? AskError else {
                Issue.record("expected nodeUnreachable, got \(error)")
                return
            }
        }
        let after = try await otherEcho.ask(Demo.Echo(text: "still here"), timeout: .seconds(30))
        #expect(after.text == "still here")
    }
}
