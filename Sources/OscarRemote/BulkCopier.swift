import CLibUV
import Dispatch
import Glibc
import OscarRuntime
import Synchronization

/// A thread that copies message bodies of the bulk lane to or from a
/// socket, at `SCHED_IDLE` (or, in tests, at normal priority), and does
/// nothing else.
///
/// Why a thread for only that: a thread at `SCHED_IDLE` runs only when a
/// core has nothing else to run, so any lock it holds when preempted is
/// held until a core frees, and every thread at normal priority that wants
/// the lock waits as long (priority inversion: Linux's futexes and
/// malloc's arenas do not lend priority). The lane's own threads allocate,
/// stage messages, hand work to the loop and log, all under locks the loops
/// take too; so they run at normal priority and block, and the copier
/// runs only `BulkSocket.readAll` and `writeAll`, which allocate nothing
/// and take no lock. The copier and its owner meet through two semaphores,
/// whose signalling takes no lock either, and a job names its socket
/// without a reference count, so the copier never frees anything.
///
/// Nor does its thread ever end: ending frees the thread's malloc cache
/// and stack under glibc's locks. An owner that is done parks its copier
/// (`park`), and the next bulk connection takes it (`take`); so there are
/// as many copiers as bulk connections were ever open at once.
///
/// `@unchecked Sendable`: `job` and `outcome` are written by one side
/// before it signals and read by the other after its wait; the semaphores
/// order them.
final class BulkCopier: @unchecked Sendable {
    private enum Job {
        case none
        case read(Unmanaged<BulkSocket>, UnsafeMutableRawBufferPointer)
        case write(Unmanaged<BulkSocket>, UnsafeBufferPointer<UnsafeRawBufferPointer>)
    }

    /// Whether the thread runs at `SCHED_IDLE`.
    let idle: Bool
    /// The thread's id (as `/proc/self/task` names it), once it has started.
    let threadID = Atomic<Int32>(0)
    private let request = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private var job = Job.none
    private var outcome = BulkSocket.Outcome.done

    private static let parked = Mutex<(idle: [BulkCopier], normal: [BulkCopier])>(([], []))

    /// A parked copier of that priority, or a new one (nil when the system
    /// has no thread to give).
    static func take(idle: Bool) -> BulkCopier? {
        if let copier = parked.withLock({ idle ? $0.idle.popLast() : $0.normal.popLast() }) { return copier }
        let copier = BulkCopier(idle: idle)
        let started = ProcessControl.startThread { [copier] in copier.serve() }
        return started ? copier : nil
    }

    private init(idle: Bool) { self.idle = idle }

    /// Keeps the copier for the next bulk connection. Its owner calls it
    /// once done with it (never during a copy).
    func park() {
        Self.parked.withLock { idle ? $0.idle.append(self) : $0.normal.append(self) }
    }

    /// Fills `buffer` from `socket` on the copier's thread, and waits.
    func read(into buffer: UnsafeMutableRawBufferPointer, from socket: BulkSocket) -> BulkSocket.Outcome {
        withExtendedLifetime(socket) { run(.read(.passUnretained(socket), buffer)) }
    }

    /// Writes `buffers` to `socket` on the copier's thread, and waits.
    func write(_ buffers: UnsafeBufferPointer<UnsafeRawBufferPointer>, to socket: BulkSocket) -> BulkSocket.Outcome {
        withExtendedLifetime(socket) { run(.write(.passUnretained(socket), buffers)) }
    }

    private func run(_ next: Job) -> BulkSocket.Outcome {
        job = next
        request.signal()
        finished.wait()
        job = .none
        return outcome
    }

    /// The thread: named and counted at normal priority, then lowered, then
    /// one copy per request, for ever.
    private func serve() {
        threadID.store(oscar_thread_id(), ordering: .releasing)
        BulkSocket.startThread(named: "oscar-bulk-copy", idle: idle)
        while true {
            request.wait()
            switch job {
            case .none: outcome = .done
            case .read(let socket, let buffer): outcome = socket._withUnsafeGuaranteedRef { $0.readAll(into: buffer) }
            case .write(let socket, let buffers): outcome = socket._withUnsafeGuaranteedRef { $0.writeAll(buffers) }
            }
            finished.signal()
        }
    }
}
