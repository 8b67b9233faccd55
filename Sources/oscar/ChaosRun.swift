import Glibc
import Oscar
import OscarDemo
import OscarTestKit
import Synchronization

/// One `oscar chaos` run: the shell around `NemesisPlan`, `ChaosWorkload`
/// and `ChaosChecker`. It owns the node processes (its children), applies
/// each step of the plan, records what it did in its own history, and at
/// the end merges every history, checks it and writes the report.
final class ChaosRun {
    struct Node {
        var index: Int
        var address: NodeAddress
        var httpPort: Int
        var pid: Int32?
        var paused = false
        /// Was stopped on purpose (SIGTERM) or killed: not restarted by a heal
        /// until the plan starts it.
        var heldDown = false
        var name: String { address.description }
    }

    let duration: Duration
    let seed: UInt64
    let dir: String
    let title: String
    let plan: NemesisPlan
    let secret: String
    let network: ChaosNetwork
    private(set) var nodes: [Node]
    private let history: FileStream
    private var peakRSS: [Int32: (node: String, bytes: Int)] = [:]
    private var faultsSoFar = 0
    private var current = "warming up"
    private var checker = ChaosChecker()
    /// `oscar chaos --exec`: the application's node binary and its own
    /// arguments; nil: `oscar node` with the built-in workload.
    let exec: (path: String, arguments: [String])?
    /// Pids to kill if the run is interrupted.
    private static let children = Mutex<Set<Int32>>([])

    /// The workload runs until this instant (monotonic ns).
    private var until: UInt64 = 0

    init(
        nodes count: Int, duration: Duration, seed: UInt64, faults: [NemesisPlan.Fault], dir: String, netns: Bool,
        title: String, exec: (path: String, arguments: [String])? = nil
    ) throws(CLIError) {
        self.exec = exec
        self.duration = duration
        self.seed = seed
        self.dir = dir
        self.title = title
        try ClusterCommand.makeDirectory(dir)
        for name in FileStream.names(in: dir) where name.hasSuffix(".jsonl") || name.hasSuffix(".log") {
            unlink("\(dir)/\(name)")
        }
        guard let history = FileStream.appending("\(dir)/runner.history.jsonl") else {
            throw .failed("cannot write \(dir)/runner.history.jsonl")
        }
        self.history = history
        network = netns ? try NetnsChaos(nodes: count, tag: UInt64(getpid())) : LoopbackNetwork()
        let hosts = network.hosts(count)
        let base = try Self.freeBasePort(count, hosts: hosts)
        nodes = (0..<count).map { i in
            Node(index: i, address: NodeAddress(host: hosts[i], port: base + i), httpPort: base + 1000 + i)
        }
        secret = try ClusterSecret.generate()
        // The built-in stream's ends keep no durable state: never killed,
        // always on the majority side.
        let protected: Set<Int> = count >= 3 && exec == nil ? [count - 2, count - 1] : []
        plan = NemesisPlan(seed: seed, nodes: count, duration: duration, faults: faults, protected: protected)
        if let exec {
            checker.settings.builtInWorkload = false
            checker.applicationChecks = { [dir] events in Self.applicationChecks(exec, events, dir: dir) }
        }
    }

    /// The application's checks: its binary run with `--chaos-check` over
    /// the merged history, one JSON line per check. A binary that cannot
    /// run them fails the run, saying why.
    static func applicationChecks(
        _ exec: (path: String, arguments: [String]), _ events: [ChaosEvent], dir: String
    ) -> [ChaosChecker.Check] {
        let (input, output) = ("\(dir)/checks-input.jsonl", "\(dir)/checks-output.jsonl")
        let name = "the application's checks (\(exec.path) --chaos-check)"
        guard FileStream.write(input, events.map(\.jsonLine).joined(separator: "\n") + "\n") else {
            return [ChaosChecker.Check(name: name, findings: ["cannot write \(input)"])]
        }
        let status = LocalProcesses.run([exec.path, "--chaos-check", input], output: output)
        let lines = (FileStream.readAll(output) ?? "").split(separator: "\n")
        let checks = lines.compactMap { JSONBridge.decode(ChaosChecker.Check.self, fromJSON: String($0)) }
        guard status == 0, checks.count == lines.count else {
            return [
                ChaosChecker.Check(
                    name: name,
                    findings: [
                        "exit status \(status), \(checks.count) of \(lines.count) lines were checks; see \(output)"
                    ])
            ]
        }
        return checks
    }

