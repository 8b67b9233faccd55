import Dispatch
import Oscar
import OscarTestKit
import OscarTestSupport
import Testing

struct Ping: Message {
    typealias Reply = Pong
    var n: Int
}
struct Pong: Codable, Sendable, Equatable {
    var n: Int
    var node: Int
}
struct Count: Message {}
struct Total: Message { typealias Reply = Int }
struct Slow: Message { typealias Reply = Int }
/// Asks `target` on behalf of the asker: a ref travelling inside a message.
struct AskVia: Message {
    typealias Reply = String
    var target: ActorRef
}
struct ReplyTo: Message {
    var replyTo: ActorRef
    var text: String
}
struct Said: Message { var text: String }
struct Heard: Message { typealias Reply = [String] }

final class PingActor: Reactor {
    var port = 0
    var count = 0
    var heard: [String] = []
    let gate: Gate?
    init(gate: Gate? = nil) { self.gate = gate }
    func started(_ context: ActorContext) { port = context.node.port }
    static func reactions(_ r: inout Reactions<PingActor>) {
        r.on(Ping.self, result: { me, m in Pong(n: m.n, node: me.port) })
        r.on(Count.self, do: { me, _ in me.count += 1 })
        r.on(Total.self, result: { me, _ in me.count })
        r.on(
            Slow.self,
            future: { me, _ in
                await me.gate?.wait()
                return 1
            })
        r.on(
            AskVia.self,
            future: { _, m in
                let pong = try await m.target.ask(Ping(n: 7), timeout: .seconds(2))
                return "via \(pong.node): \(pong.n)"
            })
        r.on(ReplyTo.self, do: { _, m in m.replyTo.tell(Said(text: "re: " + m.text)) })
        r.on(Said.self, do: { me, m in me.heard.append(m.text) })
        r.on(Heard.self, result: { me, _ in me.heard })
    }
}

/// Two fresh nodes with the test secret; pair with `defer { shutDown(a, b) }`.
func twoNodes() throws -> (ClusterNode, ClusterNode) { (try node(), try node()) }

func shutDown(_ nodes: ClusterNode...) {
    for n in nodes { n.shutdown() }
}

func node(
    _ secret: String = "a-long-cluster-secret", gate: Gate? = nil, faults: FaultGate? = nil
) throws -> ClusterNode {
    var settings = ClusterNode.Settings(port: 0, secret: secret, loopCount: 2)
    if let faults { settings.injectFaults(with: faults) }
    return try ClusterNode(settings: settings) { actors in
        actors.nodeSingleton("ping") { PingActor(gate: gate) }
    }
}

@Suite(.timeLimit(.minutes(5))) struct RemoteActorTests {
    @Test func tellAndAskReachAnActorOnAnotherNode() async throws {
        let (a, b) = try twoNodes()
        defer { shutDown(a, b) }
        let remote = a.system.ref("oscar://127.0.0.1:\(b.address.port)/user/ping")!
        let pong = try await remote.ask(Ping(n: 41))
        #expect(pong == Pong(n: 41, node: b.address.port))
        for _ in 0..<100 { remote.tell(Count()) }
        #expect(try await remote.ask(Total()) == 100)
    }
}

struct NobodyHandlesThis: Message { typealias Reply = Int }

extension RemoteActorTests {
    @Test func aRefSentInsideAMessageCanBeRepliedTo() async throws {
        let (a, b) = try twoNodes()
        defer { shutDown(a, b) }
        let localPing = a.system.actor("ping")!
        let remote = a.system.ref("oscar://127.0.0.1:\(b.address.port)/user/ping")!
        // B receives a ref to A's actor and tells it back.
        remote.tell(ReplyTo(replyTo: localPing, text: "hello"))
        #expect(await eventually { (try? await localPing.ask(Heard())) == ["re: hello"] })
        // B's actor asks an actor named in the message (on A) and answers.
        #expect(try await remote.ask(AskVia(target: localPing)) == "via \(a.address.port): 7")
    }

