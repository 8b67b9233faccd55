/// Lets the executors point back at their loop, which cannot be referenced
/// until its own initialiser has finished.
final class LoopReference: @unchecked Sendable {
    unowned(unsafe) var loop: EventLoop!

    /// Hands a Swift concurrency job to the loop; after shutdown the job can
    /// only be dropped, which is logged.
    func submit(_ work: LoopWork, what: String) {
        if !loop.submit(work) { Log.shared.warning("\(loop!) is shut down; a \(what) was dropped") }
    }
}

/// Runs a Swift actor's jobs on a loop, so that the actor's code and the loop's
/// I/O callbacks share one thread and can call each other synchronously
/// (`assumeIsolated`).
public final class LoopSerialExecutor: SerialExecutor {
    private let reference: LoopReference

    init(_ reference: LoopReference) { self.reference = reference }

    public func enqueue(_ job: consuming ExecutorJob) {
        reference.submit(.serialJob(UnownedJob(job)), what: "Swift actor job")
    }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    /// Makes `assumeIsolated` work from libuv callbacks: on the loop's thread we
    /// are isolated to this executor, whatever task (if any) is running.
    public func checkIsolated() {
        reference.loop.preconditionInEventLoop()
    }
}

/// Runs tasks that prefer this loop (`Task(executorPreference:)`), such as the
/// bodies of asynchronous reactions.
public final class LoopTaskExecutor: TaskExecutor {
    private let reference: LoopReference

    init(_ reference: LoopReference) { self.reference = reference }

    public func enqueue(_ job: consuming ExecutorJob) {
        reference.submit(.taskJob(UnownedJob(job)), what: "task job")
    }
}
