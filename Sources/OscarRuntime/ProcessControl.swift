import CLibUV
import Dispatch
import Glibc
import OscarBase
import Synchronization

/// The process and thread settings that C offers only through a C global
/// (which Swift 6 will not touch), a variadic function (which Swift cannot
/// call) or a GNU extension (which the Glibc module does not declare), so a
/// program built on Oscar needs no C module of its own.
package enum ProcessControl {
    /// Flushes standard output at every newline even into a pipe or a file,
    /// so whoever reads a node's output (a supervisor, a test, a log) sees
    /// each line when it is printed.
    package static func lineBufferStandardOutput() { oscar_stdout_line_buffered() }

    /// Has the kernel send `signal` to this process when the thread that
    /// started it ends (`PR_SET_PDEATHSIG`).
    package static func setParentDeathSignal(_ signal: Int32) { oscar_set_parent_death_signal(signal) }

    /// Has a `posix_spawn` with `actions` close every descriptor from
    /// `lowest` up in the child, so it inherits only what it was given.
    package static func closeDescriptors(from lowest: Int32, in actions: inout posix_spawn_file_actions_t) {
        posix_spawn_file_actions_addclosefrom_np(&actions, lowest)
    }
}

extension ProcessControl {
    /// The process environment, read from `environ` (no Foundation).
    package static var environment: [String: String] {
        var out: [String: String] = [:]
        var entry = environ
        while let pointer = entry.pointee {
            let text = String(cString: pointer)
            if let eq = text.firstIndex(of: "=") {
                out[String(text[..<eq])] = String(text[text.index(after: eq)...])
            }
            entry += 1
        }
        return out
    }

    /// `SIGKILL`, not strsignal's "Killed": the name people search for.
    package static func signalName(_ signal: Int32) -> String {
        let names: [Int32: String] = [
            SIGHUP: "SIGHUP", SIGINT: "SIGINT", SIGQUIT: "SIGQUIT", SIGILL: "SIGILL", SIGTRAP: "SIGTRAP",
            SIGABRT: "SIGABRT", SIGBUS: "SIGBUS", SIGFPE: "SIGFPE", SIGKILL: "SIGKILL", SIGUSR1: "SIGUSR1",
            SIGSEGV: "SIGSEGV", SIGUSR2: "SIGUSR2", SIGPIPE: "SIGPIPE", SIGALRM: "SIGALRM", SIGTERM: "SIGTERM",
            SIGXCPU: "SIGXCPU", SIGXFSZ: "SIGXFSZ", SIGSYS: "SIGSYS",
        ]
        return names[signal] ?? "signal \(signal)"
    }

    /// Writes `text` to standard error in one `write(2)`.
    package static func writeStandardError(_ text: String) { write(text, to: 2) }

    /// Writes `text` to `fd` in one `write(2)`: lines from several threads
    /// to a file opened for appending do not interleave.
    package static func write(_ text: String, to fd: Int32) {
        var bytes = Array(text.utf8)
        _ = bytes.withUnsafeMutableBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
    }

    /// `path` opened for appending (created, mode 0644, if missing); nil
    /// when it cannot be. The descriptor lives as long as the process.
    package static func openForAppending(_ path: String) -> Int32? {
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        return fd >= 0 ? fd : nil
    }

    /// Why a file could not be read, in words for a person.
    package struct FileError: Error, CustomStringConvertible {
        package let description: String
    }

    /// A file as UTF-8 text, read to at most `limit` bytes: a larger file,
    /// or one that never ends (`/dev/zero`), is refused after `limit + 1`
    /// bytes, not read for ever.
    package static func readFile(_ path: String, atMost limit: Int) throws(FileError) -> String {
        String(decoding: try readBytes(path, atMost: limit), as: UTF8.self)
    }

    /// As `readFile`, the bytes as they are (for a caller that checks them).
    package static func readBytes(_ path: String, atMost limit: Int) throws(FileError) -> [UInt8] {
        guard let file = fopen(path, "rb") else {
            throw FileError(description: "cannot read '\(path)': \(String(cString: strerror(errno)))")
        }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while bytes.count <= limit {
            let n = fread(&chunk, 1, min(chunk.count, limit + 1 - bytes.count), file)
            if n == 0 { break }
            bytes += chunk[..<n]
        }
        guard ferror(file) == 0 else {
            throw FileError(description: "cannot read '\(path)': \(String(cString: strerror(errno)))")
        }
        guard bytes.count <= limit else {
            throw FileError(description: "'\(path)' is larger than the maximum of \(limit) bytes")
        }
        return bytes
    }

    /// Calls `handler` (on a dispatch queue) for each of these signals,
    /// which no longer terminate the process. The sources live as long as
    /// the process.
    package static func onSignals(_ signals: [Int32], _ handler: @escaping @Sendable (Int32) -> Void) {
        for s in signals {
            Glibc.signal(s, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: s)
            source.setEventHandler { handler(s) }
            source.resume()
            let kept = UncheckedSendable(source)  // only kept, never used again
            signalSources.withLock { $0.append(kept) }
        }
    }

    private static let signalSources = Mutex<[UncheckedSendable<any DispatchSourceSignal>]>([])

    /// Runs `body` on a thread of its own. A parent-death signal fires when
    /// the *thread* that set it (or started the child) ends, and a pool
    /// thread may end whenever it is idle.
    package static func onOwnThread(_ body: @escaping @Sendable () -> Void) {
        if !startThread(body) { body() }
    }

    /// Runs `body` on a thread of its own; false (and `body` not run) when
    /// the system has no thread to give, for a caller that must not run it
    /// on its own thread (a loop: the body blocks). The thread may run on
    /// every CPU the process may use, even when started from a pinned loop
    /// (`ActorSystem.Settings.loopCPUs`).
    package static func startThread(_ body: @escaping @Sendable () -> Void) -> Bool {
        final class Body: Sendable {
            let run: @Sendable () -> Void
            init(_ run: @escaping @Sendable () -> Void) { self.run = run }
        }
        var thread = pthread_t()
        let context = Unmanaged.passRetained(Body(body)).toOpaque()
        let rc = pthread_create(
            &thread, nil,
            { raw in
                guard let raw else { return nil }
                _ = oscar_thread_use_process_cpus()
                Unmanaged<Body>.fromOpaque(raw).takeRetainedValue().run()
                return nil
            }, context)
        guard rc == 0 else {
            Unmanaged<Body>.fromOpaque(context).release()
            return false
        }
        pthread_detach(thread)
        return true
    }

    /// For a node started by a supervisor: it is killed when the supervisor
    /// ends, however that ends, so it never runs on unsupervised (or holds
    /// its port against the next one). False when the supervisor has
    /// already gone. The setting belongs to the thread that makes it and
    /// lapses when that thread ends, so a thread of its own makes it and
    /// stays, parked.
    package static func dieWithSupervisor(_ supervisor: Int32) -> Bool {
        let set = DispatchSemaphore(value: 0)
        onOwnThread {
            setParentDeathSignal(SIGKILL)
            set.signal()
            while true { pause() }
        }
        set.wait()
        return getppid() == supervisor
    }
}
