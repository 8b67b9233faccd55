import Foundation
import Glibc
import Synchronization

/// Waits until `condition` holds, checking every few milliseconds, for at most
/// `timeout`. Returns whether it held: a condition with a deadline, not a sleep.
/// The default deadline is long (30 s) because it only bounds a hang: a
/// condition that holds returns at once, and a loaded 2-core machine has
/// paused a whole test process for over 20 s.
public func eventually(
    timeout: Duration = .seconds(30), _ condition: @Sendable () async -> Bool
) async -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    while clock.now < deadline {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(2))
    }
    return await condition()
}

/// A one-shot barrier that async code can wait on and any thread can open.
public final class Gate: Sendable {
    public init() {}
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    public func wait() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { s -> Bool in
                if s.open { return true }
                s.waiters.append(c)
                return false
            }
            if resumeNow { c.resume() }
        }
    }

    /// True once something waits on the gate.
    public var waiting: Bool { state.withLock { !$0.waiters.isEmpty } }

    public func open() {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.open = true
            defer { s.waiters = [] }
            return s.waiters
        }
        for w in waiters { w.resume() }
    }
}

/// A thread-safe counter for observing what actors did.
public final class Tally: Sendable {
    public init() {}
    private let value = Atomic<Int>(0)
    public func increment() { value.wrappingAdd(1, ordering: .relaxed) }
    public var count: Int { value.load(ordering: .relaxed) }
}

/// A thread-safe append-only record.
public final class Record<T: Sendable>: Sendable {
    public init() {}
    private let items = Mutex<[T]>([])
    public func append(_ item: T) { items.withLock { $0.append(item) } }
    public var all: [T] { items.withLock { $0 } }
}

/// A real-time bound for a timing assertion. The sanitizer pass of
/// Cluster/test.sh sets OSCAR_SANITIZER_RUN=1: instrumented code runs several
/// times slower, so bounds there are five times looser; the plain run checks
/// the exact bound.
public func realTimeBound(_ bound: Duration) -> Duration {
    underSanitizer ? bound * 5 : bound
}

/// True in the AddressSanitizer pass of `Cluster/test.sh`, where code runs
/// about five times slower: load tests shrink there so they do not starve
/// the tests running beside them.
public let underSanitizer = getenv("OSCAR_SANITIZER_RUN").map { String(cString: $0) } == "1"

/// Runs `work` on a thread of its own, not on Swift concurrency's
/// cooperative threads (one per core) nor Dispatch's, which they share:
/// blocking socket calls or seconds of CPU-bound work there would stall every
/// other test's tasks meanwhile (under the sanitizer, past their limits).
public func offThePool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try work() }) }.start()
    }
}

/// A value worked out once, on a thread of its own, for every test that
/// awaits it. A static `let` would run a costly initializer on a cooperative
/// thread and block there every other test that reads it meanwhile: on two
/// cores, the whole pool.
public final class ComputedOnce<T: Sendable>: Sendable {
    private let task: Task<T, Never>

    public init(_ work: @escaping @Sendable () -> T) {
        task = Task {
            await withCheckedContinuation { continuation in
                Thread { continuation.resume(returning: work()) }.start()
            }
        }
    }

    public var value: T { get async { await task.value } }
}

/// A fresh directory under the system's temporary one, removed on release.
public final class TemporaryDirectory {
    public let path: String

    public init(_ tag: String) throws {
        path =
            FileManager.default.temporaryDirectory
            .appendingPathComponent("oscar-\(tag)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}
