import Foundation
import Testing

/// `oscar node --supervise` with real processes: a node killed by a signal
/// is started again as a new incarnation, its restart count reaches
/// `/metrics`, and the supervisor's log names the signal; a node that cannot
/// start is given up on; SIGHUP is a graceful leave, supervised or not;
/// SIGUSR1 reloads a node's TLS files and ends nothing.
@Suite(.serialized, .timeLimit(.minutes(8))) struct SupervisionCLITests {
    /// A temporary directory for one test.
    static func directory(_ name: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("oscar-\(name)-\(getpid())").path
        try? FileManager.default.removeItem(atPath: path)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// `{"supervisor":…,"pid":…,"restarts":…}` from a supervisor's state file.
    static func supervisorState(_ path: String) -> (pid: Int32, restarts: Int)? {
        guard let data = FileManager.default.contents(atPath: path),
            let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let pid = (json["pid"] as? NSNumber)?.int32Value, let restarts = (json["restarts"] as? NSNumber)?.intValue
        else { return nil }
        return (pid, restarts)
    }

    /// The uids in a node's "listening on oscar://… (uid N, …)" lines.
    static func uids(_ output: String) -> [String] {
        output.split(separator: "\n").filter { $0.contains("listening on oscar://") }.compactMap { line in
            line.split(separator: "(uid ").dropFirst().first?.split(separator: ",").first.map(String.init)
        }
    }

    @Test func aSupervisedNodeKilledBySIGKILLIsRestartedAsANewIncarnationAndCountsTheRestart() async throws {
        let ports = try #require(ClusterCLITests.freeRange(2))
        let (port, http) = (ports, ports + 1)
        let dir = try Self.directory("supervise")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let stateFile = dir + "/node.supervisor.json"
        let supervisor = try OscarProcess([
            "node", "--port", "\(port)", "--http-port", "\(http)", "--loops", "1", "--supervise", "--state-file",
            stateFile,
        ])
        let first = try #require(
            await waitUntil(timeout: .seconds(30)) { Self.supervisorState(stateFile).flatMap { $0.pid > 0 ? $0 : nil } }
        )
        #expect(first.restarts == 0)
        #expect(first.pid != supervisor.process.processIdentifier, "the node is a child, not the supervisor")
        let healthy = await waitUntil(timeout: .seconds(30)) {
            HTTP.get("/health", port: http)?.contains(" 200 ") == true ? true : nil
        }
        #expect(healthy == true, "\(supervisor.stderr.value)")
        #expect(HTTP.get("/metrics", port: http)?.contains("\noscar_node_restarts 0\n") == true)

        // A crash, as a trap would end it: SIGKILL to the node, not the supervisor.
        kill(first.pid, SIGKILL)
        let second = await waitUntil(timeout: .seconds(60)) {
            Self.supervisorState(stateFile).flatMap { $0.pid > 0 && $0.pid != first.pid ? $0 : nil }
        }
        #expect(second?.restarts == 1, "\(supervisor.stderr.value)")
        let restarted = await waitUntil(timeout: .seconds(60)) {
            HTTP.get("/metrics", port: http)?.contains("\noscar_node_restarts 1\n") == true ? true : nil
        }
        #expect(restarted == true, "\(supervisor.stderr.value)")
        let health = try await OscarProcess.run(["health", "--http", "127.0.0.1:\(http)"])
        #expect(health.status == 0, "\(health.stdout)\(health.stderr)")
        let log = supervisor.stderr.value
        #expect(log.contains("was killed by SIGKILL"), "\(log)")
        #expect(log.contains("its last") && log.contains("  | "), "the crashed node's last lines: \(log)")
        #expect(log.contains("restart 1"), "\(log)")
        let uids = Self.uids(supervisor.stdout.value)
        #expect(uids.count == 2 && uids[0] != uids[1], "a new incarnation: \(uids)")

        // SIGHUP to the supervisor: forwarded; the node leaves gracefully; both exit 0.
        kill(supervisor.process.processIdentifier, SIGHUP)
        #expect(await supervisor.exited(within: .seconds(30)))
        #expect(supervisor.process.terminationStatus == 0, "\(supervisor.stderr.value)")
        #expect(supervisor.stderr.value.contains("received SIGHUP; leaving the cluster"))
        #expect(supervisor.stderr.value.contains("after SIGHUP; stopping"))
        let pid = second?.pid ?? 0
        let gone = await waitUntil(timeout: .seconds(10)) { ClusterCLITests.isAlive(pid) ? nil : true }
        #expect(gone == true, "the node outlived its supervisor")
    }

    /// A node that cannot start (its port is taken) crashes at once, each
    /// time: the supervisor backs off, then gives up and exits 1.
    @Test func aSupervisorGivesUpAfterTooManyCrashesWithinItsWindow() async throws {
        let holder = try OscarProcess(["node", "--port", "0", "--loops", "1"])
        let port = try #require(await holder.listeningPort())
        let result = try await OscarProcess.run(
            ["node", "--port", "\(port)", "--loops", "1", "--supervise", "--max-restarts", "2"], timeout: .seconds(90))
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stderr.contains("exited with status 1"), "\(result.stderr)")
        #expect(result.stderr.contains("restart 2 in 2s"), "the backoff doubles: \(result.stderr)")
        #expect(result.stderr.contains("giving up: 3 crashes within 60s"), "\(result.stderr)")
        // The supervisor's own options are its own: a node refuses them alone.
        let alone = try await OscarProcess.run(["node", "--max-restarts", "2"])
        #expect(alone.status == 64 && alone.stderr.contains("--max-restarts goes with --supervise"), "\(alone.stderr)")
    }

    /// SIGHUP used to end a node without leaving; now it leaves like SIGTERM,
    /// and the other node sees it go.
    @Test func sighupMakesANodeLeaveTheClusterGracefully() async throws {
        let a = try OscarProcess(["node", "--port", "0", "--loops", "1"])
        let portA = try #require(await a.listeningPort())
        let b = try OscarProcess(["node", "--port", "0", "--loops", "1", "--seeds", "127.0.0.1:\(portA)"])
        let portB = try #require(await b.listeningPort())
        let joined = await waitUntil(timeout: .seconds(60)) {
            await ClusterCLITests.members(portA)?["127.0.0.1:\(portB)"] == "up" ? true : nil
        }
        #expect(joined == true)
        kill(b.process.processIdentifier, SIGHUP)
        #expect(await b.exited(within: .seconds(30)))
        #expect(b.process.terminationStatus == 0, "\(b.stderr.value)")
        #expect(b.stderr.value.contains("received SIGHUP; leaving the cluster"), "\(b.stderr.value)")
        #expect(await b.waitFor("oscar node stopped"))
        let left = await waitUntil(timeout: .seconds(30)) {
            await ClusterCLITests.members(portA).map { $0["127.0.0.1:\(portB)"] == nil } == true ? true : nil
        }
        let view = await ClusterCLITests.members(portA)
        #expect(left == true, "A still lists B: \(String(describing: view))")
    }

    @Test func sigusr1ReloadsTheTLSFilesOfASupervisedNodeAndABadFileKeepsItRunning() async throws {
        let dir = try Self.directory("tls-reload")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(try await OscarProcess.run(["certs", "init", "--dir", dir]).status == 0)
        let issued = try await OscarProcess.run(["certs", "issue", "--dir", dir, "--name", "a", "--host", "127.0.0.1"])
        #expect(issued.status == 0, "\(issued.stderr)")
        let supervisor = try OscarProcess([
            "node", "--port", "0", "--loops", "1", "--tls-cert", dir + "/a.pem", "--tls-key", dir + "/a.key",
            "--tls-ca", dir + "/ca.pem", "--supervise",
        ])
        #expect(await supervisor.listeningPort() != nil, "\(supervisor.stderr.value)")
        let log = supervisor.stderr

        // Forwarded by the supervisor; the node reads the files again.
        kill(supervisor.process.processIdentifier, SIGUSR1)
        let reloaded = await waitUntil(timeout: .seconds(30)) {
            log.value.contains("reloaded TLS certificates from \(dir)/a.pem") ? true : nil
        }
        #expect(reloaded == true, "\(supervisor.stderr.value)")

        // A bad file is logged; the node keeps its certificates and runs on.
        try "not a certificate".write(toFile: dir + "/a.pem", atomically: true, encoding: .utf8)
        kill(supervisor.process.processIdentifier, SIGUSR1)
        let refused = await waitUntil(timeout: .seconds(30)) {
            log.value.contains("TLS reload failed, keeping the current certificates") ? true : nil
        }
        #expect(refused == true, "\(supervisor.stderr.value)")
        #expect(supervisor.process.isRunning, "\(supervisor.stderr.value)")

        kill(supervisor.process.processIdentifier, SIGTERM)
        #expect(await supervisor.exited(within: .seconds(30)))
        #expect(supervisor.process.terminationStatus == 0, "\(supervisor.stderr.value)")
    }
}

/// Polls `condition` every 100 ms until it gives a value, for at most `timeout`.
func waitUntil<T: Sendable>(timeout: Duration, _ condition: @Sendable () async -> T?) async -> T? {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    while clock.now < deadline {
        if let value = await condition() { return value }
        try? await Task.sleep(for: .milliseconds(100))
    }
    return await condition()
}

/// One blocking HTTP/1.0 GET on 127.0.0.1, bounded by 3 s; the whole
/// response, or nil when nothing answers.
enum HTTP {
    static func get(_ path: String, port: Int) -> String? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 3, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected else { return nil }
        let request = Array("GET \(path) HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        guard send(fd, request, request.count, 0) == request.count else { return nil }
        var response: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = recv(fd, &chunk, chunk.count, 0)
            if n < 0 { return nil }
            if n == 0 { break }
            response += chunk[..<n]
        }
        return String(decoding: response, as: UTF8.self)
    }
}
