import Foundation
import Testing

/// The cluster secret from the command line: no built-in default, no short
/// secrets, files instead of arguments, and `oscar cluster up`'s generated
/// secret in its directory. Each command runs in an empty directory, so a
/// `.oscar/cluster` left by someone else cannot lend it a secret.
@Suite(.serialized, .timeLimit(.minutes(8))) struct SecretCLITests {
    @Test func withoutASecretANodeOrAClientFailsWithAUsageErrorThatSaysHowToGetOne() async throws {
        let empty = try SupervisionCLITests.directory("no-secret")
        defer { try? FileManager.default.removeItem(atPath: empty) }
        for args in [
            ["node", "--port", "0"], ["node", "--check-config"],
            ["ask", "oscar://127.0.0.1:1/user/echo", "Echo", #"{"text":"x"}"#], ["members"],
        ] {
            let r = try await OscarProcess.run(args, secret: "", directory: empty)
            #expect(r.status == 64, "\(args): \(r.stderr)")
            #expect(r.stderr.contains("secret") && r.stderr.contains("oscar secret"), "\(args): \(r.stderr)")
            #expect(r.stderr.split(separator: "\n").count == 1, "one line: \(r.stderr)")
        }
    }

    @Test func secretsShorterThanSixteenBytesAreRefusedSayingWhy() async throws {
        let empty = try SupervisionCLITests.directory("short-secret")
        defer { try? FileManager.default.removeItem(atPath: empty) }
        let file = empty + "/short"
        try "s3cret\n".write(toFile: file, atomically: true, encoding: .utf8)
        for (args, secret, source) in [
            (["node", "--port", "0"], "s3cret", "OSCAR_SECRET"),
            (["node", "--port", "0", "--secret", "fifteen-bytes!!"], "", "--secret"),
            (["node", "--port", "0", "--secret-file", file], "", "--secret-file"),
            (["ask", "oscar://127.0.0.1:1/user/echo", "Echo", "{}"], "s3cret-dev", "OSCAR_SECRET"),
            (["tell", "oscar://127.0.0.1:1/user/echo", "Echo", "{}"], "", "OSCAR_SECRET_FILE"),
        ] {
            let environment = source == "OSCAR_SECRET_FILE" ? ["OSCAR_SECRET_FILE": file] : [:]
            let r = try await OscarProcess.run(args, secret: secret, environment: environment, directory: empty)
            #expect(r.status == 64, "\(args): \(r.stderr)")
            #expect(r.stderr.contains("from \(source)") && r.stderr.contains("at least 16"), "\(args): \(r.stderr)")
            #expect(r.stderr.contains("offline"), "says why: \(r.stderr)")
        }
    }

    /// `oscar secret` makes one; a node reads it from `--secret-file`, a client
    /// from `OSCAR_SECRET_FILE`; it is in neither command line.
    @Test func aSecretFileKeepsTheSecretOffTheCommandLine() async throws {
        let dir = try SupervisionCLITests.directory("secret-file")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let made = try await OscarProcess.run(["secret"], directory: dir)
        let other = try await OscarProcess.run(["secret"], directory: dir)
        let secret = made.stdout.trimmingCharacters(in: .newlines)
        #expect(made.status == 0 && secret.count == 64 && secret.allSatisfy(\.isHexDigit), "\(made.stdout)")
        #expect(other.stdout != made.stdout, "random each time")
        let file = dir + "/secret"
        try made.stdout.write(toFile: file, atomically: true, encoding: .utf8)

        let node = try OscarProcess(
            ["node", "--port", "0", "--loops", "1", "--secret-file", file], secret: "", directory: dir)
        let port = try #require(await node.listeningPort())
        let cmdline = try String(contentsOfFile: "/proc/\(node.process.processIdentifier)/cmdline", encoding: .utf8)
        #expect(!cmdline.contains(secret))
        let echo = try await OscarProcess.run(
            ["ask", "oscar://127.0.0.1:\(port)/user/echo", "Echo", #"{"text":"hi"}"#], secret: "",
            environment: ["OSCAR_SECRET_FILE": file], directory: dir)
        #expect(echo.status == 0 && echo.stdout.contains(#""text":"hi""#), "\(echo.stderr)")
        // Another secret is refused by the node.
        let wrong = try await OscarProcess.run(
            ["ask", "oscar://127.0.0.1:\(port)/user/echo", "Echo", #"{"text":"hi"}"#], directory: dir)
        #expect(wrong.status == 4, "\(wrong.stderr)")
    }

    /// `oscar cluster up` without a secret writes a random one to DIR/secret
    /// (mode 0600), its nodes run supervised, and commands given `--dir`
    /// use the secret; `cluster status` shows each node's restarts.
    @Test func clusterUpGeneratesASecretThatDirCommandsUseAndSupervisesItsNodes() async throws {
        let base = try #require(ClusterCLITests.freeRange(2))
        let work = try SupervisionCLITests.directory("cluster-secret")
        defer { try? FileManager.default.removeItem(atPath: work) }
        let dir = work + "/cluster"
        do {
            let up = try await OscarProcess.run(
                ["cluster", "up", "--nodes", "2", "--base-port", "\(base)", "--dir", dir], secret: "", directory: work,
                timeout: .seconds(60))
            #expect(up.status == 0, "\(up.stdout)\(up.stderr)")
            #expect(up.stdout.contains("a new random cluster secret is in \(dir)/secret"), "\(up.stdout)")
            let attributes = try FileManager.default.attributesOfItem(atPath: dir + "/secret")
            #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
            let secret = try String(contentsOfFile: dir + "/secret", encoding: .utf8)
            #expect(secret.count == 65 && secret.hasSuffix("\n"), "32 bytes as hex, one line")
            #expect(!(try String(contentsOfFile: dir + "/cluster.json", encoding: .utf8)).contains(secret.dropLast()))

            let echo = try await OscarProcess.run(
                ["ask", "oscar://127.0.0.1:\(base + 1)/user/echo", "Echo", #"{"text":"hi"}"#, "--dir", dir],
                secret: "", directory: work)
            #expect(echo.status == 0, "\(echo.stderr)")
            let tell = try await OscarProcess.run(
                ["tell", "oscar://127.0.0.1:\(base)/user/counter", "Increment", #"{"by":2}"#, "--dir", dir],
                secret: "", directory: work)
            #expect(tell.status == 0, "\(tell.stderr)")
            let members = try await OscarProcess.run(
                ["members", "--node", "127.0.0.1:\(base)", "--dir", dir], secret: "", directory: work)
            #expect(members.status == 0 && members.stdout.contains("127.0.0.1:\(base + 1)"), "\(members.stderr)")
            // The environment's secret does not override --dir's.
            let status = try await OscarProcess.run(["cluster", "status", "--dir", dir], directory: work)
            #expect(status.status == 0 && status.stdout.contains("RESTARTS"), "\(status.stdout)\(status.stderr)")

            // A crash of one node: its supervisor restarts it, and status counts it.
            let crash = try await OscarProcess.run(["cluster", "kill", "\(base + 1)", "--crash", "--dir", dir])
            #expect(crash.status == 0 && crash.stdout.contains("its supervisor restarts it"), "\(crash.stderr)")
            let counted = await waitUntil(timeout: .seconds(60)) { () async -> Bool? in
                guard
                    let r = try? await OscarProcess.run(
                        ["cluster", "status", "--dir", dir], secret: "", directory: work),
                    let row = r.stdout.split(separator: "\n").first(where: {
                        $0.hasPrefix("127.0.0.1:\(base + 1) ") && $0.contains(" up ") && $0.contains(" yes ")
                    })
                else { return nil }
                return row.hasSuffix(" 1") ? true : nil
            }
            #expect(counted == true, "status never showed one restart")
        } catch {
            Issue.record(error)
        }
        let down = try await OscarProcess.run(["cluster", "down", "--dir", dir], secret: "", timeout: .seconds(60))
        #expect(down.status == 0 && down.stdout.contains("every one left gracefully"), "\(down.stdout)\(down.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir + "/secret"), "down removes the secret")
    }
}
