import Dispatch
import Glibc
import Oscar
import OscarDemo
import OscarTestKit
import Synchronization

/// `oscar node --supervise`: keeps the node running as a child process.
///
/// A node that crashes (exits non-zero, or is ended by a signal such as the
/// SIGILL of a Swift trap) is started again after a backoff that doubles from
/// `firstDelay` to `maxDelay`, as a new incarnation (a node draws a new uid
/// at every start). A clean exit is not a crash: exit 0 means the node chose
/// to stop (a signal's graceful leave, or the cluster removed it), and exit
/// 64 means its arguments are wrong, which a restart cannot mend. More than
/// `maxRestarts` crashes within `window` and the supervisor gives up (exit
/// 1), so a node that cannot start does not flap for ever.
///
/// SIGINT, SIGTERM and SIGHUP are forwarded to the node, which leaves the
/// cluster gracefully; then the supervisor exits with the node's status.
/// SIGUSR1 is forwarded too (the node reloads its TLS files) and the
/// supervisor keeps running. The
/// node is killed if the supervisor dies (its parent-death signal), so it
/// never runs on unsupervised. The node learns its restart count from
/// `OSCAR_RESTARTS` and reports it in `/metrics`.
enum NodeSupervisor {
    struct Policy {
        var maxRestarts = 5
        var window = Duration.seconds(60)
        var firstDelay = Duration.seconds(1)
        var maxDelay = Duration.seconds(30)
        /// Where the node's pid and restart count are kept, for `oscar
        /// cluster status` and scripts.
        var stateFile: String?
        /// The program to supervise instead of `oscar node`: an
        /// application's own node binary (`oscar cluster up --exec`).
        var exec: String?
    }

    /// The options that belong to the supervisor, not to the node.
    static let ownOptions = ["max-restarts", "restart-window", "state-file", "exec"]
    static let ownSwitches = ["supervise"]

    /// The supervisor's options from `args`; nil without `--supervise`
    /// (then none of them may be given).
    static func policy(_ args: inout Arguments) throws(CLIError) -> Policy? {
        let given = ownOptions.compactMap { name in args.option(name).map { (name, $0) } }
        guard args.has("supervise") else {
            if let (name, _) = given.first { throw .usage("--\(name) goes with --supervise") }
            return nil
        }
        var policy = Policy()
        for (name, text) in given {
            switch name {
            case "max-restarts":
                guard let n = Int(text), (1...10_000).contains(n) else {
                    throw .usage("--max-restarts must be a whole number in 1...10000, not '\(text)'")
                }
                policy.maxRestarts = n
            case "restart-window": policy.window = try NetworkCommands.duration(text, option: name)
            case "exec": policy.exec = text
            default: policy.stateFile = text
            }
        }
        return policy
    }

    /// The command that runs the node: `oscar node`, or the program of
    /// `--exec`, with our arguments less the supervisor's own options.
    static func childCommand(_ raw: [String], policy: Policy) -> [String] {
        (policy.exec.map { [$0] } ?? [LocalProcesses.executable, "node"]) + childArguments(raw)
    }

    /// The node's command line: ours without the supervisor's own options.
    static func childArguments(_ raw: [String]) -> [String] {
        var out: [String] = []
        var rest = raw[...]
        while let arg = rest.popFirst() {
            let name = arg.hasPrefix("--") ? String(arg.dropFirst(2).prefix { $0 != "=" }) : ""
            if ownSwitches.contains(name) { continue }
            if ownOptions.contains(name) {
                if !arg.contains("=") { _ = rest.popFirst() }
                continue
            }
            out.append(arg)
        }
        return out
    }

    // MARK: - Running

    /// The signal that asked us to stop (0: none yet), the running child
    /// (0: none), and the pipe whose write end wakes a backoff wait.
    private static let stopSignal = Atomic<Int32>(0)
    private static let child = Atomic<Int32>(0)
    private static let wakeWrite = Atomic<Int32>(-1)

    /// Supervises `command` (a program and its arguments) until it stops or the
    /// supervisor gives up; returns the exit status for this process.
    static func run(_ command: [String], policy: Policy) async -> Int32 {
        Glibc.signal(SIGPIPE, SIG_IGN)  // our own output may be a closed pipe; that is no reason to die
        let wake: (read: Int32, write: Int32)
        do {
            wake = try LocalProcesses.makePipe()
        } catch {
            say("\(error)")
            return 1
        }
        wakeWrite.store(wake.write, ordering: .sequentiallyConsistent)
        ProcessControl.onSignals([SIGINT, SIGTERM, SIGHUP]) { signal in
            stopSignal.store(signal, ordering: .sequentiallyConsistent)
            let pid = child.load(ordering: .sequentiallyConsistent)
            if pid > 0 { kill(pid, signal) }
            var byte: UInt8 = 1
            _ = write(wakeWrite.load(ordering: .sequentiallyConsistent), &byte, 1)
        }
        ProcessControl.onSignals([SIGUSR1]) { signal in
            let pid = child.load(ordering: .sequentiallyConsistent)
            if pid > 0 { kill(pid, signal) }
        }
        return await withCheckedContinuation { continuation in
            ProcessControl.onOwnThread {
                continuation.resume(returning: loop(command, policy: policy, wake: wake.read))
            }
        }
    }

