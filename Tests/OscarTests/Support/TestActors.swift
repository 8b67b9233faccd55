import Oscar

struct Increment: Message { var by: Int }
struct GetCount: Message { typealias Reply = Int }
struct Echo: Message {
    typealias Reply = String
    var text: String
}
struct Fail: Message { typealias Reply = Int }
struct Hold: Message {}
struct WhoAreYou: Message { typealias Reply = String }

/// Counts; echoes; fails on request. Covers the three reaction kinds.
final class CounterActor: Reactor {
    var count = 0
    static func reactions(_ r: inout Reactions<CounterActor>) {
        r.on(Increment.self, do: { me, m in me.count += m.by })
        r.on(GetCount.self, result: { me, _ in me.count })
        r.on(
            Echo.self,
            future: { _, m in
                await Task.yield()
                return "echo: \(m.text)"
            })
        r.on(Fail.self, result: { _, _ in throw TestFailure.planned })
    }
}

enum TestFailure: Error, CustomStringConvertible {
    case planned
    var description: String { "planned failure" }
}
