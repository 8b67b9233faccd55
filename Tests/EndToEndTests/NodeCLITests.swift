import Foundation
import Testing

/// Two real `oscar node` processes on 127.0.0.1, driven with `oscar ask` and
/// `oscar tell` processes.
@Suite(.serialized, .timeLimit(.minutes(8))) struct NodeCLITests {
    @Test func askAndTellBetweenTwoRealNodes() async throws {
        let a = try OscarProcess(["node", "--port", "0", "--loops", "1"])
        let b = try OscarProcess(["node", "--port", "0", "--loops", "1"])
        let portA = try #require(await a.listeningPort())
        let portB = try #require(await b.listeningPort())

        let echo = try await OscarProcess.run([
            "ask", "oscar://127.0.0.1:\(portA)/user/echo", "Echo", #"{"text":"hi"}"#,
        ])
        #expect(echo.status == 0, "\(echo.stderr)")
        #expect(echo.stdout == "{\"text\":\"hi\",\"node\":\"127.0.0.1:\(portA)\"}\n")

        for _ in 0..<2 {
            let tell = try await OscarProcess.run([
                "tell", "oscar://127.0.0.1:\(portB)/user/counter", "Increment", #"{"by":20}"#,
            ])
            #expect(tell.status == 0, "\(tell.stderr)")
        }
        let count = try await OscarProcess.run(["ask", "oscar://127.0.0.1:\(portB)/user/counter", "GetCount", "{}"])
        #expect(count.stdout == "40\n")

        // Node B's counter is B's alone: A's is untouched.
        let other = try await OscarProcess.run(["ask", "oscar://127.0.0.1:\(portA)/user/counter", "GetCount", "{}"])
        #expect(other.stdout == "0\n")

        // The distributed greeter, called by function name with JSON arguments.
        let greeting = try await OscarProcess.run([
            "ask", "oscar://127.0.0.1:\(portB)/user/greeter", ".greet", #"["Ada"]"#,
        ])
        #expect(greeting.status == 0, "\(greeting.stderr)")
        #expect(greeting.stdout.hasPrefix("\"hello, Ada, from 127.0.0.1:\(portB)"))
        let sum = try await OscarProcess.run(["ask", "oscar://127.0.0.1:\(portB)/user/greeter", ".add", "[2, 40]"])
        #expect(sum.stdout == "42\n")
        let thrown = try await OscarProcess.run(["ask", "oscar://127.0.0.1:\(portB)/user/greeter", ".check", "[-3]"])
        #expect(thrown.status == 1 && thrown.stderr.contains("DemoError: -3 is negative"), "\(thrown.stderr)")
        let unknown = try await OscarProcess.run(["ask", "oscar://127.0.0.1:\(portB)/user/greeter", ".nope", "[]"])
        #expect(unknown.status == 1 && unknown.stderr.contains("has no distributed func nope; it has: add("))

        // Both nodes logged the connections, and stop cleanly on SIGINT / SIGTERM.
        kill(a.process.processIdentifier, SIGINT)
        kill(b.process.processIdentifier, SIGTERM)
        #expect(await a.exited(within: .seconds(30)))
        #expect(await b.exited(within: .seconds(30)))
        #expect(a.process.terminationStatus == 0)
        #expect(b.process.terminationStatus == 0)
        #expect(await a.waitFor("oscar node stopped"))
        #expect(a.stderr.value.contains("connected to"))
    }

    @Test func mistakesGetOneLineErrorsAndMeaningfulExitCodes() async throws {
        let n = try OscarProcess(["node", "--port", "0", "--loops", "1"])
        let port = try #require(await n.listeningPort())
        let base = "oscar://127.0.0.1:\(port)"
        let cases: [(args: [String], secret: String, status: Int32, says: String)] = [
            (
                ["ask", "\(base)/user/echo", "NoSuchType", "{}"], "e2e-cluster-secret-01", 1,
                "no reaction for message type NoSuchType"
            ),
            (
                ["tell", "\(base)/user/echo", "NoSuchType", "{}"], "e2e-cluster-secret-01", 1,
                "no reaction for message type NoSuchType"
            ),
            (["tell", "\(base)/user/echo", "Echo", #"{"wrong":1}"#], "e2e-cluster-secret-01", 1, "missing key 'text'"),
            (["ask", "\(base)/user/nobody", "Echo", #"{"text":"x"}"#], "e2e-cluster-secret-01", 1, "no actor at"),
            (["ask", "\(base)/user/echo", "Echo", "{not json"], "e2e-cluster-secret-01", 64, "invalid JSON"),
            (["ask", "not-a-uri", "Echo", "{}"], "e2e-cluster-secret-01", 64, "is not an actor URI"),
            (
                ["ask", "\(base)/user/echo", "Echo", "@/nonexistent/oscar.json"], "e2e-cluster-secret-01", 64,
                "No such file or directory"
            ),
            (["ask", "\(base)/user/echo", "Echo", "@/"], "e2e-cluster-secret-01", 64, "Is a directory"),
            (
                ["ask", "\(base)/user/echo", "Echo", #"{"text":{"$bytes":"abc"}}"#], "e2e-cluster-secret-01", 64,
                "hex digits"
            ),
            (["ask", "\(base)/user/echo", "Echo", #"{"wrong":1}"#], "e2e-cluster-secret-01", 1, "missing key 'text'"),
            (
                ["ask", "oscar://127.0.0.1:1/user/echo", "Echo", #"{"text":"x"}"#], "e2e-cluster-secret-01", 4,
                "unreachable"
            ),
            (["ask", "\(base)/user/echo", "Echo", #"{"text":"x"}"#], "not-the-cluster-secret", 4, "secret"),
        ]
        for c in cases {
            let r = try await OscarProcess.run(c.args, secret: c.secret)
            #expect(r.status == c.status, "\(c.args): \(r.stderr)")
            #expect(r.stderr.contains(c.says), "\(c.args): \(r.stderr)")
            #expect(r.stderr.split(separator: "\n").count == 1, "one line: \(r.stderr)")
        }
        // A message from a file (@FILE), larger than one argument may be: it
        // travels in chunks both ways.
        let path = NSTemporaryDirectory() + "oscar-e2e-\(getpid())-echo.json"
        let text = String(repeating: "file ", count: 40_000)
        try #"{"text":"\#(text)"}"#.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let fromFile = try await OscarProcess.run(["ask", "\(base)/user/echo", "Echo", "@\(path)"])
        #expect(fromFile.status == 0, "\(fromFile.stderr)")
        #expect(fromFile.stdout.contains(text))
    }

    /// `--help` after a command explains it and runs nothing: `oscar chaos
    /// --help` used to start a 60-second chaos run.
    @Test func helpAfterACommandPrintsItsUsageAndRunsNothing() async throws {
        for (command, says) in [
            ("chaos", "oscar chaos [--nodes 5]"), ("cluster", "oscar cluster up"), ("ask", "oscar ask URI"),
        ] {
            let result = try await OscarProcess.run([command, "--help"], timeout: .seconds(10))
            #expect(result.status == 0, "\(command): \(result.stderr)")
            #expect(result.stdout.contains(says), "\(command): \(result.stdout)")
            #expect(!result.stdout.contains("oscar demo"), "\(command): only its own usage")
        }
    }
}
