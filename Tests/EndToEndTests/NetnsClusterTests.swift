import Foundation
import OscarTestSupport
import Synchronization
import Testing

/// Three hosts on one machine: a network namespace per node, joined by a
/// bridge that lives in a fourth ("hub") namespace, so nothing is added to
/// the machine's own network. The nodes are configured as in
/// docker-compose.yml: bind 0.0.0.0, advertise their own address, two seeds.
/// Needs root and `ip netns`; skipped otherwise.
@Suite(.serialized, .timeLimit(.minutes(8))) struct NetnsClusterTests {
    static let ip = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    /// Root, and `ip netns add` works here.
    static let available: Bool = {
        guard geteuid() == 0, let ip else { return false }
        let probe = "oscar-probe-\(getpid())"
        guard run([ip, "netns", "add", probe]) == 0 else { return false }
        _ = run([ip, "netns", "del", probe])
        return true
    }()

    /// Runs a command to completion (setup and teardown: short, bounded by
    /// the command itself) and returns its exit status.
    @discardableResult
    static func run(_ command: [String]) -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: command[0])
        p.arguments = Array(command.dropFirst())
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        guard (try? p.run()) != nil else { return -1 }
        p.waitUntilExit()
        return p.terminationStatus
    }

    /// The namespaces and their addresses; created by `setUp`, removed by
    /// `tearDown` whatever happened in between.
    struct Lab: Sendable {
        let tag = "\(getpid() % 100_000)"
        var hub: String { "osc-hub-\(tag)" }
        func ns(_ i: Int) -> String { "osc-n\(i)-\(tag)" }
        func address(_ i: Int) -> String { "10.213.7.\(10 + i)" }
        let nodes = [1, 2, 3]

        func setUp() -> Bool {
            guard let ip = NetnsClusterTests.ip else { return false }
            var commands: [[String]] = [
                [ip, "netns", "add", hub], [ip, "-n", hub, "link", "add", "br0", "type", "bridge"],
                [ip, "-n", hub, "link", "set", "br0", "up"],
            ]
            for i in nodes {
                commands += [
                    [ip, "netns", "add", ns(i)],
                    [ip, "link", "add", "eth0", "netns", ns(i), "type", "veth", "peer", "name", "p\(i)", "netns", hub],
                    [ip, "-n", hub, "link", "set", "p\(i)", "master", "br0"],
                    [ip, "-n", hub, "link", "set", "p\(i)", "up"],
                    [ip, "-n", ns(i), "addr", "add", "\(address(i))/24", "dev", "eth0"],
                    [ip, "-n", ns(i), "link", "set", "eth0", "up"],
                    [ip, "-n", ns(i), "link", "set", "lo", "up"],
                ]
            }
            return commands.allSatisfy { NetnsClusterTests.run($0) == 0 }
        }

        /// Deleting a namespace deletes the veth ends and the bridge in it.
        func tearDown() {
            guard let ip = NetnsClusterTests.ip else { return }
            for name in nodes.map(ns) + [hub] { NetnsClusterTests.run([ip, "netns", "del", name]) }
        }

        /// `ip netns exec NS(i)`: runs a command on host `i`.
        func exec(_ i: Int) -> [String] { [NetnsClusterTests.ip!, "netns", "exec", ns(i)] }

        /// An `oscar node` on every host: port 7000 on every interface,
        /// advertising its own address, with `environment` on top.
        func startNodes(_ environment: [String: String]) throws -> [OscarProcess] {
            try nodes.map { i in
                try OscarProcess(
                    ["node", "--loops", "1"],
                    environment: [
                        "OSCAR_BIND_HOST": "0.0.0.0", "OSCAR_ADVERTISED_HOST": address(i), "OSCAR_PORT": "7000",
                    ].merging(environment) { $1 }, launcher: exec(i))
            }
        }

        /// Whether every node sees three up, as `oscar members --json` run
        /// on the first host reports it; what the last one said otherwise.
        func everyNodeSeesThreeUp() async -> (Bool, String) {
            for i in nodes {
                let r = try? await OscarProcess.run(
                    ["members", "--node", "\(address(i)):7000", "--json"], launcher: exec(1))
                guard let r, r.status == 0,
                    let json = try? JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any],
                    let members = json["members"] as? [[String: Any]],
                    members.count == 3, members.allSatisfy({ $0["status"] as? String == "up" })
                else { return (false, "\(address(i)): \(r.map { "\($0.status) \($0.stdout) \($0.stderr)" } ?? "nil")") }
            }
            return (true, "")
        }

        func namespaces() -> [String] {
            (try? FileManager.default.contentsOfDirectory(atPath: "/var/run/netns"))?.filter { $0.hasSuffix("-\(tag)") }
                ?? []
        }
    }

    @Test(.enabled(if: available, "needs root and ip netns: run the suite as root to include it"))
    func threeHostsConvergeAndAnswerAnAskAcrossTheBridge() async throws {
        let lab = Lab()
        lab.tearDown()  // leftovers of an interrupted run
        defer {
            lab.tearDown()
            #expect(lab.namespaces().isEmpty, "namespaces left behind: \(lab.namespaces())")
        }
        try #require(lab.setUp(), "could not build the namespaces")
        let seeds = "\(lab.address(1)):7000,\(lab.address(2)):7000"
        let nodes = try lab.startNodes(["OSCAR_SEEDS": seeds])
        defer { nodes.forEach { kill($0.process.processIdentifier, SIGKILL) } }
        let converged = await eventually(timeout: .seconds(30)) { await lab.everyNodeSeesThreeUp().0 }
        #expect(converged, "logs: \(nodes.map { $0.stdout.value + $0.stderr.value })")
        // An ask from the first host to the third, answered there.
        let r = try await OscarProcess.run(
            ["ask", "oscar://\(lab.address(3)):7000/user/echo", "Echo", #"{"text":"across"}"#], launcher: lab.exec(1))
        #expect(r.status == 0 && r.stdout.contains("\(lab.address(3)):7000"), "\(r.stdout)\(r.stderr)")
    }

    static let dnsmasq = ["/usr/sbin/dnsmasq", "/usr/bin/dnsmasq"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    /// Seeds from DNS, as a Kubernetes headless service gives them: a real
    /// DNS server (dnsmasq) in the hub namespace answers one name with the
    /// three hosts' addresses; each node is given only that name.
    @Test(
        .enabled(
            if: available && dnsmasq != nil,
            "needs root, ip netns and dnsmasq (apt-get install dnsmasq-base): run the suite as root to include it"))
    func threeHostsFindEachOtherThroughOneDNSName() async throws {
        let lab = Lab()
        lab.tearDown()
        let resolvConf = { (i: Int) in "/etc/netns/\(lab.ns(i))" }
        let hostsFile = "/tmp/oscar-dns-\(lab.tag).hosts"
        defer {
            for i in lab.nodes { try? FileManager.default.removeItem(atPath: resolvConf(i)) }
            try? FileManager.default.removeItem(atPath: hostsFile)
            lab.tearDown()
            #expect(lab.namespaces().isEmpty, "namespaces left behind: \(lab.namespaces())")
        }
        try #require(lab.setUp(), "could not build the namespaces")
        // The DNS server on the bridge, at .2; every node's resolv.conf
        // points there (`ip netns exec` mounts /etc/netns/NS/resolv.conf).
        try #require(Self.run([Self.ip!, "-n", lab.hub, "addr", "add", "10.213.7.2/24", "dev", "br0"]) == 0)
        try lab.nodes.map { "\(lab.address($0)) seeds.oscar.test\n" }.joined()
            .write(toFile: hostsFile, atomically: true, encoding: .utf8)
        for i in lab.nodes {
            try FileManager.default.createDirectory(atPath: resolvConf(i), withIntermediateDirectories: true)
            try "nameserver 10.213.7.2\n".write(
                toFile: resolvConf(i) + "/resolv.conf", atomically: true, encoding: .utf8)
        }
        // dnsmasq runs as a daemon, started through the shell (`system`),
        // not Foundation's Process: a Process whose child leaves a daemon
        // behind, or a second long-running one, upset Foundation's and
        // libdispatch's child monitoring here (exits not seen; once a crash
        // in libdispatch's event loop). Its pid file says whom to stop.
        let pidFile = "/tmp/oscar-dns-\(lab.tag).pid"
        let start =
            "\(Self.ip!) netns exec \(lab.hub) \(Self.dnsmasq!) --no-resolv --no-hosts --addn-hosts=\(hostsFile) "
            + "--listen-address=10.213.7.2 --bind-interfaces --port=53 --pid-file=\(pidFile) --user=root "
            + "</dev/null >/dev/null 2>&1"
        try #require(system(start) == 0, "dnsmasq did not start")
        defer {
            if let text = try? String(contentsOfFile: pidFile, encoding: .utf8),
                let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines))
            {
                kill(pid, SIGKILL)  // SIGTERM may be ignored: a disposition inherited from the test process
            }
            try? FileManager.default.removeItem(atPath: pidFile)
        }
        let nodes = try lab.startNodes(["OSCAR_SEED_DNS": "seeds.oscar.test:7000", "OSCAR_SEED_DNS_MIN": "3"])
        defer { nodes.forEach { kill($0.process.processIdentifier, SIGKILL) } }
        let lastAnswer = Mutex("")
        let converged = await eventually(timeout: .seconds(60)) {
            let (done, said) = await lab.everyNodeSeesThreeUp()
            lastAnswer.withLock { $0 = said }
            return done
        }
        #expect(
            converged,
            "last answer: \(lastAnswer.withLock { $0 }); logs: \(nodes.map { $0.stdout.value + $0.stderr.value })")
        #expect(
            nodes.allSatisfy {
                $0.stdout.value.contains("joining through 10.213.7.11:7000, 10.213.7.12:7000, 10.213.7.13:7000")
            },
            "every node found the three seeds through the name: \(nodes.map(\.stdout.value))")
    }
}
