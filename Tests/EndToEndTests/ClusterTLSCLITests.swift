import Foundation
import OscarTestSupport
import Testing

/// `oscar cluster up --tls` as a user runs it: three real node processes
/// that speak only TLS 1.3 with certificates from their own CA, asked from
/// the CLI with its certificate; a client without a certificate, or with
/// one from another CA, refused; and `openssl s_client` with the CLI's
/// certificate completing a handshake that shows the node's chain.
@Suite(.serialized, .timeLimit(.minutes(6))) struct ClusterTLSCLITests {
    @Test func aTLSClusterConvergesAnswersItsCLIAndRefusesStrangers() async throws {
        let base = try #require(ClusterCLITests.freeRange(6))
        let httpBase = base + 3
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("oscar-tls-\(base)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let echo = "oscar://127.0.0.1:\(base + 1)/user/echo"
        do {
            let up = try await OscarProcess.run(
                [
                    "cluster", "up", "--tls", "--nodes", "3", "--base-port", "\(base)", "--http-base-port",
                    "\(httpBase)", "--dir", dir,
                ],
                timeout: .seconds(90))
            #expect(up.status == 0 && up.stdout.contains("cluster converged"), "\(up.stdout)\(up.stderr)")
            #expect(up.stdout.contains("management: https://127.0.0.1:\(httpBase)..."), "\(up.stdout)")

            // The CLI's certificate, found through --dir.
            let asked = try await OscarProcess.run(["ask", echo, "Echo", #"{"text":"tls"}"#, "--dir", dir], secret: "")
            #expect(asked.status == 0 && asked.stdout.contains(#""text":"tls""#), "\(asked.stdout)\(asked.stderr)")

            // The secret alone, in plaintext: refused.
            let plain = try await OscarProcess.run(
                ["ask", echo, "Echo", #"{"text":"x"}"#, "--secret-file", dir + "/secret"], secret: "")
            #expect(plain.status != 0, "a plaintext client was answered: \(plain.stdout)")
            #expect(plain.stderr.contains("TLS"), "\(plain.stderr)")

            // A certificate from another CA: refused.
            let other = dir + "/other"
            for command in [
                ["certs", "init", "--dir", other],
                ["certs", "issue", "--dir", other, "--name", "x", "--host", "127.0.0.1"],
            ] {
                let r = try await OscarProcess.run(command)
                #expect(r.status == 0, "\(command): \(r.stderr)")
            }
            let stranger = try await OscarProcess.run(
                [
                    "ask", echo, "Echo", #"{"text":"x"}"#, "--secret-file", dir + "/secret", "--tls-cert",
                    other + "/x.pem", "--tls-key", other + "/x.key", "--tls-ca", dir + "/tls/ca.pem",
                ], secret: "")
            #expect(stranger.status != 0, "a foreign certificate was answered: \(stranger.stdout)")

            // The management endpoint speaks TLS too: `oscar health` with
            // the CLI's certificate (found through --dir) is answered;
            // without TLS, it is told to use it.
            let health = try await OscarProcess.run(["health", "--http", "127.0.0.1:\(httpBase)", "--dir", dir])
            #expect(health.status == 0 && health.stdout.contains("up"), "\(health.stdout)\(health.stderr)")
            let probe = try await OscarProcess.run(
                ["health", "--http", "https://127.0.0.1:\(httpBase + 2)", "--tls-ca", dir + "/tls/ca.pem"], secret: "")
            #expect(probe.status == 0 && probe.stdout.contains("up"), "no certificate: \(probe.stdout)\(probe.stderr)")
            let plainHealth = try await OscarProcess.run(["health", "--http", "127.0.0.1:\(httpBase + 1)"], secret: "")
            #expect(plainHealth.status != 0, "\(plainHealth.stdout)")
            #expect(plainHealth.stdout.contains("https://"), "\(plainHealth.stdout)\(plainHealth.stderr)")

            // The standard tool, with the CLI's certificate: a verified
            // TLS 1.3 handshake that shows the node's chain.
            let tls = dir + "/tls"
            let sClient = try await offThePool {
                try OpenSSLTool.run([
                    "s_client", "-connect", "127.0.0.1:\(base)", "-tls1_3", "-showcerts", "-verify_return_error",
                    "-CAfile", tls + "/ca.pem", "-cert", tls + "/cli.pem", "-key", tls + "/cli.key",
                ])
            }
            #expect(sClient.output.contains("Verify return code: 0 (ok)"), "\(sClient.output.suffix(1500))")
            #expect(sClient.output.contains("BEGIN CERTIFICATE"), "no chain shown")
            #expect(sClient.output.contains("TLSv1.3"), "\(sClient.output.suffix(800))")
        } catch {
            Issue.record(error)
        }
        let down = try await OscarProcess.run(["cluster", "down", "--dir", dir], timeout: .seconds(60))
        #expect(down.status == 0 && down.stdout.contains("stopped 3 nodes"), "\(down.stdout)\(down.stderr)")
    }
}