    @Test func threeNodesKeepFIFOPerPairUnderLoad() async throws {
        let nodes = try (0..<3).map { _ in try node() }
        defer { nodes.forEach { $0.shutdown() } }
        let sink = try nodes[0].system.spawn("sink") { SequenceSink() }
        // Two remote senders, each with 4 concurrent tasks sending 2,000 numbered tells.
        await withTaskGroup(of: Void.self) { group in
            for (n, sender) in nodes.dropFirst().enumerated() {
                let ref = sender.system.ref(for: sink.address)
                for task in 0..<4 {
                    group.addTask {
                        for seq in 0..<2_000 { ref.tell(Numbered(sender: n * 10 + task, seq: seq)) }
                    }
                }
            }
        }
        #expect(await eventually(timeout: .seconds(20)) { (try? await sink.ask(ReportCount())) == 16_000 })
        let seen = try await sink.ask(ReportSequences())
        #expect(seen.count == 8)
        for (sender, seqs) in seen { #expect(seqs == Array(0..<2_000), "sender \(sender) out of order") }
    }

    /// One loop turn sends more than the socket buffers hold while the
    /// receiver reads nothing: what the socket does not take waits in the
    /// sender's batch and goes out as the receiver drains, in order, with
    /// nothing lost.
    @Test func aBurstLargerThanTheSocketBuffersArrivesWholeAndInOrder() async throws {
        let count = 60_000  // 250 bytes each: 15 MB, past loopback's socket buffers
        let release = DispatchSemaphore(value: 0)
        let receiver = try ClusterNode(settings: .init(port: 0, secret: "a-long-cluster-secret", loopCount: 1)) {
            actors in
            actors.nodeSingleton("sink") { PaddedSink() }
            actors.nodeSingleton("holder") { LoopHolder(release) }
        }
        let sender = try ClusterNode(settings: .init(port: 0, secret: "a-long-cluster-secret", loopCount: 1)) {
            actors in
            actors.nodeSingleton("burster") { Burster() }
        }
        defer { shutDown(receiver, sender) }
        let sink = sender.system.ref("oscar://127.0.0.1:\(receiver.address.port)/user/sink")!
        let burster = sender.system.actor("burster")!
        _ = try await sink.ask(ReportCount(), timeout: .seconds(10))  // connected
        receiver.system.actor("holder")!.tell(Hold())  // its only loop reads nothing now
        defer { release.signal() }
        // Answered once the whole burst has left the reaction.
        _ = try await burster.ask(TellBurst(target: sink, count: count, padding: 200), timeout: .seconds(60))
        release.signal()
        #expect(
            await eventually(timeout: .seconds(60)) {
                (try? await sink.ask(ReportCount(), timeout: .seconds(5))) == count
            }
        )
        #expect(try await sink.ask(ReportCount(), timeout: .seconds(5)) == count, "a tell was lost or out of order")
    }

    @Test func aNodeWithTheWrongSecretIsRejected() async throws {
        let a = try node("the-right-cluster-secret")
        let b = try node("a-wrong-cluster-secret")
        defer {
            a.shutdown()
            b.shutdown()
        }
        let remote = a.system.ref("oscar://127.0.0.1:\(b.address.port)/user/ping")!
        do {
            _ = try await remote.ask(Ping(n: 1), timeout: .seconds(3))
            Issue.record("an ask across mismatched secrets must fail")
        } catch {
            guard case .rejected(let why) = error else {
                Issue.record("expected rejected, got \(error)")
                return
            }
            #expect(why.contains("secret"), "reason: \(why)")
        }
    }

