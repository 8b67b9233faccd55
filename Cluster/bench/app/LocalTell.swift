// W4 as an application writes it: its own module, public API only
// (Cluster/bench/app-ab.sh builds it against two checkouts of Oscar).
import Oscar

struct Payload: Message {
    var i: Int64
    var s: String
}
struct Flush: Message { typealias Reply = Int64 }
struct Start: Message {
    typealias Reply = Int64
    var count: Int
    var receiver: ActorRef
}
final class Receiver: Reactor {
    var count: Int64 = 0
    static func reactions(_ r: inout Reactions<Receiver>) {
        r.on(Payload.self, do: { me, _ in me.count += 1 })
        r.on(
            Flush.self,
            result: { me, _ in
                defer { me.count = 0 }; return me.count
            })
    }
}
final class Sender: Reactor {
    static func reactions(_ r: inout Reactions<Sender>) {
        r.on(
            Start.self,
            future: { _, m in
                for i in 1...m.count { m.receiver.tell(Payload(i: Int64(i), s: "abcdefghijklmnop")) }
                return try await m.receiver.ask(Flush(), timeout: .seconds(60))
            })
    }
}
let count = 10_000_000
let system = ActorSystem(settings: .init(name: "w4", loopCount: 1))
let receiver = try system.spawn("receiver") { Receiver() }
let sender = try system.spawn("sender", colocatedWith: receiver) { Sender() }
let clock = ContinuousClock()
let t0 = clock.now
let counted = try await sender.ask(Start(count: count, receiver: receiver), timeout: .seconds(120))
let e = clock.now - t0
precondition(counted == Int64(count))
let (s, a) = e.components
print("user-module w4_local_tell_throughput \(Int(Double(count) / (Double(s) + Double(a) / 1e18))) msg/s")
system.shutdown()
