import Dispatch
import Glibc
import OscarRuntime

/// The one thread of a bulk connection that runs at `SCHED_IDLE`: it copies
/// message bodies to or from the socket, and does nothing else.
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
/// whose signalling takes no lock either.
///
/// `@unchecked Sendable`: `job` and `outcome` are written by one side
/// before it signals and read by the other after its wait; the semaphores
/// order them.
final class BulkCopier: @unchecked Sendable {
    private enum Job {
        case read(UnsafeMutableRawBufferPointer)
        case write(UnsafeBufferPointer<UnsafeRawBufferPointer>)
        case stop
    }

    private let socket: BulkSocket
    private let request = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private var job = Job.stop
    private var outcome = BulkSocket.Outcome.done

    /// Starts the thread, named `name`, at `SCHED_IDLE` when `idle` (nil
    /// when the system has no thread to give).
    init?(socket: BulkSocket, named name: String, idle: Bool) {
        self.socket = socket
        let started = ProcessControl.startThread { [self] in
            BulkSocket.startThread(named: name, idle: idle)
            while true {
                request.wait()
                switch job {
                case .read(let buffer): outcome = socket.readAll(into: buffer)
                case .write(let buffers): outcome = socket.writeAll(buffers)
                case .stop: return
                }
                finished.signal()
            }
        }
        guard started else { return nil }
    }

    /// Fills `buffer` from the socket on the copier's thread, and waits.
    func read(into buffer: UnsafeMutableRawBufferPointer) -> BulkSocket.Outcome { run(.read(buffer)) }

    /// Writes `buffers` to the socket on the copier's thread, and waits.
    func write(_ buffers: UnsafeBufferPointer<UnsafeRawBufferPointer>) -> BulkSocket.Outcome { run(.write(buffers)) }

    /// Ends the thread once it has finished its copy (if any; shut the
    /// socket down to end one at once). Its owner calls it as it ends.
    func stop() {
        job = .stop
        request.signal()
    }

    private func run(_ next: Job) -> BulkSocket.Outcome {
        job = next
        request.signal()
        finished.wait()
        return outcome
    }
}
