import Foundation
import OscarTestSupport
import Testing

/// `oscar chaos` end to end: real node processes, real faults, the checkers
/// on the recorded history. Run on their own after the rest of the suite
/// (`Cluster/test.sh`), so their timing is not shared with other tests.
@Suite(.serialized, .timeLimit(.minutes(10))) struct ChaosRunTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func reportDirectory(_ name: String) -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("oscar-chaos-\(name)-\(getpid())").path
        try? FileManager.default.removeItem(atPath: dir)
        return dir
    }

    static func chaos(
        _ arguments: [String], environment: [String: String] = [:]
    ) async throws -> (
        status: Int32, stdout: String, stderr: String
    ) {
        try await OscarProcess.run(["chaos"] + arguments, environment: environment, timeout: .seconds(150))
    }

    @Test func theCIScenarioPassesEveryCheck() async throws {
        let dir = Self.reportDirectory("ci")
        let scenario = Self.root.appendingPathComponent("Cluster/chaos/ci-short.json").path
        let r = try await Self.chaos(["--scenario", scenario, "--seed", "3", "--report", dir])
        #expect(r.status == 0, "\(r.stdout)\n\(r.stderr)")
        #expect(r.stdout.contains("verdict             PASS"))
        let report = try String(contentsOfFile: "\(dir)/report.txt", encoding: .utf8)
        #expect(report.contains("reliable stream"))
        let svg = try String(contentsOfFile: "\(dir)/timeline.svg", encoding: .utf8)
        #expect(svg.hasPrefix("<svg") && svg.contains("127.0.0.1:"))
        // The history holds every kind of line the checkers read.
        let history = try String(contentsOfFile: "\(dir)/history.jsonl", encoding: .utf8)
        for kind in [
            "invoke", "ok", "stream-send", "stream-ack", "stream-process", "view", "singleton-start",
            "activation-start", "start",
        ] {
            #expect(history.contains("\"kind\":\"\(kind)\""), "no \(kind) line in the history")
        }
    }

    @Test func aPlantedDeliveryBugIsCaught() async throws {
        let dir = Self.reportDirectory("planted")
        let r = try await Self.chaos(
            ["--nodes", "3", "--duration", "15s", "--faults", "delay", "--report", dir],
            environment: ["OSCAR_PLANTED_FAULT": "reliable-drop-one"])
        #expect(r.status == 1, "\(r.stdout)\n\(r.stderr)")
        #expect(r.stdout.contains("stream message 5 was acknowledged"), "\(r.stdout)")
        #expect(r.stdout.contains("never processed: lost"))
        #expect(r.stdout.contains("verdict             FAIL"))
    }

    static let netnsAvailable: Bool = {
        guard geteuid() == 0,
            ["/usr/sbin/ip", "/sbin/ip"].contains(where: FileManager.default.isExecutableFile(atPath:)),
            ["/usr/sbin/tc", "/sbin/tc"].contains(where: FileManager.default.isExecutableFile(atPath:))
        else { return false }
        return true
    }()

    @Test(.enabled(if: netnsAvailable, "--netns needs root, ip and tc: run the suite as root to include it"))
    func theKernelAppliesTheFaultsWithNetns() async throws {
        let dir = Self.reportDirectory("netns")
        let r = try await Self.chaos([
            "--netns", "--nodes", "3", "--duration", "20s", "--seed", "2", "--faults", "partition,delay,loss",
            "--report", dir,
        ])
        #expect(r.status == 0, "\(r.stdout)\n\(r.stderr)")
        #expect(r.stdout.contains("nodes: 10.213.9.10:7000, 10.213.9.11:7001"), "the nodes ran on their own addresses")
        #expect(r.stdout.contains("faults by the kernel"))
        #expect(!r.stdout.contains("faults injected     none"))
        let left = (try? FileManager.default.contentsOfDirectory(atPath: "/var/run/netns"))?.filter {
            $0.hasPrefix("osc-chaos-")
        }
        #expect(left ?? [] == [], "namespaces left behind")
    }
}
