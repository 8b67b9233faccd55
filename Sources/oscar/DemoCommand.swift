import Oscar
import OscarDemo
import OscarTestKit

/// `oscar demo`: a local actor system with the demo actors, and one visible
/// round trip to each.
enum DemoCommand {
    static func run() async throws(CLIError) {
        let system = ActorSystem(settings: .init(name: "demo")) { Demo.declare(in: &$0) }
        defer { system.shutdown() }
        print("Started a local actor system with \(system.loops.loops.count) loops: echo, counter, kv.")
        do {
            let clock = ContinuousClock()
            let echo = system.actor("echo")!
            var start = clock.now
            let reply = try await echo.ask(Demo.Echo(text: "hello, Oscar"))
            print(
                "ask  \(echo)  Echo {\"text\":\"hello, Oscar\"}  ->  \"\(reply.text)\"  (\(micros(clock.now - start)))")

            let counter = system.actor("counter")!
            for _ in 0..<3 { counter.tell(Demo.Increment(by: 2)) }
            start = clock.now
            let count = try await counter.ask(Demo.GetCount())
            print(
                "tell \(counter)  Increment {\"by\":2}  x3, then ask GetCount  ->  \(count)  (\(micros(clock.now - start)))"
            )

            let kv = system.actor("kv")!
            kv.tell(Demo.Put(key: "language", value: "Swift"))
            start = clock.now
            let value = try await kv.ask(Demo.Get(key: "language"))
            print("ask  \(kv)  Get {\"key\":\"language\"}  ->  \"\(value ?? "nil")\"  (\(micros(clock.now - start)))")
        } catch {
            throw .failed("demo round trip failed: \(error)")
        }
    }

    static func micros(_ d: Duration) -> String {
        let us = d.inSeconds * 1e6
        return us < 1000 ? "\(Int(us.rounded())) µs" : "\(Int((us / 1000).rounded())) ms"
    }
}