    /// The first port with `count` free node ports and their HTTP ports
    /// (+1000). On separate hosts (netns) any port is free.
    static func freeBasePort(_ count: Int, hosts: [String]) throws(CLIError) -> Int {
        if hosts.first != "127.0.0.1" { return 7000 }
        var base = 7100
        while base < 9000 {
            if (base..<(base + count)).allSatisfy({
                LocalProcesses.portIsFree($0) && LocalProcesses.portIsFree($0 + 1000)
            }) {
                return base
            }
            base += count
        }
        throw .failed("no \(count) free ports between 7100 and 9000")
    }

    // MARK: - The run

    func execute() async -> ChaosChecker.Verdict {
        print(title)
        print("nodes: \(nodes.map(\.name).joined(separator: ", ")); \(network.summary)")
        print("report directory: \(dir)")
        ProcessControl.onSignals([SIGINT, SIGTERM]) { [network] _ in
            FileStream.standardError.write("\ninterrupted: stopping every node\n")
            for pid in Self.children.withLock({ $0 }) {
                kill(pid, SIGCONT)
                kill(pid, SIGKILL)
            }
            network.tearDown()
            exit(130)
        }
        defer { network.tearDown() }
        // The first seed forms the cluster 12 s after the other seeds ask
        // to join (`MembershipCore.Settings.firstSeedTimeout`).
        let startup = Duration.seconds(30)
        until = MonotonicTime.now() + UInt64((startup + duration + .seconds(5)).nanoseconds)
        for i in nodes.indices { start(i) }
        let formed = await awaitConvergence(within: startup)
        if formed == nil {
            FileStream.standardError.write("the cluster did not form within \(DurationText.format(startup))\n")
        }
        let clock = ContinuousClock()
        let origin = clock.now
        for step in plan.steps {
            await idle(until: origin + step.at, origin: origin)
            perform(step.action)
        }
        await idle(until: origin + duration, origin: origin)
        current = "healing"
        heal(final: true)
        progressDone()
        print("healed everything; waiting for the cluster to converge")
        let bound = checker.settings.convergenceBound
        healedAt = nil
        if let took = await awaitConvergence(within: bound, restarting: true) {
            record(.converged, node: "cluster", value: Int(took.nanoseconds / 1_000_000))
            print("converged \(String(format1: took.inSeconds)) s after the final heal")
        } else {
            record(.converged, node: "cluster", detail: "not within \(DurationText.format(bound)): \(laggards())")
        }
        print("waiting for the workload to finish")
        await awaitWorkloadDone()
        await stopAll()
        return report()
    }

    // MARK: - Processes

    private func start(_ i: Int) {
        let node = nodes[i]
        let seeds = nodes.prefix(3).map(\.address.description).joined(separator: ",")
        var arguments = [
            "--port", "\(node.address.port)", "--bind-host", node.address.host, "--loops", "1",
            "--seeds", seeds, "--http-port", "\(node.httpPort)", "--http-host", node.address.host,
            "--chaos-history", "\(dir)/node-\(node.address.port).history.jsonl",
            "--chaos-until", "\(until)", "--chaos-seed", "\(seed)",
        ]
        if exec == nil, nodes.count >= 3, i == nodes.count - 2 {
            arguments += ["--chaos-stream-to", nodes[nodes.count - 1].address.description]
        }
        let command =
            exec.map { [$0.path] + arguments + ($0.arguments.isEmpty ? [] : ["--"] + $0.arguments) }
            ?? [LocalProcesses.executable, "node"] + arguments
        do {
            let pid = try network.spawn(
                node: i, command, log: "\(dir)/node-\(node.address.port).log",
                environment: ["OSCAR_SECRET": secret, "OSCAR_LOG_LEVEL": "info"])
            nodes[i].pid = pid
            nodes[i].paused = false
            nodes[i].heldDown = false
            Self.children.withLock { _ = $0.insert(pid) }
            record(.start, node: node.name, pid: pid)
        } catch {
            FileStream.standardError.write("cannot start \(node.name): \(error)\n")
        }
    }

