import CLibUV
import Dispatch
import Glibc
import OscarBase
import OscarCBOR
import Synchronization

/// One libuv loop running on a thread of its own.
///
/// Everything that belongs to a loop (its handles, timers, the actors pinned to
/// it and their mailboxes) is touched only on that loop's thread; other threads
/// reach it through `execute`. That single rule is what lets actors run without
/// locks, and it is checked (`preconditionInEventLoop`) at loop-only entry points.
///
/// `@unchecked Sendable`: the mutable state below is loop-confined; the only
/// cross-thread entry points are `execute`/`submit` (through the locked inbox)
/// and `shutdown`.
@usableFromInline
package final class EventLoop: @unchecked Sendable, CustomStringConvertible {
    /// Position of this loop in its group.
    public let index: Int
    /// Runs Swift actors on this loop: give it as their `unownedExecutor`.
    public let executor: LoopSerialExecutor
    /// Runs tasks on this loop: `Task(executorPreference: loop.taskExecutor)`.
    /// A separate object from `executor` on purpose: one object as both turns
    /// every same-loop actor-to-actor call into an enqueue instead of a
    /// direct switch (measured: about 18 times fewer calls a second).
    public let taskExecutor: LoopTaskExecutor

    // MARK: - Loop-confined state
    private let uvLoop: UnsafeMutablePointer<uv_loop_t>
    private var asyncHandle: UnsafeMutablePointer<uv_async_t>?
    private var timerHandle: UnsafeMutablePointer<uv_timer_t>?
    private var idleHandle: UnsafeMutablePointer<uv_idle_t>?
    // Touched only on the loop's thread, several times per message: not
    // checked for exclusivity at run time (the checks showed in profiles).
    @exclusivity(unchecked) private var ready: [LoopWork] = []
    @exclusivity(unchecked) private var readySpare: [LoopWork] = []
    private var idleActive = false
    @exclusivity(unchecked) private var timers = TimerHeap()
    @exclusivity(unchecked) private var armedDeadline: UInt64 = .max
    @exclusivity(unchecked) private var inboxBatch: [LoopWork] = []
    private var openHandleCount = 0
    private var shuttingDown = false
    /// How deeply actor reactions are nested through direct hand-off on this
    /// loop; bounded so a long chain of idle actors cannot exhaust the stack.
    /// Private to this file so its accesses are checked at compile time, not
    /// per message at run time.
    private var handOffDepth = 0

    /// Work done on this loop, counted so a spin knows the loop is still
    /// busy. Loop-confined.
    private var activity: UInt64 = 0
    /// Traffic a reply may soon follow (see `noteTraffic`), counted so the
    /// spin-before-block knows whether to spin at all. Loop-confined.
    private var traffic: UInt64 = 0
    /// How long the loop keeps polling without blocking after its last work.
    private let spin: UInt64
    /// The CPU its thread is kept on, if any.
    private let cpu: Int?

    // MARK: - Cross-thread state
    private let inbox = LoopInbox()
    private let thread = Mutex<pthread_t?>(nil)
    private let finished = Atomic<Bool>(false)
    private let loopCloseResult = Atomic<Int32>(Int32.min)
    private let handlesAfterShutdown = Atomic<Int>(-1)

    /// - Parameter spinBeforeBlock: after doing work, keep polling this long
    ///   before blocking in the kernel. An idle vCPU halts, and waking it costs
    ///   tens of microseconds per message in a request/reply exchange; a short
    ///   spin keeps the thread (and its vCPU) ready for the next message. Zero
    ///   disables it. Idle loops do not spin.
    /// - Parameter cpu: keep the loop's thread on this CPU (a warning, and
    ///   no pinning, if the process may not run there).
    package init(index: Int, spinBeforeBlock: Duration = .zero, cpu: Int? = nil) {
        self.index = index
        self.spin = UInt64(spinBeforeBlock.nanoseconds)
        self.cpu = cpu
        uvLoop = .allocate(capacity: 1)
        let rc = uv_loop_init(uvLoop)
        precondition(rc == 0, "uv_loop_init failed: \(String(cString: uv_strerror(rc)))")
        let reference = LoopReference()
        executor = LoopSerialExecutor(reference)
        taskExecutor = LoopTaskExecutor(reference)
        reference.loop = self
        uvLoop.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        openLoopHandles()
        startThread()
    }

    deinit {
        precondition(finished.load(ordering: .acquiring), "EventLoop \(index) deinitialised without shutdown()")
        uvLoop.deallocate()
    }

    public var description: String { "EventLoop(\(index))" }

    // MARK: - Threads

    /// The loop whose thread is the current thread, if any.
    public static var current: EventLoop? {
        guard let p = pthread_getspecific(currentLoopKey) else { return nil }
        return Unmanaged<EventLoop>.fromOpaque(p).takeUnretainedValue()
    }

    /// True when called on this loop's thread.
    @inline(__always)
    public var inEventLoop: Bool {
        pthread_getspecific(currentLoopKey) == Unmanaged.passUnretained(self).toOpaque()
    }

    /// Traps when called off this loop's thread: a threading mistake must fail
    /// loudly, not corrupt loop-confined state.
    @inline(__always)
    public func preconditionInEventLoop(file: StaticString = #fileID, line: UInt = #line) {
        precondition(inEventLoop, "must run on \(self)", file: file, line: line)
    }

    static func owning(_ loop: UnsafeMutablePointer<uv_loop_t>) -> EventLoop {
        Unmanaged<EventLoop>.fromOpaque(loop.pointee.data!).takeUnretainedValue()
    }

    private func startThread() {
        let started = DispatchSemaphore(value: 0)
        let context = Unmanaged.passRetained(ThreadStart(loop: self, started: started)).toOpaque()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        pthread_attr_setstacksize(&attributes, 8 << 20)
        var tid = pthread_t()
        let rc = pthread_create(&tid, &attributes, loopThreadMain, context)
        pthread_attr_destroy(&attributes)
        precondition(rc == 0, "pthread_create failed: \(rc)")
        thread.withLock { $0 = tid }
        started.wait()
    }

    fileprivate func runOnThread() {
        pthread_setspecific(currentLoopKey, Unmanaged.passUnretained(self).toOpaque())
        oscar_set_thread_name("oscar-loop-\(index)")
        // A loop made from a pinned loop's thread would start on its CPU.
        _ = oscar_thread_use_process_cpus()
        if let cpu, case let rc = oscar_pin_thread_to_cpu(Int32(clamping: cpu)), rc != 0 {
            OscarLog.shared.warning(
                "loop \(index) is not kept on CPU \(cpu), which this process may not use (\(String(cString: strerror(rc)))); the kernel places it"
            )
        }
        if spin == 0 {
            uv_run(uvLoop, UV_RUN_DEFAULT)
        } else {
            runSpinning()
        }
        // Every handle is closed: the loop can be closed for good.
        handlesAfterShutdown.store(openHandleCount, ordering: .relaxed)
        loopCloseResult.store(uv_loop_close(uvLoop), ordering: .relaxed)
        pthread_setspecific(currentLoopKey, nil)
    }

    /// `uv_run` that, after a wake-up that brought traffic, polls without
    /// blocking while work keeps happening, and blocks once none has for
    /// `spin` nanoseconds. A wake-up that brought no traffic (a timer, a
    /// heartbeat, gossip) is not followed by a spin: in an idle cluster
    /// those are all there is, and spinning after each was half of an idle
    /// node's CPU. Work still queued keeps `UV_RUN_ONCE` from blocking (the
    /// idle handle), so nothing waits.
    private func runSpinning() {
        var spinning = false
        var lastActive = uv_hrtime()
        var seen = activity
        while uv_loop_alive(uvLoop) != 0 {
            uv_run(uvLoop, UV_RUN_NOWAIT)
            let now = uv_hrtime()
            if activity != seen {
                seen = activity
                lastActive = now
            } else if !spinning || now &- lastActive > spin {
                let before = traffic
                uv_run(uvLoop, UV_RUN_ONCE)
                spinning = traffic != before
                lastActive = uv_hrtime()
                seen = activity
            }
        }
    }

    /// Notes that the loop did work (I/O callbacks call this).
    @inline(__always) package func noteActivity() { activity &+= 1 }

    /// Notes traffic that a reply or a next message may soon follow: a
    /// frame for an application's actor, an outcome of an ask, work handed
    /// over from another thread. The transport calls it for every frame
    /// but those between system actors.
    @inline(__always) package func noteTraffic() {
        traffic &+= 1
        activity &+= 1
    }

    // MARK: - Submitting work

    /// Runs `body` on this loop's thread. From the loop's own thread it is
    /// queued locally (no lock, no syscall) and runs later in this turn.
    /// Returns false once the loop is shutting down; the body is then dropped.
    @discardableResult
    public func execute(_ body: @escaping @Sendable () -> Void) -> Bool {
        submit(.closure(body))
    }

    @discardableResult
    func submit(_ work: LoopWork) -> Bool {
        if inEventLoop {
            if shuttingDown { return false }
            ready.append(work)
            armIdle()
            return true
        }
        let handle = asyncHandle
        return inbox.push(work) {
            // Called under the inbox lock, so the handle cannot be closed meanwhile.
            uv_async_send(handle)
        }
    }

    /// Schedules a runnable from the loop's own thread.
    @inline(__always)
    package func schedule(_ runnable: any LoopRunnable) {
        ready.append(.runnable(runnable))
        armIdle()
    }

    private func perform(_ work: LoopWork) {
        activity &+= 1
        switch work {
        case .closure(let body): body()
        case .runnable(let r): r.run()
        case .serialJob(let job): job.runSynchronously(on: executor.asUnownedSerialExecutor())
        case .taskJob(let job): job.runSynchronously(on: taskExecutor.asUnownedTaskExecutor())
        }
    }

    fileprivate func drainInbox() {
        inbox.drain(into: &inboxBatch)
        if !inboxBatch.isEmpty { traffic &+= 1 }
        for work in inboxBatch { perform(work) }
        inboxBatch.removeAll(keepingCapacity: true)
        runReady(rounds: 4)
    }

    /// Runs locally queued work. Each round runs a snapshot; work queued during
    /// a round waits for the next one, so a self-rescheduling actor cannot hold
    /// the loop: after `rounds` the idle handle keeps the loop from blocking
    /// while I/O gets its turn.
    fileprivate func runReady(rounds: Int) {
        var round = 0
        while !ready.isEmpty && round < rounds {
            swap(&ready, &readySpare)
            for work in readySpare { perform(work) }
            readySpare.removeAll(keepingCapacity: true)
            round += 1
        }
        if ready.isEmpty, idleActive, let idleHandle {
            uv_idle_stop(idleHandle)
            idleActive = false
        }
    }

    private func armIdle() {
        guard !idleActive, let idleHandle else { return }
        idleActive = true
        uv_idle_start(idleHandle, onIdle)
    }

    /// Enters one level of direct hand-off, or returns false at `limit`.
    @inline(__always)
    func enterHandOff(limit: Int) -> Bool {
        guard handOffDepth < limit else { return false }
        handOffDepth += 1
        return true
    }

    @inline(__always)
    func exitHandOff() { handOffDepth -= 1 }

    // MARK: - Timers

    /// Runs `body` on this loop after `delay`. Loop thread only.
    @discardableResult
    public func scheduleTimer(after delay: Duration, _ body: @escaping () -> Void) -> LoopTimer {
        let timer = LoopTimer(body)
        arm(timer, deadline: Self.deadline(after: delay))
        return timer
    }

    /// Cancels a timer that has not fired. Loop thread only.
    ///
    /// The body, and what it captured, is released now: a body may then
    /// hold its owner strongly instead of weakly. (A weak reference gives
    /// its object a side table, and every retain and release of that
    /// object then takes the runtime's slow path: a connection's handshake
    /// timer did that to every frame's connection.)
    public func cancelTimer(_ timer: LoopTimer) {
        disarm(timer)
        timer.timerCancelled()
    }

    package static func deadline(after delay: Duration) -> UInt64 {
        // Saturates: a delay past the clock's range is "never", not a deadline
        // that wrapped into the past.
        let (deadline, overflow) = uv_hrtime().addingReportingOverflow(UInt64(delay.nanoseconds))
        return overflow ? .max : deadline
    }

    package func arm(_ entry: any TimerEntry, deadline: UInt64) {
        preconditionInEventLoop()
        entry.timerDeadline = deadline
        timers.insert(entry)
        if deadline < armedDeadline { rearmTimerHandle() }
    }

    /// Leaves libuv's timer as it is. If it then fires before anything is
    /// due, `fireTimers` finds nothing and arms it for the new earliest
    /// deadline. Restarting it here cost two clock reads and libuv's own
    /// heap on every reply to an ask.
    package func disarm(_ entry: any TimerEntry) {
        preconditionInEventLoop()
        timers.remove(entry)
    }

    private func rearmTimerHandle() {
        guard let timerHandle else { return }
        guard let first = timers.earliest else {
            if armedDeadline != .max { uv_timer_stop(timerHandle) }
            armedDeadline = .max
            return
        }
        guard first.timerDeadline != armedDeadline else { return }
        armedDeadline = first.timerDeadline
        let now = uv_hrtime()
        // Rounded up, without overflow for a deadline of "never" (`.max`).
        let remaining = first.timerDeadline > now ? first.timerDeadline - now : 0
        let delayMs = remaining / 1_000_000 + (remaining % 1_000_000 == 0 ? 0 : 1)
        uv_update_time(uvLoop)
        uv_timer_start(timerHandle, onTimer, delayMs, 0)
    }

    fileprivate func fireTimers() {
        armedDeadline = .max
        let now = uv_hrtime()
        while let entry = timers.popExpired(now: now) { entry.timerFired() }
        rearmTimerHandle()
        runReady(rounds: 4)
    }

    // MARK: - Handles

    func handleOpened() { openHandleCount += 1 }
    func handleClosed() { openHandleCount -= 1 }

    /// The libuv loop, for `Transport/` to open handles on. Loop thread only.
    package var uvLoopPointer: UnsafeMutablePointer<uv_loop_t> { uvLoop }

    private func openLoopHandles() {
        let a = UVHandle.allocate(uv_async_t.self, on: self)
        uv_async_init(uvLoop, a, onAsync)
        UVHandle.retainOwner(self, in: a)
        asyncHandle = a
        let t = UVHandle.allocate(uv_timer_t.self, on: self)
        uv_timer_init(uvLoop, t)
        UVHandle.retainOwner(self, in: t)
        timerHandle = t
        let i = UVHandle.allocate(uv_idle_t.self, on: self)
        uv_idle_init(uvLoop, i)
        UVHandle.retainOwner(self, in: i)
        idleHandle = i
    }

    // MARK: - Shutdown

    /// Stops the loop: runs work still queued, cancels timers, closes every
    /// handle (each freed in its close callback), closes the libuv loop and
    /// joins the thread. Idempotent. Must not be called on a loop thread.
    public func shutdown() {
        precondition(EventLoop.current == nil, "shutdown() must not be called on a loop thread")
        guard
            let tid = thread.withLock({ t -> pthread_t? in
                defer { t = nil }; return t
            })
        else { return }
        execute { [self] in closeEverything() }
        pthread_join(tid, nil)
        finished.store(true, ordering: .releasing)
    }

    private func closeEverything() {
        // Work that arrived before the close still runs, once.
        for work in inbox.close() { perform(work) }
        runReady(rounds: 8)
        shuttingDown = true
        for entry in timers.removeAll() { entry.timerCancelled() }
        ready.removeAll()
        asyncHandle = nil
        timerHandle = nil
        idleHandle = nil
        uv_walk(uvLoop, { handle, _ in UVHandle.close(UnsafeMutableRawPointer(handle!)) }, nil)
    }

    /// After `shutdown`: handles still open when the loop ended (0 when every
    /// close callback ran) and `uv_loop_close`'s result (0, not `UV_EBUSY`).
    /// What the leak tests assert.
    public var shutdownReport: (openHandles: Int, loopCloseResult: Int32) {
        (handlesAfterShutdown.load(ordering: .relaxed), loopCloseResult.load(ordering: .relaxed))
    }
}

// MARK: - C callbacks and thread entry

private let currentLoopKey: pthread_key_t = {
    var key = pthread_key_t()
    precondition(pthread_key_create(&key, nil) == 0)
    return key
}()

private final class ThreadStart {
    let loop: EventLoop
    let started: DispatchSemaphore
    init(loop: EventLoop, started: DispatchSemaphore) {
        self.loop = loop
        self.started = started
    }
}

private func loopThreadMain(_ context: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    let start = Unmanaged<ThreadStart>.fromOpaque(context!).takeRetainedValue()
    let loop = start.loop
    start.started.signal()
    loop.runOnThread()
    return nil
}

private func onAsync(_ handle: UnsafeMutablePointer<uv_async_t>?) {
    UVHandle.owner(of: handle, as: EventLoop.self).drainInbox()
}

private func onIdle(_ handle: UnsafeMutablePointer<uv_idle_t>?) {
    UVHandle.owner(of: handle, as: EventLoop.self).runReady(rounds: 1)
}

private func onTimer(_ handle: UnsafeMutablePointer<uv_timer_t>?) {
    UVHandle.owner(of: handle, as: EventLoop.self).fireTimers()
}
