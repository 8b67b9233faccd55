import CLibUV
import Glibc

/// Node processes on this machine: started detached, found again by pid, and
/// told apart from an unrelated process that reused the pid. The only file of
/// the CLI that handles C pointers.
enum LocalProcesses {
    /// This executable's path, so children run the same build.
    static var executable: String {
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        return n > 0
            ? String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) : CommandLine.arguments[0]
    }

    /// Starts `arguments` with this executable, detached (its own session),
    /// output appended to `log`, and `extraEnvironment` on top of ours.
    /// Returns the pid.
    static func spawnDetached(
        _ arguments: [String], log: String, extraEnvironment: [String: String]
    ) throws(CLIError)
        -> Int32
    {
        var environment = ProcessInfoLite.environment
        for (k, v) in extraEnvironment { environment[k] = v }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        let rc = oscar_spawn_detached(executable, argv, envp, log)
        guard rc > 0 else { throw .failed("cannot start \(executable): \(String(cString: strerror(-rc)))") }
        return rc
    }

    /// True while `pid` runs (not a zombie) and is an `oscar node` on
    /// `port`: a pid reused by another program does not count.
    static func isNode(pid: Int32, port: Int) -> Bool {
        guard pid > 0, kill(pid, 0) == 0 || errno == EPERM else { return false }
        if let stat = FileStream.readAll("/proc/\(pid)/stat"), let close = stat.lastIndex(of: ")"),
            stat[stat.index(after: close)...].trimmingPrefix(" ").first == "Z"
        {
            return false
        }
        guard let cmdline = FileStream.readAll("/proc/\(pid)/cmdline") else { return false }
        let parts = cmdline.split(separator: "\0").map(String.init)
        guard parts.contains("node"), let i = parts.firstIndex(of: "--port"), i + 1 < parts.count else { return false }
        return parts[i + 1] == "\(port)"
    }

    static func signal(_ pid: Int32, _ signal: Int32) { _ = kill(pid, signal) }

    /// Reaps any of our own children that have exited (nodes started by
    /// this process are its children until it exits).
    static func reapChildren() {
        var status: Int32 = 0
        while waitpid(-1, &status, WNOHANG) > 0 {}
    }
}
