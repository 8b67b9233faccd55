import Glibc
import Oscar
import OscarDemo
import OscarTestKit

/// `oscar cluster up|status|down|logs|add|kill`: a local cluster of real node
/// processes, kept in a directory (pid and port of each node, one log each,
/// and the cluster secret in `DIR/secret`, mode 0600, which the other
/// subcommands and `--dir` of any command read).
enum ClusterCommand {
    /// What `cluster up` started, in `DIR/cluster.json`. With supervision
    /// (the default) a node's pid is its supervisor's; the node's own pid
    /// and restart count are in `DIR/node-PORT.supervisor.json`.
    struct State: Codable {
        struct Node: Codable {
            var port: Int
            var pid: Int32
            var httpPort: Int?
        }
        var host: String
        var httpBasePort: Int?
        /// Nil in a directory written before supervision: not supervised.
        var supervised: Bool?
        var nodes: [Node]
        /// The application's node binary (`--exec`), and the arguments it is
        /// given after the node settings; nil: `oscar node` and its demo actors.
        var exec: String?
        var execArguments: [String]?
        /// Started with `--tls`: the nodes and the CLI present certificates
        /// from `DIR/tls` (nil in a directory written before TLS: false).
        var tls: Bool?

        func address(_ node: Node) -> NodeAddress { NodeAddress(host: host, port: node.port) }
    }

    static let usage = "usage: oscar cluster up|status|down|logs|add|kill [options]; see 'oscar help'"

    static func run(_ args: inout Arguments) async throws(CLIError) {
        guard let sub = args.positionals.first else { throw .usage(usage) }
        // A cluster file: every option of `up`; the other commands want its dir.
        let file = try args.option("file").map { (path) throws(CLIError) in try ClusterFile.read(path) }
        if sub == "up", let file { args.fillIn(from: file) }
        let dir = args.option("dir") ?? file?.directory ?? ".oscar/cluster"
        switch sub {
        case "up": try await up(&args, dir: dir, fileArguments: file?.arguments ?? [])
        case "status": try await status(&args, dir: dir)
        case "down": try await down(&args, dir: dir)
        case "logs": try await logs(&args, dir: dir)
        case "add": try await add(&args, dir: dir)
        case "kill": try await killNode(&args, dir: dir)
        default: throw .usage("unknown cluster command '\(sub)'; \(usage)")
        }
    }

    // MARK: - up / add

    /// The most nodes `up` starts: 128 converge in 7.5 s and idle at 0.42
    /// cores on the 2-core machine; 256 did not converge within a minute
    /// (docs/ARCHITECTURE.md, "Scale").
    static let maxNodes = 128

    static func up(_ args: inout Arguments, dir: String, fileArguments: [String]) async throws(CLIError) {
        let count = try args.int("nodes", default: 3, range: 1...maxNodes)
        let basePort = try args.int("base-port", default: 7000, range: 1...65535 - maxNodes)
        let httpBase = try args.option("http-base-port").map { (text) throws(CLIError) in
            guard let n = Int(text), (1...65535 - maxNodes).contains(n) else {
                throw .usage("--http-base-port must be a port number, not '\(text)'")
            }
            return n
        }
        let timeout = try NetworkCommands.duration(args.option("timeout") ?? "30s", option: "timeout")
        let supervised = !args.has("no-supervise")
        let tls = args.has("tls")
        let exec = try args.option("exec").map(executablePath)
        // After `--`: the application's own arguments (else the cluster file's).
        let typed = Array(args.positionals.dropFirst())
        let execArguments = typed.isEmpty ? fileArguments : typed
        if exec == nil, !execArguments.isEmpty {
            throw .usage("unexpected arguments \(execArguments); an application's own go after --exec PATH --")
        }
        // A secret given (flag, then environment) is the cluster's; else a new random one.
        var given = try ClusterSecret.fromFlags(&args)
        if given == nil { given = try ClusterSecret.fromEnvironment() }
        try args.rejectUnknownOptions()
        if let existing = readState(dir), existing.nodes.contains(where: { isRunning($0) }) {
            throw .failed("a cluster is already running in \(dir); run 'oscar cluster down' first")
        }
        // Ports taken by something else fail now, naming them, not after
        // --timeout with nodes restarting on "address in use".
        let ports = Array(basePort..<basePort + count) + (httpBase.map { Array($0..<$0 + count) } ?? [])
        let taken = ports.filter { !LocalProcesses.portIsFree($0) }
        if !taken.isEmpty {
            throw .failed(
                "port\(taken.count == 1 ? "" : "s") \(taken.map(String.init).joined(separator: ", ")) on 127.0.0.1 "
                    + "already in use; choose another --base-port (or --http-base-port)")
        }
        try makeDirectory(dir)
        // A new cluster's files: no log, kill marker or supervisor state of
        // an earlier cluster in this directory is read as this one's.
        for port in basePort..<basePort + count {
            for file in [logPath(dir, port), killedPath(dir, port), supervisorPath(dir, port)] { unlink(file) }
        }
        let secretFile = ClusterSecret.file(inClusterDirectory: dir)
        let secret: String
        if let given { secret = given } else { secret = try ClusterSecret.generate() }
        try ClusterSecret.write(secret, to: secretFile)
        if given == nil {
            print("a new random cluster secret is in \(secretFile); commands given --dir \(dir) use it")
        }
        var state = State(
            host: "127.0.0.1", httpBasePort: httpBase, supervised: supervised, nodes: [], exec: exec,
            execArguments: execArguments, tls: tls)
        if tls { try ClusterTLS.create(inClusterDirectory: dir, host: state.host) }
        let seed = NodeAddress(host: state.host, port: basePort)
        for i in 0..<count {
            let port = basePort + i
            state.nodes.append(
                try start(port: port, seeds: i == 0 ? [] : [seed], state: state, dir: dir))
            try writeState(state, dir)
        }
        print(
            "started \(count) node\(count == 1 ? "" : "s") on ports \(basePort)...\(basePort + count - 1); logs in \(dir)"
        )
        if let httpBase {
            let scheme = tls ? "https" : "http"
            print("management: \(scheme)://127.0.0.1:\(httpBase)...\(httpBase + count - 1) (node N on the Nth port)")
        }
        try await awaitConvergence(state, dir: dir, timeout: timeout)
    }

