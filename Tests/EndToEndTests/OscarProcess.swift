import Foundation
import Glibc
import Synchronization

/// The `oscar` executable built next to this test bundle.
enum OscarBinary {
    static var url: URL {
        var dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        // swift test runs .build/<triple>/debug/<Package>PackageTests.xctest
        if dir.lastPathComponent.hasSuffix(".xctest") { dir.deleteLastPathComponent() }
        return dir.appendingPathComponent("oscar")
    }
}

/// Output a process wrote, collected as it arrives.
///
/// Read by a thread of its own with blocking reads, not by a FileHandle
/// `readabilityHandler`: those are Dispatch sources, and with many pipes
/// open at once libdispatch crashed the whole test process in
/// `_dispatch_event_loop_drain` (swift-corelibs-foundation issue 3276; seen
/// here twice, while suites started processes side by side).
final class Output: Sendable {
    private let text = Mutex("")
    private let ended = Mutex(false)
    func append(_ bytes: ArraySlice<UInt8>) { text.withLock { $0 += String(decoding: bytes, as: UTF8.self) } }
    var value: String { text.withLock { $0 } }
    /// Whether the reader saw the end of the stream.
    var isComplete: Bool { ended.withLock { $0 } }

    /// Reads `handle` to its end on a new thread. The thread reads its own
    /// duplicate of the descriptor and closes it at the end, so the pipe's
    /// handle closing meanwhile cannot hand it a reused descriptor.
    func collect(from handle: FileHandle) {
        let fd = dup(handle.fileDescriptor)
        guard fd >= 0 else {
            ended.withLock { $0 = true }
            return
        }
        Thread { [self] in
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            while true {
                let n = read(fd, &buffer, buffer.count)
                if n > 0 {
                    append(buffer[..<n])
                } else if n < 0 && errno == EINTR {
                    continue
                } else {
                    break
                }
            }
            close(fd)
            ended.withLock { $0 = true }
        }.start()
    }
}

/// A running `oscar` process, killed (if still running) when released.
final class OscarProcess {
    let process = Process()
    let stdout = Output()
    let stderr = Output()
    private let outPipe = Pipe()
    private let errPipe = Pipe()

    /// `launcher` runs `oscar` through another command, such as
    /// `["/usr/sbin/ip", "netns", "exec", "ns1"]`. An empty `secret` sets no
    /// `OSCAR_SECRET`; `directory` is the working directory.
    init(
        _ arguments: [String], secret: String = "e2e-cluster-secret-01", environment extra: [String: String] = [:],
        launcher: [String] = [], directory: String? = nil
    ) throws {
        if let first = launcher.first {
            process.executableURL = URL(fileURLWithPath: first)
            process.arguments = launcher.dropFirst() + [OscarBinary.url.path] + arguments
        } else {
            process.executableURL = OscarBinary.url
            process.arguments = arguments
        }
        var env = ProcessInfo.processInfo.environment
        env["OSCAR_SECRET"] = secret.isEmpty ? nil : secret
        env.merge(extra) { $1 }
        process.environment = env
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        process.standardOutput = outPipe
        process.standardError = errPipe
        // One launch at a time: concurrent Process.run() calls from parallel
        // suites crashed inside Foundation (a bad memcpy while launching).
        try Self.launchLock.withLock { _ in try process.run() }
        stdout.collect(from: outPipe.fileHandleForReading)
        stderr.collect(from: errPipe.fileHandleForReading)
    }

    private static let launchLock = Mutex(())

    /// Terminates a process still running; Foundation reaps it. No blocking
    /// wait here: a deinit can run on a cooperative thread, and blocking one
    /// starves every other test of the pool's few threads.
    deinit {
        if process.isRunning { process.terminate() }
    }

    /// Waits for the process to exit without blocking a thread, for at most
    /// `timeout`; returns whether it exited.
    func exited(within timeout: Duration = .seconds(30)) async -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        while process.isRunning, clock.now < deadline { try? await Task.sleep(for: .milliseconds(5)) }
        return !process.isRunning
    }

    /// Runs `oscar` to completion (bounded by `timeout`) and returns its exit
    /// code and output.
    static func run(
        _ arguments: [String], secret: String = "e2e-cluster-secret-01", environment: [String: String] = [:],
        launcher: [String] = [], directory: String? = nil, timeout: Duration = .seconds(20)
    ) async throws
        -> (status: Int32, stdout: String, stderr: String)
    {
        let p = try OscarProcess(
            arguments, secret: secret, environment: environment, launcher: launcher, directory: directory)
        if !(await p.exited(within: timeout)) {
            p.process.terminate()
            _ = await p.exited(within: .seconds(10))
        }
        // Still running (or its exit not seen): report it rather than read a
        // status Foundation does not have yet, which traps.
        guard !p.process.isRunning else { return (-1, p.stdout.value, p.stderr.value + "\n(did not exit)") }
        await p.drain()
        return (p.process.terminationStatus, p.stdout.value, p.stderr.value)
    }

    /// After exit: waits (at most 10 s) until both readers reached the end
    /// of their streams, so no output is lost.
    func drain() async {
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(10)
        while !(stdout.isComplete && stderr.isComplete), clock.now < deadline {
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Waits until stdout contains `text`, for at most `timeout`.
    func waitFor(_ text: String, timeout: Duration = .seconds(10)) async -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        while clock.now < deadline {
            if stdout.value.contains(text) { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return stdout.value.contains(text)
    }

    /// The port from "listening on oscar://host:PORT".
    func listeningPort() async -> Int? {
        guard await waitFor("listening on oscar://") else { return nil }
        let line = stdout.value.split(separator: "\n").first { $0.contains("listening on oscar://") } ?? ""
        let afterScheme = line.split(separator: "oscar://").last ?? ""
        let authority = afterScheme.split(separator: " ").first ?? ""
        return authority.split(separator: ":").last.flatMap { Int($0) }
    }
}
