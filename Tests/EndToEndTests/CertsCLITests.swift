import Foundation
import OscarTestSupport
import Testing

/// `oscar certs`: a CA, node certificates and their summaries, with no other
/// tool; what it writes, `openssl` accepts.
@Suite(.timeLimit(.minutes(4))) struct CertsCLITests {
    @Test func initIssueAndShowMakeCertificatesOpenSSLAccepts() async throws {
        let dir = try SupervisionCLITests.directory("certs-flow") + "/pki"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let made = try await OscarProcess.run(["certs", "init", "--dir", dir])
        #expect(made.status == 0, "\(made.stderr)")
        #expect(made.stdout.contains("\(dir)/ca.pem") && made.stdout.contains("CA:          yes"), "\(made.stdout)")

        let issued = try await OscarProcess.run(
            [
                "certs", "issue", "--dir", dir, "--name", "node1", "--host", "127.0.0.1", "--host", "node1.oscar",
                "--days", "7",
            ])
        #expect(issued.status == 0, "\(issued.stderr)")
        #expect(issued.stdout.contains("names (SAN): IP:127.0.0.1, DNS:node1.oscar"), "\(issued.stdout)")

        let shown = try await OscarProcess.run(["certs", "show", dir + "/node1.pem"])
        #expect(shown.status == 0)
        for expected in [
            "subject:     CN=node1,O=Oscar", "issuer:      CN=Oscar cluster CA,O=Oscar", "not after:",
            "SHA-256:",
        ] {
            #expect(shown.stdout.contains(expected), "\(expected) in \(shown.stdout)")
        }
        let mode = try FileManager.default.attributesOfItem(atPath: dir + "/node1.key")[.posixPermissions] as? Int
        #expect(mode == 0o600)

        let verify = try OpenSSLTool.run(["verify", "-CAfile", dir + "/ca.pem", dir + "/node1.pem"])
        #expect(verify.status == 0, "\(verify.output)")
        let text = try OpenSSLTool.run(["x509", "-noout", "-text", "-in", dir + "/node1.pem"])
        #expect(text.output.contains("IP Address:127.0.0.1, DNS:node1.oscar"), "\(text.output)")
    }

    @Test func anExistingCAIsKeptUnlessForced() async throws {
        let dir = try SupervisionCLITests.directory("certs-force")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(try await OscarProcess.run(["certs", "init", "--dir", dir]).status == 0)
        let before = try String(contentsOfFile: dir + "/ca.pem", encoding: .utf8)
        let again = try await OscarProcess.run(["certs", "init", "--dir", dir])
        #expect(again.status == 1 && again.stderr.contains("ca.pem exists; give --force"), "\(again.stderr)")
        #expect(try String(contentsOfFile: dir + "/ca.pem", encoding: .utf8) == before)
        #expect(try await OscarProcess.run(["certs", "init", "--dir", dir, "--force"]).status == 0)
        #expect(try String(contentsOfFile: dir + "/ca.pem", encoding: .utf8) != before)
    }

    @Test func badArgumentsExit64WithOneLineSayingWhat() async throws {
        let dir = try SupervisionCLITests.directory("certs-bad")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(try await OscarProcess.run(["certs", "init", "--dir", dir]).status == 0)
        for (args, says) in [
            (["certs"], "usage: oscar certs"),
            (["certs", "sign"], "usage: oscar certs"),
            (["certs", "init"], "--dir is required"),
            (["certs", "init", "--dir", dir, "--days", "0"], "--days must be"),
            (["certs", "init", "--dir", dir, "--colour", "red"], "unknown option --colour"),
            (["certs", "issue", "--dir", dir, "--host", "127.0.0.1"], "--name is required"),
            (["certs", "issue", "--dir", dir, "--name", "n"], "at least one --host"),
            (["certs", "issue", "--dir", dir, "--name", "n", "--host", "a,b"], "'a,b' is not an IP address"),
            (["certs", "issue", "--dir", dir, "--name", "../n", "--host", "a"], "is not a node name"),
            (["certs", "show"], "usage: oscar certs"),
        ] {
            let r = try await OscarProcess.run(args)
            #expect(r.status == 64, "\(args): \(r.stderr)")
            #expect(r.stderr.contains(says) && r.stderr.split(separator: "\n").count == 1, "\(args): \(r.stderr)")
        }
        for (args, says) in [
            (["certs", "show", dir + "/missing.pem"], "cannot read"),
            (["certs", "show", dir + "/ca.key"], "no PEM certificate"),
            (["certs", "issue", "--dir", dir + "/none", "--name", "n", "--host", "a"], "cannot read"),
        ] {
            let r = try await OscarProcess.run(args)
            #expect(r.status == 1 && r.stderr.contains(says), "\(args): \(r.stderr)")
        }
    }
}