    /// Starts, watches and restarts the node; on the supervisor's own thread.
    private static func loop(_ command: [String], policy: Policy, wake: Int32) -> Int32 {
        let clock = ContinuousClock()
        let origin = clock.now
        var restarts = 0
        // The same decision as an actor's `.restart` supervision: backoff
        // doubling within the window, give up past the limit.
        var supervisor = Supervisor(
            .restart(
                maxRestarts: policy.maxRestarts, within: policy.window, backoff: policy.firstDelay,
                maxBackoff: policy.maxDelay))
        var environment = ProcessControl.environment
        environment["OSCAR_SUPERVISOR_PID"] = "\(getpid())"
        while true {
            if stopping { return 0 }
            environment["OSCAR_RESTARTS"] = "\(restarts)"
            let started = clock.now
            let ending: LocalProcesses.Ending
            let tail: [String]
            do {
                (ending, tail) = try runOnce(command, environment: environment, restarts: restarts, policy: policy)
            } catch {
                say("cannot start the node: \(error); giving up")
                return 1
            }
            let ran = clock.now - started
            let stop = stopSignal.load(ordering: .sequentiallyConsistent)
            if stop != 0 {
                say("the node \(describe(ending)) after \(ProcessControl.signalName(stop)); stopping")
                return status(ending)
            }
            switch ending {
            case .code(0):
                say("the node exited cleanly (exit 0); not restarting")
                return 0
            case .code(64):
                say("the node refused its arguments (exit 64); a restart cannot mend that")
                return 64
            default: break
            }
            say(
                "the node \(describe(ending)) after \(String(format1: ran.inSeconds)) s"
                    + (tail.isEmpty
                        ? "" : "; its last \(tail.count) lines:\n" + tail.map { "  | \($0)" }.joined(separator: "\n")))
            guard case .restart(let delay) = supervisor.onFailure(at: clock.now - origin) else {
                say(
                    "giving up: \(supervisor.restartTimes.count + 1) crashes within \(DurationText.format(policy.window)) "
                        + "(at most \(policy.maxRestarts) restarts in that window)")
                return 1
            }
            say(
                "restart \(restarts + 1) in \(DurationText.format(delay)) "
                    + "(\(supervisor.restartTimes.count) of at most \(policy.maxRestarts) within \(DurationText.format(policy.window)))"
            )
            if waitForStop(wake, delay) { return 0 }
            restarts += 1
        }
    }

    private static var stopping: Bool { stopSignal.load(ordering: .sequentiallyConsistent) != 0 }

    /// One life of the node: started, its output passed through (the last
    /// lines kept), and reaped.
    private static func runOnce(
        _ command: [String], environment: [String: String], restarts: Int, policy: Policy
    ) throws(CLIError) -> (LocalProcesses.Ending, [String]) {
        let out = try LocalProcesses.makePipe()
        let err: (read: Int32, write: Int32)
        do {
            err = try LocalProcesses.makePipe()
        } catch {
            close(out.read)
            close(out.write)
            throw error
        }
        let pid: Int32
        do {
            pid = try LocalProcesses.spawnChild(
                command, environment: environment, stdout: out.write, stderr: err.write)
        } catch {
            [out.read, out.write, err.read, err.write].forEach { close($0) }
            throw error
        }
        close(out.write)
        close(err.write)
        child.store(pid, ordering: .sequentiallyConsistent)
        // A signal that came while the child was being started reaches it too.
        let stop = stopSignal.load(ordering: .sequentiallyConsistent)
        if stop != 0 { kill(pid, stop) }
        writeState(policy.stateFile, pid: pid, restarts: restarts)
        say("started the node, pid \(pid)" + (restarts == 0 ? "" : " (restart \(restarts))"))
        var tail = OutputTail()
        let ending = pump(pid, out: out.read, err: err.read, tail: &tail)
        close(out.read)
        close(err.read)
        child.store(0, ordering: .sequentiallyConsistent)
        writeState(policy.stateFile, pid: 0, restarts: restarts)
        return (ending, tail.lines)
    }

