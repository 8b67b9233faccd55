import Foundation
import Oscar
import OscarDemo
import OscarTestSupport
import Testing

@Suite(.serialized, .timeLimit(.minutes(8))) struct KilledNodeTests {
    @Test func aSIGKILLedNodeFailsPendingAsksWithNodeUnreachableLongBeforeTheirTimeout() async throws {
        let victim = try OscarProcess(["node", "--port", "0", "--loops", "1"])
        let port = try #require(await victim.listeningPort())
        let client = try ClusterNode(settings: .init(secret: "e2e-cluster-secret-01", loopCount: 1))
        defer { client.shutdown() }
        let echo = client.system.ref("oscar://127.0.0.1:\(port)/user/echo")!
        _ = try await echo.ask(Demo.Echo(text: "up?"))

        // Whether or not the ask has left this process when the node dies, it
        // must end with nodeUnreachable when the connection drops, not at its
        // 60 s timeout. It takes milliseconds, but the bound is half the
        // timeout: under the whole suite the awaiting task has resumed more
        // than 5 s after its ask failed (the cooperative pool was busy), and
        // anything short of the timeout shows the drop ended it.
        async let pending = echo.ask(Demo.Sleep(ms: 60_000), timeout: .seconds(60))
        let clock = ContinuousClock()
        let killedAt = clock.now
        kill(victim.process.processIdentifier, SIGKILL)
        do {
            _ = try await pending
            Issue.record("the ask must fail when its node is killed")
        } catch {
            guard case .nodeUnreachable = error as? AskError else {
                Issue.record("expected nodeUnreachable, got \(error)")
                return
            }
        }
        #expect(clock.now - killedAt < .seconds(30))
    }
}