    @Test func aPeerThatGoesAwayFailsPendingAsksAtOnce() async throws {
        let gate = Gate()
        let a = try node()
        let b = try node(gate: gate)
        defer {
            a.shutdown()
            gate.open()
        }
        let remote = a.system.ref("oscar://127.0.0.1:\(b.address.port)/user/ping")!
        _ = try await remote.ask(Ping(n: 0))  // connected
        async let waiting = remote.ask(Slow(), timeout: .seconds(30))
        #expect(await eventually { gate.waiting })
        // Timed from the moment the peer goes away: the ask must fail on the
        // connection loss, long before its 30 s timeout (milliseconds alone).
        // The bound is half the timeout: under the whole suite on 2 cores the
        // awaiting task once resumed 8.2 s late, when the cooperative pool
        // was busy with other tests.
        let clock = ContinuousClock()
        let start = clock.now
        b.shutdown()
        do {
            _ = try await waiting
            Issue.record("the ask must fail when its node goes away")
        } catch {
            guard case .nodeUnreachable = error as? AskError else {
                Issue.record("expected nodeUnreachable, got \(error)")
                return
            }
        }
        #expect(clock.now - start < realTimeBound(.seconds(15)))
    }

    @Test func anUnknownManifestIsAnErrorAndTheNodeServesOn() async throws {
        let (a, b) = try twoNodes()
        defer { shutDown(a, b) }
        let remote = a.system.ref("oscar://127.0.0.1:\(b.address.port)/user/ping")!
        // The remote names itself with its uid, which the typed URI lacks.
        await #expect(
            throws: AskError.unhandled(manifest: "NobodyHandlesThis", ActorAddress(node: b.address, path: "/user/ping"))
        ) {
            try await remote.ask(NobodyHandlesThis())
        }
        let missing = a.system.ref("oscar://127.0.0.1:\(b.address.port)/user/nobody")!
        await #expect(throws: AskError.actorNotFound(ActorAddress(node: b.address, path: "/user/nobody"))) {
            try await missing.ask(Ping(n: 1))
        }
        #expect(try await remote.ask(Ping(n: 2)).n == 2)
    }

    @Test func aRestartedPeerIsReconnectedAsANewIncarnation() async throws {
        let a = try node()
        var b = try node()
        let port = b.address.port
        let firstUID = b.address.uid
        let remote = a.system.ref("oscar://127.0.0.1:\(port)/user/ping")!
        _ = try await remote.ask(Ping(n: 1))
        // A ref that names the first incarnation explicitly.
        let pinned = a.system.ref(for: ActorAddress(node: b.address, path: "/user/ping"))
        b.shutdown()
        b = try ClusterNode(settings: .init(port: port, secret: "a-long-cluster-secret", loopCount: 2)) { actors in
            actors.nodeSingleton("ping") { PingActor() }
        }
        defer {
            a.shutdown()
            b.shutdown()
        }
        #expect(b.address.uid != firstUID)
        // After the reconnect backoff, the unpinned ref reaches the new incarnation.
        #expect(await eventually { (try? await remote.ask(Ping(n: 2), timeout: .milliseconds(500)))?.n == 2 })
        // Messages for the old incarnation are refused, not delivered to the new one.
        do {
            _ = try await pinned.ask(Ping(n: 3))
            Issue.record("an ask to a gone incarnation must fail")
        } catch {
            guard case .nodeUnreachable(_, let why) = error else {
                Issue.record("expected nodeUnreachable, got \(error)")
                return
            }
            #expect(why.contains("incarnation"))
        }
    }
}

struct Numbered: Message {
    var sender: Int
    var seq: Int
}
struct ReportCount: Message { typealias Reply = Int }
/// A numbered tell with padding, so that a burst outgrows the socket
/// buffers.
struct PaddedNumbered: Message {
    var seq: Int
    var padding: String
}
/// Holds its loop's thread until released: a receiver that reads nothing
/// for a while, so the sender's socket fills.
struct Hold: Message {}
final class LoopHolder: Reactor {
    let release: DispatchSemaphore
    init(_ release: DispatchSemaphore) { self.release = release }
    static func reactions(_ r: inout Reactions<LoopHolder>) {
        r.on(Hold.self, do: { me, _ in _ = me.release.wait(timeout: .now() + 30) })
    }
}
final class PaddedSink: Reactor {
    var next = 0
    var outOfOrder = 0
    static func reactions(_ r: inout Reactions<PaddedSink>) {
        r.on(
            PaddedNumbered.self,
            do: { me, m in
                if m.seq != me.next { me.outOfOrder += 1 }
                me.next = m.seq + 1
            })
        r.on(ReportCount.self, result: { me, _ in me.outOfOrder == 0 ? me.next : -1 })
    }
}
struct ReportSequences: Message { typealias Reply = [Int: [Int]] }

