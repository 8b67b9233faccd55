import Glibc
import Oscar
import OscarDemo
import OscarTestKit
import Synchronization

/// Where a chaos run's nodes live and who applies network faults: the
/// nodes' own fault gates on loopback, or the kernel with `--netns`.
protocol ChaosNetwork: Sendable {
    /// One line for the run's header.
    var summary: String { get }
    /// The address of each node.
    func hosts(_ count: Int) -> [String]
    func spawn(node: Int, _ command: [String], log: String, environment: [String: String]) throws(CLIError) -> Int32
    /// Kernel faults: true when applied here; false means "use the nodes'
    /// fault gates".
    func partition(_ groups: [[Int]]) -> Bool
    func delay(node: Int, millis: Int, jitterMillis: Int) -> Bool
    func loss(node: Int, fraction: Double) -> Bool
    /// Lifts the kernel faults.
    func heal()
    /// Removes everything set up; safe to call more than once.
    func tearDown()
}

/// Every node on 127.0.0.1; faults through their fault gates. Needs no root.
struct LoopbackNetwork: ChaosNetwork {
    var summary: String { "network faults through each node's fault gate" }
    func hosts(_ count: Int) -> [String] { Array(repeating: "127.0.0.1", count: count) }
    func spawn(node: Int, _ command: [String], log: String, environment: [String: String]) throws(CLIError) -> Int32 {
        try LocalProcesses.spawnDetached(command, log: log, extraEnvironment: environment)
    }
    func partition(_ groups: [[Int]]) -> Bool { false }
    func delay(node: Int, millis: Int, jitterMillis: Int) -> Bool { false }
    func loss(node: Int, fraction: Double) -> Bool { false }
    func heal() {}
    func tearDown() {}
}

/// `--netns` (root): each node in its own network namespace with its own
/// address, joined by a bridge in a hub namespace; this process reaches them
/// through one more veth into the hub. Faults are the kernel's: partitions
/// are blackhole routes, delay and loss are `tc netem` on each node's
/// interface. Deleting the namespaces removes every interface, route and
/// qdisc with them, so tear-down cannot miss one.
final class NetnsChaos: ChaosNetwork {
    static let ip = [String](["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip"]).first { access($0, X_OK) == 0 }
    static let tc = [String](["/usr/sbin/tc", "/sbin/tc", "/usr/bin/tc"]).first { access($0, X_OK) == 0 }

    let count: Int
    let tag: String
    var summary: String { "one network namespace each; network faults by the kernel (blackhole routes, tc netem)" }
    private let torn = Mutex(false)

    var hub: String { "osc-chaos-hub-\(tag)" }
    func ns(_ i: Int) -> String { "osc-chaos-\(i)-\(tag)" }
    func address(_ i: Int) -> String { "10.213.9.\(10 + i)" }
    static let runnerAddress = "10.213.9.254"

    /// Root, `ip` and `tc` present, and `ip netns add` works.
    static func requireAvailable() throws(CLIError) {
        guard geteuid() == 0 else { throw .failed("--netns needs root (it creates network namespaces)") }
        guard let ip, tc != nil else { throw .failed("--netns needs ip and tc (Debian: iproute2)") }
        let probe = "osc-chaos-probe-\(getpid())"
        guard LocalProcesses.run([ip, "netns", "add", probe]) == 0 else {
            throw .failed("--netns: 'ip netns add' does not work here")
        }
        LocalProcesses.run([ip, "netns", "del", probe])
    }

