/// Lets the executors point back at their loop, which cannot be referenced
/// until its own initialiser has finished.
final class LoopReference: @unchecked Sendable {
    unowned(unsafe) var loop: EventLoop!
}

/// Runs a Swift actor's jobs on a loop, so that the actor's code and the loop's
/// I/O callbacks share one thread and can call each other synchronously
/// (`assumeIsolated`).
public final class LoopSerialExecutor: SerialExecutor {
    private let reference: LoopReference

    init(_ reference: LoopReference) { self.reference = reference }

    public func enqueue(_ job: consuming ExecutorJob) {
        let loop = reference.loop!
        if !loop.submit(.serialJob(UnownedJob(job))) {
            Log.shared.warning("\(loop) is shut down; a Swift actor job was dropped")
        }
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
        let loop = reference.loop!
        if !loop.submit(.taskJob(UnownedJob(job))) {
            Log.shared.warning("\(loop) is shut down; a task job was dropped")
        }
    }
}
