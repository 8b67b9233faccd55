import Foundation
import Glibc
import Oscar
import OscarDemo
import OscarTestSupport
import Synchronization
import Testing

@testable import OscarCluster

/// Messages larger than a frame travel on the bulk lane (or, with it off
/// here, in chunks) between `oscar node` processes and this one: whole,
/// both ways, without holding up small messages, and a transfer cut by a
/// kill fails its own ask only.
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
    /// asks answered while a large message was under way.
    final class SmallAsker: Reactor {
        struct Run: Message {
            typealias Reply = Int
            var counter: ActorRef
        }
        let finished: Flag
        let underWay: @Sendable () -> Bool

        init(finished: Flag, underWay: @escaping @Sendable () -> Bool) {
            self.finished = finished
            self.underWay = underWay
        }

        static func reactions(_ r: inout Reactions<SmallAsker>) {
            r.on(
                Run.self,
                future: { me, m in
                    let (finished, underWay) = (me.finished, me.underWay)
                    var during = 0
                    while !finished.isSet {
                        _ = try await m.counter.ask(Demo.GetCount(), timeout: .seconds(30))
                        if underWay() { during += 1 }
                    }
                    return during
                })
        }
    }

    /// The client for a test: on the bulk lane (its threads at normal
    /// priority, a message kept on it however slowly it moves) or, without
    /// it, sending in chunks. It takes the bulk lane once a small message
    /// went to the node in the last minute (not 10 ms, so that it does not
    /// depend on the machine's speed). The node processes opt in with it
    /// (a node that does not refuses bulk connections) and reply on either.
    static func client(bulkLane: Bool) throws -> ClusterNode {
        var settings = ClusterNode.Settings(secret: "e2e-cluster-secret-01", loopCount: 2)
        settings.bulkLane = bulkLane
        settings.bulkLaneAtIdlePriority = false
        settings.bulkStallTimeout = .seconds(60)
        settings.smallTrafficLinger = .seconds(60)
        return try ClusterNode(settings: settings)
    }

    @Test(arguments: [true, false])
    func a32MiBMessageCrossesNodesBothWaysWhileSmallAsksKeepFlowing(bulkLane: Bool) async throws {
        let server = try OscarProcess(["node", "--port", "0", "--loops", "2", "--bulk-lane", bulkLane ? "on" : "off"])
        let port = try #require(await server.listeningPort())
        let client = try Self.client(bulkLane: bulkLane)
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
        // Under way: from its first chunk (or its start on the bulk lane)
        // until the reply is back whole.
        let stats = client.stats
        let transport = client.transport
        let underWay: @Sendable () -> Bool = {
            let started = bulkLane ? transport.bulkSendsStarted.load(ordering: .relaxed) : stats.value(.chunksOut)
            return started > 0 && !finished.isSet
        }
        let askers = try (0..<2).map { n in
            try client.system.spawn("asker-\(n)") { SmallAsker(finished: finished, underWay: underWay) }
        }
        var during = 0
        for asker in askers {
            during += try await asker.ask(SmallAsker.Run(counter: counter), timeout: .seconds(280))
        }
        let reply = try await large.value
        #expect(reply.text.utf8.count == Self.size)
        #expect(reply.text == text)
        // It went out on the bulk lane (or in chunks) and came back whole,
        // and small asks were answered meanwhile (a single 32 MiB frame
        // would have held them up).
        // On the bulk lane unless it fell back to chunks, as it may when the
        // node process's copying thread (at `SCHED_IDLE`) finds no free
        // core for seconds on a busy machine; then the message was sent
        // again whole in chunks. (BulkLaneTests check the lane itself.)
        if bulkLane {
            let fallbacks = client.stats.value(.bulkFallbacks)
            #expect(client.stats.value(.bulkMessagesOut) + fallbacks >= 1)
            if fallbacks == 0 {
                #expect(client.stats.value(.bulkMessagesOut) == 1)
                #expect(client.stats.value(.chunksOut) == 0)
            } else {
                #expect(client.stats.value(.chunksOut) >= Self.chunks)
            }
            // In the node process only the copying runs at `SCHED_IDLE`:
            // its copiers are in that class, nothing else is.
            let threads = Self.threads(of: server.process.processIdentifier)
            #expect(threads.contains { $0 == ("oscar-bulk-copy", 5) } || fallbacks > 0, "\(threads)")
            #expect(threads.allSatisfy { $0.policy != 5 || $0.name == "oscar-bulk-copy" }, "\(threads)")
        } else {
            #expect(client.stats.value(.chunksOut) >= Self.chunks)
            #expect(client.stats.value(.bulkMessagesOut) == 0)
        }
        #expect(during >= 3, "only \(during) small asks were answered while it was under way")
    }

    /// The name and scheduling policy (field 41 of `stat`; 5 is
    /// `SCHED_IDLE`) of each thread of process `pid`.
    static func threads(of pid: Int32) -> [(name: String, policy: Int)] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.compactMap { task in
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/stat", encoding: .utf8),
                let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")")
            else { return nil }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 38, let policy = Int(fields[38]) else { return nil }
            return (String(stat[stat.index(after: open)..<close]), policy)
        }
    }

    @Test(arguments: [true, false]) func aLargeMessageCutByAKillFailsOnlyItsOwnAsk(bulkLane: Bool) async throws {
        let victim = try OscarProcess(["node", "--port", "0", "--loops", "1", "--bulk-lane", bulkLane ? "on" : "off"])
        let other = try OscarProcess(["node", "--port", "0", "--loops", "1", "--bulk-lane", bulkLane ? "on" : "off"])
        let victimPort = try #require(await victim.listeningPort())
        let otherPort = try #require(await other.listeningPort())
        let client = try Self.client(bulkLane: bulkLane)
        defer { client.shutdown() }
        let victimEcho = client.system.ref("oscar://127.0.0.1:\(victimPort)/user/echo")!
        let otherEcho = client.system.ref("oscar://127.0.0.1:\(otherPort)/user/echo")!
        _ = try await victimEcho.ask(Demo.Echo(text: "up?"))
        _ = try await otherEcho.ask(Demo.Echo(text: "up?"))

        let text = String(repeating: "z", count: Self.size)
        let cut = Task { try await victimEcho.ask(Demo.Echo(text: text), timeout: .seconds(120)) }
        // Once chunks went out past the first window, the victim has taken
        // some (it acknowledged them), or once the bulk lane started writing:
        // stop it there, mid-stream. Watched from a thread of its own,
        // spinning: the stream moves in milliseconds, faster than a sleeping
        // poll would see.
        let stats = client.stats
        let transport = client.transport
        let pid = victim.process.processIdentifier
        let progress: @Sendable () -> Int = {
            bulkLane ? 12 * transport.bulkSendsStarted.load(ordering: .relaxed) : stats.value(.chunksOut)
        }
        let stoppedAt = try await offThePool {
            let deadline = ContinuousClock.now + .seconds(60)
            while progress() < 12, ContinuousClock.now < deadline {}
            kill(pid, SIGSTOP)
            return progress()
        }
        #expect(stoppedAt >= 12)

        // While the victim is stopped, another node gets a 32 MiB message and
        // small asks: the stalled stream holds up nothing but itself.
        let victimChunks = client.stats.value(.chunksOut)
        #expect(victimChunks < Self.chunks, "the stream was whole before the stop: \(victimChunks) chunks")
        #expect(client.stats.value(.bulkMessagesOut) == 0, "the message was whole before the stop")
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
