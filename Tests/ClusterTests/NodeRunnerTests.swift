import Oscar
import OscarTestSupport
import Synchronization
import Testing

@testable import OscarCluster

struct RunnerPing: Message {
    typealias Reply = String
}

final class Ponger: Reactor {
    static func reactions(_ r: inout Reactions<Ponger>) { r.on(RunnerPing.self, result: { _, _ in "pong" }) }
}

/// The node runner in this process: settings from flags and variables, the
/// application's actors and start-up hook, a graceful leave ending `run`.
@Suite(.timeLimit(.minutes(4))) struct NodeRunnerTests {
    static let secret = "a-long-cluster-secret"

    @Test func aRunnerStartsTheApplicationsActorsAndReturnsZeroAfterALeave() async throws {
        let node = Mutex<ClusterNode?>(nil)
        var runner = ClusterNode.Runner(
            name: "test-node", arguments: ["--port", "0", "--loops=1", "--http-port", "0"],
            environment: ["OSCAR_SECRET": Self.secret, "OSCAR_LOG_LEVEL": "warning"]
        ) {
            $0.instance("ponger", Ponger())
        } started: { started in
            node.withLock { $0 = started }
        }
        runner.handlesSignals = false
        let run = Task { await runner.run() }
        #expect(await eventually(timeout: .seconds(120)) { node.withLock { $0 } != nil })
        let started = try #require(node.withLock { $0 })
        #expect(started.managementPort != nil, "--http-port 0 serves the management endpoint")
        #expect(OscarLog.shared.level == .warning, "OSCAR_LOG_LEVEL applies")
        let ponger = try #require(started.system.ref("oscar://\(started.address)/user/ponger"))
        #expect(try await ponger.ask(RunnerPing(), timeout: .seconds(10)) == "pong")
        started.leave()
        #expect(await run.value == 0, "a graceful leave ends the node with status 0")
        OscarLog.shared.level = .warning  // the runner sets the process's log; put it back
        OscarLog.shared.setPrefix("")
    }

    @Test func aStartUpHookThatThrowsStopsTheNodeWithStatusOne() async {
        struct Refused: Error {}
        var runner = ClusterNode.Runner(
            name: "test-node", arguments: ["--port", "0", "--loops", "1", "--secret", Self.secret],
            environment: [:]
        ) { _ in
        } started: { _ in
            throw Refused()
        }
        runner.handlesSignals = false
        #expect(await runner.run() == 1)
    }

    @Test(arguments: [
        (["--port", "0", "--bogus", "1"], "unknown option"),
        (["--port"], "needs a value"),
        (["stray"], "unexpected argument"),
        (["--port", "99999", "--secret", "a-long-cluster-secret"], "port"),
        (["--port", "0"], "needs the cluster secret"),
        (["--port", "0", "--secret", "short"], "at least 16"),
        (["--port", "0", "--secret", "a-long-cluster-secret", "--config", "/nonexistent/oscar.json"], "cannot read"),
        (["--port", "0", "--secret", "a-long-cluster-secret", "--tls-cert", "/nonexistent/a.pem"], "together"),
        (
            [
                "--port", "0", "--secret", "a-long-cluster-secret", "--tls-cert", "/nonexistent/a.pem", "--tls-key",
                "/nonexistent/a.key", "--tls-ca", "/nonexistent/ca.pem",
            ], "cannot read '/nonexistent/a.pem'"
        ),
    ])
    func aCommandLineThatCannotWorkIsStatus64WithoutStarting(arguments: [String], reason: String) async throws {
        let runner = ClusterNode.Runner(name: "test-node", arguments: arguments, environment: [:]) { _ in }
        #expect(await runner.run() == 64)
        // The same problem, in words: parse and resolve as the runner does.
        var words = ""
        do {
            let parsed = try NodeArguments(arguments)
            let file = try parsed.config.map { path in (path, try ProcessControl.readFile(path, atMost: 1 << 20)) }
            let resolved = try NodeConfiguration.resolve(flags: parsed.settings, environment: [:], file: file)
            let secret = try NodeSecret.forNode(resolved)
            _ = try resolved.configuration.clusterSettings(secret: secret).tls?.load()
        } catch {
            words = "\(error)"
        }
        #expect(words.contains(reason), "\(words)")
    }

    @Test func printAndCheckConfigEndWithoutStartingANode() async {
        for flag in ["--print-config", "--check-config", "--help"] {
            let runner = ClusterNode.Runner(
                name: "test-node", arguments: ["--port", "1", flag], environment: ["OSCAR_SECRET": Self.secret]
            ) { _ in
            } started: { _ in
                Issue.record("\(flag) started a node")
            }
            #expect(await runner.run() == 0, "\(flag)")
        }
    }

    @Test func argumentsSplitIntoSettingsExtrasSwitchesAndTheApplicationsOwn() throws {
        let parsed = try NodeArguments(
            [
                "--seed", "127.0.0.1:7000", "--host=127.0.0.1", "--chaos-seed", "4", "--inject-faults", "--", "--port",
                "x",
            ],
            extraOptions: ["chaos-seed"], extraSwitches: ["inject-faults"])
        #expect(parsed.settings == ["seeds": "127.0.0.1:7000", "bind-host": "127.0.0.1"])
        #expect(parsed.extras == ["chaos-seed": "4"])
        #expect(parsed.switches == ["inject-faults"])
        #expect(parsed.rest == ["--port", "x"], "after -- everything is the application's")
        #expect(throws: NodeArguments.Problem.self) { try NodeArguments(["--print-config=yes"]) }
    }

    /// An on/off setting's flag alone means on, at the end or before another
    /// flag; a setting that needs a value still takes the next argument.
    @Test func aSwitchSettingsFlagAloneMeansOn() throws {
        #expect(try NodeArguments(["--bulk-lane"]).settings == ["bulk-lane": "on"])
        let beforeAnother = try NodeArguments(["--bulk-lane", "--print-config"])
        #expect(beforeAnother.settings == ["bulk-lane": "on"] && beforeAnother.switches == ["print-config"])
        #expect(try NodeArguments(["--bulk-lane", "-h"]).switches == ["help"])
        #expect(
            try NodeArguments(["--bulk-lane", "off", "--remove-refusing"]).settings == [
                "bulk-lane": "off", "remove-refusing": "true",
            ])
        #expect(try NodeArguments(["--port", "--print-config"]).settings == ["port": "--print-config"])
        #expect(throws: NodeArguments.Problem.self) { try NodeArguments(["--port"]) }
    }
}