    static func add(_ args: inout Arguments, dir: String) async throws(CLIError) {
        let timeout = try NetworkCommands.duration(args.option("timeout") ?? "30s", option: "timeout")
        try args.rejectUnknownOptions()
        var state = try existingState(dir)
        let alive = state.nodes.filter(isRunning)
        guard !alive.isEmpty else {
            throw .failed("no node of the cluster in \(dir) is running; use 'oscar cluster up'")
        }
        let port = (state.nodes.map(\.port).max() ?? 7000) + 1
        let node = try start(port: port, seeds: alive.map(state.address), state: state, dir: dir)
        state.nodes.append(node)
        try writeState(state, dir)
        print("started \(state.host):\(port) (pid \(node.pid)), joining through \(state.address(alive[0]))")
        try await awaitConvergence(state, dir: dir, timeout: timeout)
    }

    static func start(port: Int, seeds: [NodeAddress], state: State, dir: String) throws(CLIError) -> State.Node {
        let httpPort = state.httpBasePort.map { $0 + (port - (state.nodes.first?.port ?? port)) }
        var arguments = ["--port", "\(port)", "--bind-host", state.host, "--loops", "1"]
        if !seeds.isEmpty { arguments += ["--seeds", seeds.map(\.description).joined(separator: ",")] }
        if let httpPort { arguments += ["--http-port", "\(httpPort)"] }
        if state.tls == true {
            arguments += try ClusterTLS.nodeArguments(inClusterDirectory: dir, port: port, host: state.host)
        }
        let own = state.execArguments.map { $0.isEmpty ? [] : ["--"] + $0 } ?? []
        let command: [String]
        if state.supervised == true {
            // `oscar node --supervise` runs the node (or --exec's program) as its child.
            command =
                [LocalProcesses.executable, "node"] + arguments
                + ["--supervise", "--state-file", supervisorPath(dir, port)]
                + (state.exec.map { ["--exec", $0] } ?? []) + own
        } else {
            command = (state.exec.map { [$0] } ?? [LocalProcesses.executable, "node"]) + arguments + own
        }
        // The secret by file, so it is in no process's environment or arguments.
        let pid = try LocalProcesses.spawnDetached(
            command, log: logPath(dir, port),
            extraEnvironment: ["OSCAR_SECRET_FILE": absolute(ClusterSecret.file(inClusterDirectory: dir))],
            removing: ["OSCAR_SECRET"])
        return State.Node(port: port, pid: pid, httpPort: httpPort)
    }

