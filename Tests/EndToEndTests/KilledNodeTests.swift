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
        // 30 s timeout. (It takes milliseconds; 5 s is margin for a loaded
        // machine, still far from the timeout.)
        async let pending = echo.ask(Demo.Sleep(ms: 30_000), timeout: .seconds(30))
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
        #expect(clock.now - killedAt < realTimeBound(.seconds(5)))
    }
}
