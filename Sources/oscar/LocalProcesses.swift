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
    /// With a `launcher` (such as `ip netns exec NS`), that command runs
    /// this executable; it must exec it, so the pid stays the node's.
    static func spawnDetached(
        _ arguments: [String], log: String, extraEnvironment: [String: String], launcher: [String] = []
    ) throws(CLIError)
        -> Int32
    {
        var environment = ProcessInfoLite.environment
        for (k, v) in extraEnvironment { environment[k] = v }
        let command = launcher + [executable] + arguments
        let argv = command.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        let rc = oscar_spawn_detached(command[0], argv, envp, log)
        guard rc > 0 else { throw .failed("cannot start \(command[0]): \(String(cString: strerror(-rc)))") }
        return rc
    }

    /// Runs a short command (network set-up) to completion, its output
    /// discarded; its exit status.
    @discardableResult
    static func run(_ command: [String]) -> Int32 {
        let argv = command.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let envp = ProcessInfoLite.environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { envp.forEach { free($0) } }
        let pid = oscar_spawn_detached(command[0], argv, envp, "/dev/null")
        guard pid > 0 else { return -1 }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return (status & 0x7f) == 0 ? (status >> 8) & 0xff : -1
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