    /// `path` made absolute (the nodes run from elsewhere), if it names an
    /// executable file.
    static func executablePath(_ path: String) throws(CLIError) -> String {
        let absolute = absolute(path)
        guard access(absolute, X_OK) == 0 else {
            throw .usage("--exec \(path): not an executable file (\(String(cString: strerror(errno))))")
        }
        return absolute
    }

    /// Waits until every running node sees every running node up and
    /// reachable, showing progress; fails naming the node that died or did
    /// not come up. A member whose process is gone (`cluster kill`) may still
    /// be in the views until the failure detector and downing remove it: the
    /// table shows it, and a line after it says so.
    static func awaitConvergence(_ state: State, dir: String, timeout: Duration) async throws(CLIError) {
        let client = try Client(dir: dir)
        defer { client.node.shutdown() }
        let clock = ContinuousClock()
        let start = clock.now
        var lastLine = ""
        // Nodes started a moment ago count by their pid alone: a process
        // just spawned can show no command line yet (which `isRunning`
        // reads), and the wait declared a live node dead, or converged
        // without it.
        let alive = { (node: State.Node) in LocalProcesses.isAlive(pid: node.pid) }
        while true {
            let running = state.nodes.filter(alive)
            let runningPorts = Set(running.map(\.port))
            if let dead = state.nodes.first(where: { !alive($0) && !wasKilled($0, dir) }) {
                throw .failed(
                    "node \(state.address(dead)) exited; the end of its log (\(logPath(dir, dead.port))):\n"
                        + tail(logPath(dir, dead.port), lines: 8))
            }
            var upEverywhere = 0
            var laggard: State.Node?
            var firstView: MembershipSnapshot?
            for node in running {
                let view = try? await client.node.membership(of: state.address(node), timeout: .seconds(1))
                if firstView == nil { firstView = view }
                let up =
                    view.map { v in
                        v.members.filter {
                            $0.status == .up && !v.unreachable.contains($0.uid) && runningPorts.contains($0.node.port)
                        }.count
                    } ?? 0
                if up == running.count { upEverywhere += 1 } else if laggard == nil { laggard = node }
            }
            let elapsed = (clock.now - start).inSeconds
            let line = "… \(upEverywhere)/\(running.count) nodes see the whole cluster up"
            if line != lastLine {
                FileStream.standardError.write("\(line) (\(Int(elapsed)) s)\n")
                lastLine = line
            }
            // The first node's view, already read this round, is the table.
            if upEverywhere == running.count, let view = firstView {
                print(MembersTable.text(view))
                for member in view.members where !runningPorts.contains(member.node.port) {
                    print(
                        "\(member.node) is no longer running; the cluster downs and removes it within about 16 s "
                            + "of its end")
                }
                print("cluster converged in \(String(format1: elapsed)) s")
                return
            }
            if clock.now - start > timeout {
                let who = laggard.map { "node \(state.address($0)) does not see every node up" } ?? "no node answered"
                throw .failed("the cluster did not converge within \(DurationText.format(timeout)): \(who); see \(dir)")
            }
            try? await Task.sleep(for: .milliseconds(200))  // the next poll
        }
    }

    // MARK: - status / down / kill / logs

    static func status(_ args: inout Arguments, dir: String) async throws(CLIError) {
        try args.rejectUnknownOptions()
        let state = try existingState(dir)
        let running = state.nodes.filter(isRunning)
        let gone = state.nodes.filter { !isRunning($0) }
        if let first = running.first {
            let client = try Client(dir: dir)
            defer { client.node.shutdown() }
            do {
                let view = try await client.node.membership(of: state.address(first), timeout: .seconds(3))
                print(withRestarts(MembersTable.text(view), restarts(state, dir)))
            } catch {
                print("\(state.address(first)) did not answer: \(error)")
            }
        } else {
            print("no node of the cluster in \(dir) is running")
        }
        for node in gone {
            print("gone: \(state.address(node)) (pid \(node.pid) is not running; log \(logPath(dir, node.port)))")
        }
    }

