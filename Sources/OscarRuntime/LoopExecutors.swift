import Dispatch
import OscarBase
import OscarCBOR

/// Lets the executors point back at their loop, which cannot be referenced
/// until its own initialiser has finished.
final class LoopReference: @unchecked Sendable {
    unowned(unsafe) var loop: EventLoop!
    weak var serial: LoopSerialExecutor?
    package weak var task: LoopTaskExecutor?

    /// Hands a Swift concurrency job to the loop. Once the loop has shut
    /// down, the job runs on `AfterShutdown.queue` instead: a task suspended
    /// in a reaction must still be able to finish (and free what it holds);
    /// dropping its job would leak it and hang anyone awaiting it.
    func submit(_ job: UnownedJob, serial isSerial: Bool) {
        if loop.submit(isSerial ? .serialJob(job) : .taskJob(job)) { return }
        let (serial, task) = (self.serial, self.task)
        AfterShutdown.queue.async {
            if isSerial, let serial {
                job.runSynchronously(on: serial.asUnownedSerialExecutor())
            } else if let task {
                job.runSynchronously(on: task.asUnownedTaskExecutor())
            }
        }
    }
}

/// Where jobs for shut-down loops run: one serial queue, so code that was
/// confined to a loop still runs one job at a time.
enum AfterShutdown {
    package static let key = DispatchSpecificKey<Bool>()
    package static let queue: DispatchQueue = {
        let q = DispatchQueue(label: "oscar.after-shutdown")
        q.setSpecific(key: key, value: true)
        return q
    }()
    static var isCurrent: Bool { DispatchQueue.getSpecific(key: key) == true }
}

/// Runs a Swift actor's jobs on a loop, so that the actor's code and the loop's
/// I/O callbacks share one thread and can call each other synchronously
/// (`assumeIsolated`).
package final class LoopSerialExecutor: SerialExecutor {
    private let reference: LoopReference

    init(_ reference: LoopReference) {
        self.reference = reference
        reference.serial = self
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        reference.submit(UnownedJob(job), serial: true)
    }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    /// Makes `assumeIsolated` work from libuv callbacks: on the loop's thread we
    /// are isolated to this executor, whatever task (if any) is running.
    public func checkIsolated() {
        if AfterShutdown.isCurrent { return }
        reference.loop.preconditionInEventLoop()
    }
}

/// Runs tasks that prefer this loop (`Task(executorPreference:)`), such as the
/// bodies of asynchronous reactions.
package final class LoopTaskExecutor: TaskExecutor {
    private let reference: LoopReference

    init(_ reference: LoopReference) {
        self.reference = reference
        reference.task = self
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        reference.submit(UnownedJob(job), serial: false)
    }
}