    /// Reaps children that exited and records how.
    private func reap() {
        for i in nodes.indices {
            guard let pid = nodes[i].pid, let ending = LocalProcesses.ending(of: pid) else { continue }
            nodes[i].pid = nil
            Self.children.withLock { _ = $0.remove(pid) }
            switch ending {
            case .code(let code): record(.exit, node: nodes[i].name, pid: pid, value: Int(code))
            case .signal(let signal): record(.exit, node: nodes[i].name, pid: pid, detail: "signal \(signal)")
            }
        }
    }

    private func sampleMemory() {
        for node in nodes {
            guard let pid = node.pid, let bytes = LocalProcesses.peakResidentBytes(of: pid) else { continue }
            peakRSS[pid] = (node.name, max(bytes, peakRSS[pid]?.bytes ?? 0))
        }
    }

    /// Since the last heal of the plan, until the nodes agree again.
    private var healedAt: ContinuousClock.Instant?
    private var lastAgreementCheck: ContinuousClock.Instant?

    /// Waits until `deadline`, reaping, sampling memory, measuring how long
    /// the cluster takes to converge after each heal, and showing progress.
    private func idle(until deadline: ContinuousClock.Instant, origin: ContinuousClock.Instant) async {
        let clock = ContinuousClock()
        while clock.now < deadline {
            reap()
            sampleMemory()
            if let healed = healedAt, clock.now - (lastAgreementCheck ?? healed) >= .seconds(1) {
                lastAgreementCheck = clock.now
                if agreed() {
                    record(.converged, node: "cluster", value: Int((clock.now - healed).nanoseconds / 1_000_000))
                    healedAt = nil
                }
            }
            progress(elapsed: clock.now - origin)
            try? await Task.sleep(for: min(.milliseconds(250), deadline - clock.now))  // the run's heartbeat
        }
        reap()
    }

    // MARK: - The plan's steps

    private func perform(_ action: NemesisPlan.Action) {
        switch action {
        case .kill(let i):
            nodes[i].heldDown = true
            signal(i, SIGKILL, .kill, "killed")
        case .stop(let i):
            nodes[i].heldDown = true
            signal(i, SIGTERM, .stop, "restarting")
        case .start(let i):
            reap()
            if nodes[i].pid == nil { start(i) }
            current = "calm"
        case .pause(let i):
            guard nodes[i].pid != nil else { return }
            nodes[i].paused = true
            signal(i, SIGSTOP, .pause, "paused")
        case .resume(let i):
            guard nodes[i].paused else { return }
            nodes[i].paused = false
            signal(i, SIGCONT, .resume, "resumed")
            current = "calm"
        case .partition(let groups):
            let names = groups.map { g in "{" + g.map { "\(nodes[$0].address.port)" }.joined(separator: ",") + "}" }
            let detail = "partition " + names.joined(separator: " | ")
            record(.fault, node: "cluster", detail: detail)
            if !network.partition(groups) {
                for group in groups {
                    let others = nodes.indices.filter { !group.contains($0) }.map { nodes[$0].name }
                    for i in group { command(i, .blackhole(peers: others, direction: .both)) }
                }
            }
            current = detail
        case .delay(let millis, let jitter):
            let detail = "delay \(millis)±\(jitter) ms"
            record(.fault, node: "cluster", detail: detail)
            for i in nodes.indices {
                if !network.delay(node: i, millis: millis, jitterMillis: jitter) {
                    command(i, .delay(millis: millis, jitterMillis: jitter, peers: nodes.map(\.name)))
                }
            }
            current = detail
        case .loss(let fraction):
            let detail = "loss \(Int(fraction * 100))%"
            record(.fault, node: "cluster", detail: detail)
            for i in nodes.indices {
                if !network.loss(node: i, fraction: fraction) {
                    command(i, .loss(fraction: fraction, peers: nodes.map(\.name), seed: seed &+ UInt64(i)))
                }
            }
            current = detail
        case .heal:
            heal(final: false)
            current = "calm"
        }
        switch action {
        case .heal, .start, .resume: break
        default:
            faultsSoFar += 1
            healedAt = nil  // a new fault before the cluster settled: that heal is not measured
        }
    }

    /// Sends `signal` to node `i`'s process, if it runs, and records `kind`.
    private func signal(_ i: Int, _ signal: Int32, _ kind: ChaosEvent.Kind, _ doing: String) {
        guard let pid = nodes[i].pid else { return }
        kill(pid, signal)
        record(kind, node: nodes[i].name, pid: pid)
        current = "\(doing) \(nodes[i].name)"
    }