    /// Passes the child's output through until both pipes close, then
    /// reaps it. A child that ends while something else holds its pipes is
    /// noticed by the periodic check.
    private static func pump(_ pid: Int32, out: Int32, err: Int32, tail: inout OutputTail) -> LocalProcesses.Ending {
        var open: [(fd: Int32, to: Int32)] = [(out, 1), (err, 2)]
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var ended: LocalProcesses.Ending?
        while !open.isEmpty {
            var fds = open.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
            let ready = poll(&fds, nfds_t(fds.count), 500)
            if ready < 0, errno != EINTR { break }
            if ready <= 0 {
                if ended == nil { ended = LocalProcesses.ending(of: pid) }
                if ended != nil { break }
                continue
            }
            var closed: Set<Int32> = []
            for (i, p) in fds.enumerated() where p.revents != 0 {
                let n = buffer.withUnsafeMutableBytes { read(p.fd, $0.baseAddress, $0.count) }
                if n < 0, errno == EINTR || errno == EAGAIN { continue }
                guard n > 0 else {
                    closed.insert(p.fd)
                    continue
                }
                let chunk = buffer[..<n]
                writeAll(open[i].to, chunk)
                tail.append(chunk, stream: open[i].to)
            }
            open.removeAll { closed.contains($0.fd) }
        }
        if let ended { return ended }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        let signal = status & 0x7f
        return signal == 0 ? .code((status >> 8) & 0xff) : .signal(signal)
    }

    /// Waits `delay`, or less if a stop signal comes; true if one came.
    private static func waitForStop(_ wake: Int32, _ delay: Duration) -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now + delay
        while !stopping, clock.now < deadline {
            let left = deadline - clock.now
            var p = pollfd(fd: wake, events: Int16(POLLIN), revents: 0)
            let ms = Int32(
                clamping: left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1)
            if poll(&p, 1, ms) > 0 {
                var byte: UInt8 = 0
                _ = read(wake, &byte, 1)
            }
        }
        return stopping
    }

    // MARK: - Reporting

    /// The last lines the child wrote, both streams in arrival order.
    struct OutputTail {
        static let keep = 20
        static let longest = 400
        private(set) var lines: [String] = []
        private var partial: [Int32: [UInt8]] = [:]

        mutating func append(_ bytes: ArraySlice<UInt8>, stream: Int32) {
            var current = partial[stream] ?? []
            for byte in bytes {
                if byte == UInt8(ascii: "\n") {
                    push(current)
                    current.removeAll(keepingCapacity: true)
                } else if current.count < Self.longest {
                    current.append(byte)
                }
            }
            partial[stream] = current
        }

        private mutating func push(_ line: [UInt8]) {
            lines.append(String(decoding: line, as: UTF8.self))
            if lines.count > Self.keep { lines.removeFirst(lines.count - Self.keep) }
        }
    }

    static func say(_ text: String) {
        FileStream.standardError.write("oscar supervisor [\(getpid())]: \(text)\n")
    }

    private static func writeAll(_ fd: Int32, _ bytes: ArraySlice<UInt8>) {
        var rest = bytes
        while !rest.isEmpty {
            let n = rest.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { return }  // our own output is gone: keep supervising regardless
            rest = rest.dropFirst(n)
        }
    }

    /// `{"supervisor":P,"pid":C,"restarts":N}`, replaced atomically; pid 0
    /// while no node runs.
    private static func writeState(_ path: String?, pid: Int32, restarts: Int) {
        guard let path else { return }
        let temporary = path + ".tmp"
        if FileStream.write(temporary, "{\"supervisor\":\(getpid()),\"pid\":\(pid),\"restarts\":\(restarts)}\n") {
            rename(temporary, path)
        }
    }

    /// What a state file says, for `oscar cluster status`.
    struct State: Codable {
        var supervisor: Int32
        var pid: Int32
        var restarts: Int
    }

    static func readState(_ path: String) -> State? {
        FileStream.readAll(path).flatMap { JSONBridge.decode(State.self, fromJSON: $0) }
    }

    private static func status(_ ending: LocalProcesses.Ending) -> Int32 {
        switch ending {
        case .code(let code): code
        case .signal(let signal): 128 + signal
        }
    }

    private static func describe(_ ending: LocalProcesses.Ending) -> String {
        switch ending {
        case .code(let code): "exited with status \(code)"
        case .signal(let signal):
            "was killed by \(ProcessControl.signalName(signal))"
                + (signal == SIGILL || signal == SIGTRAP ? " (a Swift runtime trap, such as an overflow)" : "")
        }
    }
}