    init(nodes count: Int, tag: UInt64) throws(CLIError) {
        self.count = count
        self.tag = "\(tag)"
        guard let ip = Self.ip else { throw .failed("--netns needs ip") }
        Self.removeOrphans(ip)
        var commands: [[String]] = [
            [ip, "netns", "add", hub], [ip, "-n", hub, "link", "add", "br0", "type", "bridge"],
            [ip, "-n", hub, "link", "set", "br0", "up"],
            // This process's way in: a veth from here into the hub.
            [ip, "link", "add", "osc-r-\(self.tag)", "type", "veth", "peer", "name", "r0", "netns", hub],
            [ip, "-n", hub, "link", "set", "r0", "master", "br0"], [ip, "-n", hub, "link", "set", "r0", "up"],
            [ip, "addr", "add", "\(Self.runnerAddress)/24", "dev", "osc-r-\(self.tag)"],
            [ip, "link", "set", "osc-r-\(self.tag)", "up"],
        ]
        for i in 0..<count {
            commands += [
                [ip, "netns", "add", ns(i)],
                [ip, "link", "add", "eth0", "netns", ns(i), "type", "veth", "peer", "name", "p\(i)", "netns", hub],
                [ip, "-n", hub, "link", "set", "p\(i)", "master", "br0"],
                [ip, "-n", hub, "link", "set", "p\(i)", "up"],
                [ip, "-n", ns(i), "addr", "add", "\(address(i))/24", "dev", "eth0"],
                [ip, "-n", ns(i), "link", "set", "eth0", "up"], [ip, "-n", ns(i), "link", "set", "lo", "up"],
            ]
        }
        for command in commands where LocalProcesses.run(command) != 0 {
            tearDown()
            throw .failed("--netns set-up failed at: \(command.joined(separator: " "))")
        }
    }

    /// Namespaces left by a run whose process is gone (killed before it
    /// could tear down): their tag is that process's pid.
    private static func removeOrphans(_ ip: String) {
        for name in FileStream.names(in: "/var/run/netns") where name.hasPrefix("osc-chaos-") {
            guard let tag = name.split(separator: "-").last.flatMap({ Int32($0) }), kill(tag, 0) != 0, errno == ESRCH
            else { continue }
            LocalProcesses.run([ip, "netns", "del", name])
        }
    }

    func hosts(_ count: Int) -> [String] { (0..<count).map(address) }

    func spawn(node: Int, _ command: [String], log: String, environment: [String: String]) throws(CLIError) -> Int32 {
        try LocalProcesses.spawnDetached(
            command, log: log, extraEnvironment: environment, launcher: [Self.ip!, "netns", "exec", ns(node)])
    }

    func partition(_ groups: [[Int]]) -> Bool {
        for group in groups {
            for i in group {
                for j in 0..<count where !group.contains(j) {
                    LocalProcesses.run([Self.ip!, "-n", ns(i), "route", "add", "blackhole", "\(address(j))/32"])
                }
            }
        }
        return true
    }

    func delay(node: Int, millis: Int, jitterMillis: Int) -> Bool {
        netem(node, ["delay", "\(millis)ms", "\(jitterMillis)ms"])
    }

    func loss(node: Int, fraction: Double) -> Bool {
        netem(node, ["loss", "\(Int(fraction * 100))%"])
    }

    private func netem(_ node: Int, _ parameters: [String]) -> Bool {
        LocalProcesses.run(
            [Self.ip!, "netns", "exec", ns(node), Self.tc!, "qdisc", "replace", "dev", "eth0", "root", "netem"]
                + parameters) == 0
    }

    func heal() {
        for i in 0..<count {
            LocalProcesses.run([Self.ip!, "-n", ns(i), "route", "flush", "type", "blackhole"])
            LocalProcesses.run([Self.ip!, "netns", "exec", ns(i), Self.tc!, "qdisc", "del", "dev", "eth0", "root"])
        }
    }

    /// Deleting a namespace deletes the veth ends, routes and qdiscs in it;
    /// the hub's takes the bridge and this process's veth with it.
    func tearDown() {
        guard let ip = Self.ip,
            torn.withLock({ done in
                defer { done = true }; return !done
            })
        else { return }
        for name in (0..<count).map(ns) + [hub] { LocalProcesses.run([ip, "netns", "del", name]) }
    }

}