    /// Lifts every network fault, resumes paused nodes and (as a supervisor
    /// would) starts nodes that exited on their own, such as a minority that
    /// downed itself; at the end (`final`), every node.
    private func heal(final: Bool) {
        reap()
        network.heal()
        for i in nodes.indices {
            if nodes[i].paused {
                nodes[i].paused = false
                signal(i, SIGCONT, .resume, "resumed")
            }
            if nodes[i].pid != nil { command(i, .heal) }
        }
        record(.heal, node: "cluster")
        healedAt = ContinuousClock().now
        lastAgreementCheck = nil
        startExited(includingHeldDown: final)
    }

    /// Starts the nodes whose process has exited, as a supervisor would;
    /// those the plan stopped only with `includingHeldDown`.
    private func startExited(includingHeldDown: Bool) {
        for i in nodes.indices where nodes[i].pid == nil && (includingHeldDown || !nodes[i].heldDown) { start(i) }
    }

    /// Sends a fault command to node `i`'s management endpoint, signed with
    /// the cluster secret. A node that does not answer is reported, not fatal.
    private func command(_ i: Int, _ command: FaultCommand) {
        guard nodes[i].pid != nil, !nodes[i].paused else { return }
        let body = Self.json(command)
        let target = NodeAddress(host: nodes[i].address.host, port: nodes[i].httpPort)
        do {
            let response = try ManagementCommands.signedRequest(
                "POST", "/faults", body: body, secret: secret, from: target)
            if !response.hasPrefix("HTTP/1.1 200") {
                FileStream.standardError.write("\n\(nodes[i].name) refused \(body): \(response.prefix(80))\n")
            }
        } catch {
            FileStream.standardError.write("\n\(nodes[i].name) did not take \(body): \(error)\n")
        }
    }

    static func json(_ command: FaultCommand) -> String { JSONBridge.json(encoding: command) ?? "{}" }

    // MARK: - Convergence and the end

    /// Waits until every running node sees exactly the running nodes, all
    /// up and reachable; how long that took, or nil after `bound`.
    ///
    /// With `restarting`, a node that exits meanwhile is started again, as
    /// its supervisor would start it: after the final heal, a cluster whose
    /// every side downed itself (DOWNING.md, "What it costs") recovers only
    /// through restarts, and nodes that had just rejoined it stay joining
    /// until the new incarnations of its members replace the old ones.
    private func awaitConvergence(within bound: Duration, restarting: Bool = false) async -> Duration? {
        let clock = ContinuousClock()
        let start = clock.now
        while clock.now - start < bound {
            reap()
            if restarting { startExited(includingHeldDown: true) }
            sampleMemory()
            if agreed() { return clock.now - start }
            try? await Task.sleep(for: .milliseconds(200))  // the next poll
        }
        return nil
    }

    private func views() -> [(Node, [String]?)] {
        nodes.filter { $0.pid != nil }.map { node in
            let target = NodeAddress(host: node.address.host, port: node.httpPort)
            // Signed: under --netns the endpoints listen beyond loopback.
            guard let response = try? ManagementCommands.signedRequest("GET", "/members", secret: secret, from: target),
                let body = response.split(separator: "\r\n\r\n", maxSplits: 1).last,
                let view = JSONBridge.decode(MembersView.self, fromJSON: String(body))
            else { return (node, nil) }
            return (node, view.members.filter { $0.status == "up" && $0.reachable }.map(\.address).sorted())
        }
    }

    /// `GET /members`, as far as convergence needs it.
    struct MembersView: Codable {
        struct Member: Codable {
            var address: String
            var status: String
            var reachable: Bool
        }
        var members: [Member]
    }

    private func agreed() -> Bool {
        let running = nodes.filter { $0.pid != nil }.map(\.name).sorted()
        return !running.isEmpty && views().allSatisfy { $0.1 == running }
    }

    private func laggards() -> String {
        let running = nodes.filter { $0.pid != nil }.map(\.name).sorted()
        return views().filter { $0.1 != running }.map { node, view in
            "\(node.name) sees \(view.map { "{\($0.joined(separator: ", "))} up" } ?? "nothing (no answer)")"
        }.joined(separator: "; ")
    }