final class SequenceSink: Reactor {
    var seen: [Int: [Int]] = [:]
    var count = 0
    static func reactions(_ r: inout Reactions<SequenceSink>) {
        r.on(
            Numbered.self,
            do: { me, m in
                me.seen[m.sender, default: []].append(m.seq)
                me.count += 1
            })
        r.on(ReportCount.self, result: { me, _ in me.count })
        r.on(ReportSequences.self, result: { me, _ in me.seen })
    }
}

extension RemoteActorTests {
    @Test func aFullOutboundQueueRefusesInsteadOfGrowing() async throws {
        let a = try ClusterNode(
            settings: .init(secret: "a-long-cluster-secret", loopCount: 1, outboundCapacity: 256 * 1024))
        defer { a.shutdown() }
        // The peer completes the handshake (as node 127.0.0.1:1) and then
        // never reads: once the kernel's socket buffers are full, only the
        // bound stands between a sender and unbounded memory.
        let port = a.address.port
        let peer = try await offThePool { () -> RawPeer in
            let p = try RawPeer(port: port)
            guard p.handshake(secret: "a-long-cluster-secret") else {
                throw TransportError.invalidAddress("handshake failed")
            }
            return p
        }
        let silent = a.system.ref("oscar://127.0.0.1:1/user/sink")!
        // 50 MB of tells in one reaction on A's only loop.
        let burster = try a.system.spawn("burst") { Burster() }
        _ = try await burster.ask(TellBurst(target: silent, count: 50_000, padding: 1_000), timeout: .seconds(30))
        #expect(a.system.deadLetters > 0)
        #expect(a.system.deadLetters < 50_000)
        // The peer now hangs up with writes still queued: that must be an
        // ordinary connection error (EPIPE), not SIGPIPE ending this process.
        withExtendedLifetime(peer) {}
    }
}

struct TellBurst: Message {
    var target: ActorRef
    var count: Int
    var padding: Int
}

/// Tells `count` numbered, padded messages in one synchronous reaction: one
/// loop turn.
final class Burster: Reactor {
    static func reactions(_ r: inout Reactions<Burster>) {
        r.on(
            TellBurst.self,
            do: { _, m in
                let padding = String(repeating: "x", count: m.padding)
                for seq in 0..<m.count { m.target.tell(PaddedNumbered(seq: seq, padding: padding)) }
            })
    }
}

extension RemoteActorTests {
    @Test func simultaneousConnectsSettleOnOneConnectionBothWaysWork() async throws {
        for _ in 0..<5 {
            let (a, b) = try twoNodes()
            defer { shutDown(a, b) }
            let aToB = a.system.ref("oscar://127.0.0.1:\(b.address.port)/user/ping")!
            let bToA = b.system.ref("oscar://127.0.0.1:\(a.address.port)/user/ping")!
            // Both nodes connect to each other at the same moment.
            async let x = aToB.ask(Ping(n: 1))
            async let y = bToA.ask(Ping(n: 2))
            let (pa, pb) = try await (x, y)
            #expect(pa.node == b.address.port && pb.node == a.address.port)
            // After the tie-break, traffic keeps flowing both ways, in order.
            for i in 0..<50 {
                aToB.tell(Count())
                bToA.tell(Count())
                if i % 10 == 0 { _ = try await aToB.ask(Ping(n: i)) }
            }
            #expect(await eventually { (try? await aToB.ask(Total())) == 50 })
            #expect(await eventually { (try? await bToA.ask(Total())) == 50 })
        }
    }
}