/// Waiting for the cluster instead of polling it. The bounds are wide: under
/// the sanitizer pass, CPU-bound suites beside these can hold every thread
/// of Swift's cooperative pool for tens of seconds, and nothing here runs
/// meanwhile.
@Suite(.timeLimit(.minutes(4))) struct WaitUntilUpTests {
    @Test func aJoiningNodeWaitsUntilItAndTheOthersAreUp() async throws {
        let settings = ClusterNode.Settings(secret: NodeRunnerTests.secret, loopCount: 1)
        let a = try ClusterNode(settings: settings)
        defer { a.shutdown() }
        var joining = settings
        joining.seeds = [a.address]
        let b = try ClusterNode(settings: joining)
        defer { b.shutdown() }
        let view = try await b.waitUntilUp(members: 2, within: .seconds(120))
        #expect(view.members.filter { $0.status == .up }.count == 2)
        #expect(view.members.contains { $0.uid == b.address.uid && $0.status == .up })
    }

    @Test func aNodeThatCannotJoinTimesOut() async throws {
        var settings = ClusterNode.Settings(secret: NodeRunnerTests.secret, loopCount: 1)
        settings.seeds = [NodeAddress(host: "127.0.0.1", port: 1)]  // never answers
        let lonely = try ClusterNode(settings: settings)
        defer { lonely.shutdown() }
        // The bound ends the wait (were it ignored, the wait would never end
        // and the suite's time limit would fail the test).
        do {
            try await lonely.waitUntilUp(within: .milliseconds(300))
            Issue.record("a node that cannot join is not up")
        } catch {
            if case .timeout = error {} else { Issue.record("not a timeout: \(error)") }
        }
    }
}