    /// Every running node recorded `workload-done` (bounded).
    private func awaitWorkloadDone() async {
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(45)
        while clock.now < deadline {
            reap()
            sampleMemory()
            let done = nodes.filter { $0.pid != nil }.allSatisfy { node in
                let text = FileStream.readAll("\(dir)/node-\(node.address.port).history.jsonl") ?? ""
                let tail = text.components(separatedBy: "\"kind\":\"node-start\"").last ?? ""
                return tail.contains("\"kind\":\"workload-done\"")
            }
            if done { return }
            try? await Task.sleep(for: .milliseconds(250))  // the next look
        }
        FileStream.standardError.write("some nodes did not finish their workload in time\n")
    }

    /// SIGTERM (graceful leave) to every node; SIGKILL after 15 s.
    private func stopAll() async {
        for node in nodes {
            guard let pid = node.pid else { continue }
            if node.paused { kill(pid, SIGCONT) }
            kill(pid, SIGTERM)
        }
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(15)
        while clock.now < deadline, nodes.contains(where: { $0.pid != nil }) {
            reap()
            try? await Task.sleep(for: .milliseconds(50))  // the next check
        }
        for node in nodes {
            guard let pid = node.pid else { continue }
            record(.kill, node: node.name, pid: pid, detail: "still running 15 s after SIGTERM")
            kill(pid, SIGKILL)
        }
        while nodes.contains(where: { $0.pid != nil }) {
            reap()
            try? await Task.sleep(for: .milliseconds(20))  // killed: gone at once
        }
        for (pid, peak) in peakRSS.sorted(by: { $0.key < $1.key }) {
            record(.rss, node: peak.node, pid: pid, value: peak.bytes)
        }
    }

    private func report() -> ChaosChecker.Verdict {
        var events: [ChaosEvent] = []
        var skipped = 0
        for name in FileStream.names(in: dir) where name.hasSuffix(".history.jsonl") {
            let parsed = ChaosEvent.parse(FileStream.readAll("\(dir)/\(name)") ?? "")
            events += parsed.events
            skipped += parsed.skipped
        }
        events.sort { $0.t < $1.t }
        _ = FileStream.write("\(dir)/history.jsonl", events.map(\.jsonLine).joined(separator: "\n") + "\n")
        let verdict = checker.check(events)
        var text = ChaosReport.text(verdict, title: title, convergenceBound: checker.settings.convergenceBound)
        if skipped > 0 { text += "(\(skipped) history lines cut short by kills were skipped)\n" }
        text += "history: \(dir)/history.jsonl · timeline: \(dir)/timeline.svg · page: \(dir)/report.html\n"
        _ = FileStream.write("\(dir)/report.txt", text)
        let timeline = ChaosReport.svg(events, nodes: nodes.map(\.name))
        _ = FileStream.write("\(dir)/timeline.svg", timeline)
        let plots = ChaosReport.kindPlots(events)
        for plot in plots {
            _ = FileStream.write("\(dir)/\(plot.latencyFile)", plot.latency)
            _ = FileStream.write("\(dir)/\(plot.rateFile)", plot.rate)
        }
        _ = FileStream.write(
            "\(dir)/report.html",
            ChaosReport.html(title: title, verdict: verdict, summary: text, timeline: timeline, plots: plots))
        print("")
        print(text, terminator: "")
        return verdict
    }

    // MARK: - Recording and progress

    private func record(
        _ kind: ChaosEvent.Kind, node: String, pid: Int32? = nil, value: Int? = nil, detail: String? = nil
    ) {
        history.write(ChaosEvent(node: node, kind: kind, pid: pid, value: value, detail: detail).jsonLine + "\n")
    }

    private let interactive = isatty(2) != 0
    private var lastProgress = -1

    private func progress(elapsed: Duration) {
        let seconds = Int(elapsed.inSeconds)
        let live = nodes.filter { $0.pid != nil && !$0.paused }.count
        let line =
            "chaos \(seconds)/\(Int(duration.inSeconds)) s · nodes running \(live)/\(nodes.count) · faults \(faultsSoFar) · now: \(current)"
        if interactive {
            FileStream.standardError.write("\r\u{1B}[K" + line)
        } else if seconds / 10 != lastProgress / 10 {
            FileStream.standardError.write(line + "\n")
        }
        lastProgress = seconds
    }

    private func progressDone() { if interactive { FileStream.standardError.write("\n") } }
}