    static func down(_ args: inout Arguments, dir: String) async throws(CLIError) {
        let grace = try NetworkCommands.duration(args.option("grace") ?? "15s", option: "grace")
        try args.rejectUnknownOptions()
        guard let state = readState(dir) else {
            print("no cluster in \(dir); nothing to stop")
            return
        }
        let running = state.nodes.filter(isRunning)
        // SIGTERM is a graceful leave for `oscar node`.
        for node in running { LocalProcesses.signal(node.pid, SIGTERM) }
        let clock = ContinuousClock()
        let deadline = clock.now + grace
        while clock.now < deadline, running.contains(where: isRunning) {
            LocalProcesses.reapChildren()
            try? await Task.sleep(for: .milliseconds(50))  // the next check
        }
        let stragglers = running.filter(isRunning)
        for node in stragglers { LocalProcesses.signal(node.pid, SIGKILL) }
        let killDeadline = clock.now + .seconds(5)
        while clock.now < killDeadline, stragglers.contains(where: isRunning) {
            LocalProcesses.reapChildren()
            try? await Task.sleep(for: .milliseconds(20))  // the next check
        }
        unlink(statePath(dir))
        unlink(ClusterSecret.file(inClusterDirectory: dir))
        for node in state.nodes { unlink(supervisorPath(dir, node.port)) }
        print(
            "stopped \(running.count) node\(running.count == 1 ? "" : "s")"
                + (stragglers.isEmpty
                    ? "; every one left gracefully"
                    : "; \(stragglers.count) killed after \(DurationText.format(grace))"))
        if stragglers.contains(where: isRunning) { throw .failed("some nodes are still running") }
    }

    /// SIGKILL (or with `--graceful` SIGTERM) to the node's process, which
    /// under supervision is its supervisor: the node dies with it (its
    /// parent-death signal) or leaves when it forwards SIGTERM. `--crash`
    /// kills the node alone, as a trap would, and its supervisor restarts it.
    static func killNode(_ args: inout Arguments, dir: String) async throws(CLIError) {
        let graceful = args.has("graceful")
        let crash = args.has("crash")
        guard args.positionals.count == 2, !(graceful && crash) else {
            throw .usage("usage: oscar cluster kill PORT [--graceful | --crash]")
        }
        try args.rejectUnknownOptions()
        let state = try existingState(dir)
        let node = try find(args.positionals[1], in: state)
        guard isRunning(node) else { throw .failed("\(state.address(node)) is not running") }
        let child = NodeSupervisor.readState(supervisorPath(dir, node.port)).flatMap { $0.pid > 0 ? $0.pid : nil }
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(15)
        if crash {
            guard state.supervised == true else {
                throw .failed("\(state.address(node)) is not supervised: --crash needs a supervisor to restart it")
            }
            guard let child else {
                throw .failed(
                    "\(state.address(node)) has no node process right now: its supervisor is waiting to restart it (see its log)"
                )
            }
            LocalProcesses.signal(child, SIGKILL)
            while clock.now < deadline, LocalProcesses.isNode(pid: child, port: node.port) {
                try? await Task.sleep(for: .milliseconds(20))  // the next check
            }
            print(
                "crashed \(state.address(node)) (node pid \(child)); its supervisor restarts it unless that makes too many crashes in its window (see its log)"
            )
            return
        }
        LocalProcesses.signal(node.pid, graceful ? SIGTERM : SIGKILL)
        try makeDirectory(dir)
        _ = FileStream.append(killedPath(dir, node.port), "\(node.pid)\n")
        while clock.now < deadline,
            isRunning(node) || child.map({ LocalProcesses.isNode(pid: $0, port: node.port) }) == true
        {
            LocalProcesses.reapChildren()
            try? await Task.sleep(for: .milliseconds(20))  // the next check
        }
        print("\(graceful ? "stopped" : "killed") \(state.address(node)) (pid \(node.pid))")
    }

    static func logs(_ args: inout Arguments, dir: String) async throws(CLIError) {
        let lines = try args.int("lines", default: 20, range: 1...100_000)
        let follow = args.has("follow")
        try args.rejectUnknownOptions()
        let state = try existingState(dir)
        let nodes = try args.positionals.count > 1 ? [find(args.positionals[1], in: state)] : state.nodes
        for node in nodes {
            if nodes.count > 1 { print("== \(state.address(node)): \(logPath(dir, node.port)) ==") }
            print(tail(logPath(dir, node.port), lines: lines), terminator: "")
        }
        guard follow else { return }
        var offsets = nodes.map { (FileStream.readAll(logPath(dir, $0.port)) ?? "").utf8.count }
        while true {
            for (i, node) in nodes.enumerated() {
                let text = FileStream.readAll(logPath(dir, node.port)) ?? ""
                let bytes = Array(text.utf8)
                if bytes.count > offsets[i] {
                    print(String(decoding: bytes[offsets[i]...], as: UTF8.self), terminator: "")
                    offsets[i] = bytes.count
                }
            }
            try? await Task.sleep(for: .milliseconds(200))  // poll the files for new lines
        }
    }

    // MARK: - Helpers

