// Built and run by Cluster/bench/app-ab.sh.
import Oscar

// W1, W3 and W2 as an application writes them: its own module, public API only,
// two nodes (one loop each) in one process over TCP on 127.0.0.1.
struct Payload: Message {
    var i: Int64
    var s: String
}
struct Echo: Message {
    typealias Reply = Payload
    var payload: Payload
}
struct Flush: Message { typealias Reply = Int64 }
final class Server: Reactor {
    var count: Int64 = 0
    static func reactions(_ r: inout Reactions<Server>) {
        r.on(Payload.self, do: { me, _ in me.count += 1 })
        r.on(Echo.self, result: { _, m in m.payload })
        r.on(
            Flush.self,
            result: { me, _ in
                defer { me.count = 0 }; return me.count
            })
    }
}
func seconds(_ d: Duration) -> Double { let (s, a) = d.components; return Double(s) + Double(a) / 1e18 }
let secret = "a-long-cluster-secret"
let b = try ClusterNode(settings: .init(secret: secret, loopCount: 1)) { $0.nodeSingleton("server") { Server() } }
let a = try ClusterNode(settings: .init(secret: secret, loopCount: 1))
let server = a.system.ref("oscar://127.0.0.1:\(b.address.port)/user/server")!
_ = try await server.ask(Flush(), timeout: .seconds(10))  // connected
let clock = ContinuousClock()
let text = "abcdefghijklmnop"
var t0 = clock.now
for i in 1...1_000_000 { server.tell(Payload(i: Int64(i), s: text)) }
let n = try await server.ask(Flush(), timeout: .seconds(120))
precondition(n == 1_000_000)
print("user-module w1_remote_tell_throughput \(Int(1_000_000 / seconds(clock.now - t0))) msg/s")
t0 = clock.now
try await withThrowingTaskGroup(of: Void.self) { group in
    for w in 0..<64 {
        group.addTask {
            for k in 0..<(200_000 / 64) {
                let i = Int64(w * 10_000 + k)
                let reply = try await server.ask(Echo(payload: Payload(i: i, s: text)), timeout: .seconds(60))
                precondition(reply.i == i)
            }
        }
    }
    try await group.waitForAll()
}
print("user-module w3_remote_ask_c64_throughput \(Int(Double(200_000 / 64 * 64) / seconds(clock.now - t0))) req/s")
for i in 1...2_000 { _ = try await server.ask(Echo(payload: Payload(i: Int64(i), s: text)), timeout: .seconds(60)) }
var latencies: [Duration] = []
latencies.reserveCapacity(20_000)
for i in 1...20_000 {
    let t = clock.now
    let reply = try await server.ask(Echo(payload: Payload(i: Int64(i), s: text)), timeout: .seconds(60))
    latencies.append(clock.now - t)
    precondition(reply.i == Int64(i))
}
latencies.sort()
print("user-module w2_remote_ask_p50 \(seconds(latencies[9_999]) * 1e6) us")
print("user-module w2_remote_ask_p99 \(seconds(latencies[19_799]) * 1e6) us")
a.shutdown()
b.shutdown()
