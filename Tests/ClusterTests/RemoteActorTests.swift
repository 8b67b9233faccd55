import Oscar
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
    func started(_ context: ActorContext) { port = context.system.node.port }
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

func node(_ secret: String = "s3cret", gate: Gate? = nil) throws -> ClusterNode {
    try ClusterNode(settings: .init(port: 0, secret: secret, loopCount: 2)) { actors in
        actors.singleton("ping") { PingActor(gate: gate) }
    }
}

@Suite struct RemoteActorTests {
    @Test func tellAndAskReachAnActorOnAnotherNode() async throws {
        let a = try node()
        let b = try node()
        defer {
            a.shutdown()
            b.shutdown()
        }
        let remote = a.system.ref("oscar://127.0.0.1:\(b.address.port)/user/ping")!
        let pong = try await remote.ask(Ping(n: 41))
        #expect(pong == Pong(n: 41, node: b.address.port))
        for _ in 0..<100 { remote.tell(Count()) }
        #expect(try await remote.ask(Total()) == 100)
    }
}