    /// A silent, one-loop client node to read the nodes' membership, with
    /// the secret of the cluster in `dir`.
    struct Client {
        let node: ClusterNode
        init(dir: String) throws(CLIError) {
            let secret = try ClusterSecret.read(
                file: ClusterSecret.file(inClusterDirectory: dir), from: "the cluster directory")
            OscarLog.shared.level = .off
            node = try ClusterTLS.clientNode(secret: secret, tls: ClusterTLS.cli(inClusterDirectory: dir))
        }
    }

    static func find(_ text: String, in state: State) throws(CLIError) -> State.Node {
        let port = Int(text) ?? NodeAddress(hostPort: text)?.port
        guard let port, let node = state.nodes.first(where: { $0.port == port }) else {
            throw .usage(
                "no node '\(text)' in this cluster; nodes: \(state.nodes.map { "\($0.port)" }.joined(separator: ", "))")
        }
        return node
    }

    static func isRunning(_ node: State.Node) -> Bool { LocalProcesses.isNode(pid: node.pid, port: node.port) }

    /// Killed on purpose with `cluster kill` (not a failure to start).
    static func wasKilled(_ node: State.Node, _ dir: String) -> Bool {
        (FileStream.readAll(killedPath(dir, node.port)) ?? "").split(separator: "\n").contains("\(node.pid)")
    }

    static func statePath(_ dir: String) -> String { "\(dir)/cluster.json" }
    static func logPath(_ dir: String, _ port: Int) -> String { "\(dir)/node-\(port).log" }
    static func killedPath(_ dir: String, _ port: Int) -> String { "\(dir)/node-\(port).killed" }
    static func supervisorPath(_ dir: String, _ port: Int) -> String { "\(dir)/node-\(port).supervisor.json" }

    /// `path` from the root, so a child started elsewhere finds it too.
    static func absolute(_ path: String) -> String {
        guard !path.hasPrefix("/"), let cwd = getcwd(nil, 0) else { return path }
        defer { free(cwd) }
        return String(cString: cwd) + "/" + path
    }

    /// Each supervised node's restart count, by address ("-": not supervised).
    static func restarts(_ state: State, _ dir: String) -> [String: String] {
        var out: [String: String] = [:]
        for node in state.nodes {
            out[state.address(node).description] =
                NodeSupervisor.readState(supervisorPath(dir, node.port)).map { "\($0.restarts)" } ?? "-"
        }
        return out
    }

    /// The member table with a RESTARTS column from `restarts`.
    static func withRestarts(_ table: String, _ restarts: [String: String]) -> String {
        var lines = table.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard let header = lines.firstIndex(where: { $0.hasPrefix("ADDRESS") }) else { return table }
        let width = lines[header...].map(\.count).max() ?? 0
        for i in lines.indices[header...] {
            let address = String(lines[i].prefix { $0 != " " })
            let cell = i == header ? "RESTARTS" : (restarts[address] ?? "-")
            lines[i] += String(repeating: " ", count: width + 2 - lines[i].count) + cell
        }
        return lines.joined(separator: "\n")
    }

    static func existingState(_ dir: String) throws(CLIError) -> State {
        guard let state = readState(dir) else {
            throw .failed("no cluster in \(dir); start one with 'oscar cluster up'")
        }
        return state
    }

    static func readState(_ dir: String) -> State? {
        FileStream.readAll(statePath(dir)).flatMap { JSONBridge.decode(State.self, fromJSON: $0) }
    }

    static func writeState(_ state: State, _ dir: String) throws(CLIError) {
        guard let json = JSONBridge.json(encoding: state) else { throw .failed("cannot encode the cluster state") }
        try FileStream.replace(statePath(dir), with: json + "\n", mode: 0o600)
    }

    static func makeDirectory(_ dir: String) throws(CLIError) {
        var path = ""
        for part in dir.split(separator: "/", omittingEmptySubsequences: false) {
            path += path.isEmpty && part.isEmpty ? "/" : (path.isEmpty || path == "/" ? "" : "/") + part
            if !part.isEmpty, mkdir(path, 0o755) != 0, errno != EEXIST {
                throw .failed("cannot create \(path): \(String(cString: strerror(errno)))")
            }
        }
    }

    static func tail(_ path: String, lines: Int) -> String {
        let all = (FileStream.readAll(path) ?? "").split(separator: "\n", omittingEmptySubsequences: false)
        let trimmed = all.last == "" ? all.dropLast() : all[...]
        return trimmed.suffix(lines).map { $0 + "\n" }.joined()
    }
}
