import Dispatch
import Glibc
import OscarRuntime

/// Node processes on this machine: started detached, found again by pid, and
/// told apart from an unrelated process that reused the pid. posix_spawn's C
/// string arrays and pthread_create's context are handled here and nowhere
/// else in the CLI.
enum LocalProcesses {
    /// This executable's path, so children run the same build.
    static var executable: String {
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        return n > 0
            ? String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) : CommandLine.arguments[0]
    }

    /// Starts `command` (a program and its arguments; `oscar` itself is
    /// `executable`), detached (its own session), output appended to `log`,
    /// and `extraEnvironment` on top of ours, without the variables named in
    /// `removing`. Returns the pid. With a `launcher` (such as `ip netns exec
    /// NS`), that command runs the program; it must exec it, so the pid
    /// stays the node's.
    static func spawnDetached(
        _ command: [String], log: String, extraEnvironment: [String: String], removing: [String] = [],
        launcher: [String] = []
    ) throws(CLIError)
        -> Int32
    {
        var environment = ProcessControl.environment
        for name in removing { environment[name] = nil }
        for (k, v) in extraEnvironment { environment[k] = v }
        return try spawn(
            launcher + command, environment: environment, output: .file(log), detached: true)
    }

    /// Starts `command` (a program and its arguments) as a supervised child, stdout
    /// and stderr into the descriptors `out` and `err`, in its own process
    /// group, so a terminal's Ctrl-C reaches only the supervisor, which
    /// forwards it once. Returns the pid.
    static func spawnChild(
        _ command: [String], environment: [String: String], stdout out: Int32, stderr err: Int32
    ) throws(CLIError) -> Int32 {
        try spawn(command, environment: environment, output: .descriptors(out, err), detached: false)
    }

    /// Where a child's stdout and stderr go.
    private enum Output {
        /// Both appended to the file at this path, created if missing.
        case file(String)
        /// Onto these two descriptors of ours.
        case descriptors(Int32, Int32)
    }

    /// Starts `command` (a path and its arguments) with exactly
    /// `environment`: stdin from /dev/null, output as asked, no other
    /// descriptor (a pipe our caller reads must not stay open in a node
    /// that outlives us), no signal blocked, the usual dispositions for
    /// SIGINT, SIGTERM, SIGHUP and SIGPIPE, and a session of its own when
    /// `detached` (closing the terminal or ending the launching command
    /// does not stop it), else a process group of its own. posix_spawn,
    /// not fork: this process has threads. Returns the pid.
    private static func spawn(
        _ command: [String], environment: [String: String], output: Output, detached: Bool
    ) throws(CLIError) -> pid_t {
        let argv = command.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        switch output {
        case .file(let path):
            posix_spawn_file_actions_addopen(&actions, 1, path, O_WRONLY | O_CREAT | O_APPEND, 0o644)
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        case .descriptors(let out, let err):
            posix_spawn_file_actions_adddup2(&actions, out, 1)
            posix_spawn_file_actions_adddup2(&actions, err, 2)
        }
        ProcessControl.closeDescriptors(from: 3, in: &actions)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var mask = sigset_t()
        var defaults = sigset_t()
        sigemptyset(&mask)
        sigemptyset(&defaults)
        for s in [SIGINT, SIGTERM, SIGHUP, SIGPIPE] { sigaddset(&defaults, s) }
        posix_spawnattr_setsigmask(&attributes, &mask)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var flags = Int32(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)
        if detached {
            flags |= posixSpawnSetSID
        } else {
            posix_spawnattr_setpgroup(&attributes, 0)
            flags |= Int32(POSIX_SPAWN_SETPGROUP)
        }
        posix_spawnattr_setflags(&attributes, Int16(flags))
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, command[0], &actions, &attributes, argv, envp)
        guard rc == 0 else { throw .failed("cannot start \(command[0]): \(String(cString: strerror(rc)))") }
        return pid
    }

    /// glibc's `POSIX_SPAWN_SETSID`, which Swift does not import (it is
    /// declared only with `_GNU_SOURCE`).
    private static let posixSpawnSetSID: Int32 = 0x80

    /// A pipe whose ends are closed on exec (the child gets its end by dup2).
    static func makePipe() throws(CLIError) -> (read: Int32, write: Int32) {
        var fds: [Int32] = [0, 0]
        guard Glibc.pipe(&fds) == 0 else { throw .failed("pipe: \(String(cString: strerror(errno)))") }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        return (fds[0], fds[1])
    }

    /// Runs a short command (network set-up, an application's checks) to
    /// completion, its output appended to `output` (discarded by default);
    /// its exit status.
    @discardableResult
    static func run(_ command: [String], output: String = "/dev/null") -> Int32 {
        guard
            let pid = try? spawn(
                command, environment: ProcessControl.environment, output: .file(output), detached: true)
        else { return -1 }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return (status & 0x7f) == 0 ? (status >> 8) & 0xff : -1
    }

    /// Whether process `pid` exists and has not exited (a zombie has). For
    /// a process this one has just started: its command line may not be
    /// readable yet (`isNode` then says no for a moment), and its pid cannot
    /// have been reused.
    static func isAlive(pid: Int32) -> Bool {
        guard pid > 0, kill(pid, 0) == 0 || errno == EPERM else { return false }
        if let stat = FileStream.readAll("/proc/\(pid)/stat"), let close = stat.lastIndex(of: ")"),
            stat[stat.index(after: close)...].trimmingPrefix(" ").first == "Z"
        {
            return false
        }
        return true
    }

    /// True while `pid` runs (not a zombie) and is an `oscar node` on
    /// `port`: a pid reused by another program does not count.
    static func isNode(pid: Int32, port: Int) -> Bool {
        guard isAlive(pid: pid) else { return false }
        guard let cmdline = FileStream.readAll("/proc/\(pid)/cmdline") else { return false }
        let parts = cmdline.split(separator: "\0").map(String.init)
        guard let i = parts.firstIndex(of: "--port"), i + 1 < parts.count else { return false }
        return parts[i + 1] == "\(port)"
    }

    static func signal(_ pid: Int32, _ signal: Int32) { _ = kill(pid, signal) }

    /// Reaps any of our own children that have exited (nodes started by
    /// this process are its children until it exits).
    static func reapChildren() {
        var status: Int32 = 0
        while waitpid(-1, &status, WNOHANG) > 0 {}
    }

    /// How a child ended: its exit code, or the signal that killed it.
    enum Ending: Equatable {
        case code(Int32)
        case signal(Int32)
    }

    /// How our child `pid` ended, if it has (reaping it); nil while it runs.
    static func ending(of pid: Int32) -> Ending? {
        var status: Int32 = 0
        guard waitpid(pid, &status, WNOHANG) == pid else { return nil }
        // The <sys/wait.h> macros, spelled out: Swift does not import them.
        let signal = status & 0x7f
        return signal == 0 ? .code((status >> 8) & 0xff) : .signal(signal)
    }

    /// True if nothing listens on 127.0.0.1:`port` and we may bind it.
    static func portIsFree(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        // As a node binds (libuv sets it): connections of an earlier node in
        // TIME_WAIT do not make the port taken, a listener does.
        var on: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    /// The peak resident set of `pid` in bytes (`VmHWM`), if it can be read.
    static func peakResidentBytes(of pid: Int32) -> Int? {
        guard let status = FileStream.readAll("/proc/\(pid)/status"),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") })
        else { return nil }
        let kilobytes = line.split(separator: " ").dropFirst().first.flatMap { Int($0) }
        return kilobytes.map { $0 * 1024 }
    }
}
