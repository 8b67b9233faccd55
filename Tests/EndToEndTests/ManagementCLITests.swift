import Foundation
import Testing

/// The management endpoint beyond loopback, from outside, with real
/// processes: an `oscar node` told to listen on 0.0.0.0 answers /health to
/// anyone and every other read only when signed, which `oscar get` does
/// with the cluster secret.
@Suite(.serialized, .timeLimit(.minutes(4))) struct ManagementCLITests {
    @Test func beyondLoopbackOnlyHealthIsOpenAndOscarGetSignsTheRest() async throws {
        let ports = try #require(ClusterCLITests.freeRange(2))
        let (port, http) = (ports, ports + 1)
        let node = try OscarProcess([
            "node", "--port", "\(port)", "--http-port", "\(http)", "--http-host", "0.0.0.0", "--loops", "1",
        ])
        let healthy = await waitUntil(timeout: .seconds(30)) {
            HTTP.get("/health", port: http)?.contains(" 200 ") == true ? true : nil
        }
        #expect(healthy == true, "\(node.stderr.value)")

        let unsigned = HTTP.get("/members", port: http) ?? ""
        #expect(unsigned.contains(" 401 ") && unsigned.contains("oscar get"), "\(unsigned)")

        let signed = try await OscarProcess.run(["get", "/members", "--http", "127.0.0.1:\(http)"])
        #expect(
            signed.status == 0 && signed.stdout.contains("\"127.0.0.1:\(port)\""), "\(signed.stdout)\(signed.stderr)")
        let metrics = try await OscarProcess.run(["get", "/metrics", "--http", "127.0.0.1:\(http)"])
        #expect(metrics.status == 0 && metrics.stdout.contains("oscar_members{"), "\(metrics.stdout)\(metrics.stderr)")

        let wrong = try await OscarProcess.run(
            ["get", "/members", "--http", "127.0.0.1:\(http)"], secret: "another-long-cluster-secret")
        #expect(wrong.status != 0 && wrong.stdout.contains("wrong signature"), "\(wrong.stdout)\(wrong.stderr)")

        // No secret anywhere (an empty directory, no variable): the read goes
        // unsigned, and the refusal says what to give.
        let none = try await OscarProcess.run(
            ["get", "/members", "--http", "127.0.0.1:\(http)"], secret: "", directory: NSTemporaryDirectory())
        #expect(none.status != 0 && none.stderr.contains("asks for a credential"), "\(none.stdout)\(none.stderr)")

        let health = try await OscarProcess.run(["health", "--http", "127.0.0.1:\(http)"], secret: "")
        #expect(health.status == 0, "\(health.stdout)\(health.stderr)")

        kill(node.process.processIdentifier, SIGTERM)
        #expect(await node.exited(within: .seconds(30)))
    }
}
