import Oscar
import OscarTestSupport
import Synchronization
import Testing

@Suite(.timeLimit(.minutes(5))) struct EventLoopTests {
    @Test func executeRunsOnTheLoopThreadInSubmissionOrderPerProducer() async {
        let group = EventLoopGroup(loopCount: 2)
        defer { group.shutdown() }
        let loop = group.loops[1]
        let seen = Record<(producer: Int, seq: Int, onLoop: Bool)>()
        await withTaskGroup(of: Void.self) { tasks in
            for producer in 0..<4 {
                tasks.addTask {
                    for seq in 0..<2_000 {
                        loop.execute { seen.append((producer, seq, loop.inEventLoop)) }
                    }
                }
            }
        }
        #expect(await eventually { seen.all.count == 8_000 })
        let all = seen.all
        #expect(all.allSatisfy { $0.onLoop })
        for producer in 0..<4 {
            let seqs = all.filter { $0.producer == producer }.map(\.seq)
            #expect(seqs == Array(0..<2_000))
        }
    }

    /// Loops given CPUs are kept on them, round the list; a CPU the process
    /// may not use leaves its loop where the kernel puts it, running. A
    /// thread Oscar starts from a pinned loop (the bulk lane's) may run on
    /// every CPU of the process, not only the loop's.
    @Test func loopsAreKeptOnTheCPUsTheyAreGiven() async throws {
        /// The CPUs a thread may run on, as the kernel lists them
        /// (`/proc/self` is the main thread: the process's own set).
        @Sendable func allowedCPUs(_ task: String = "thread-self") -> String {
            let status = (try? String(contentsOfFile: "/proc/\(task)/status", encoding: .utf8)) ?? ""
            let line = status.split(separator: "\n").first { $0.hasPrefix("Cpus_allowed_list:") }
            return line.map { String($0.dropFirst("Cpus_allowed_list:".count).filter { !$0.isWhitespace }) } ?? "?"
        }
        let processCPUs = allowedCPUs("self")
        let first = try #require(Int(processCPUs.prefix { $0.isNumber }))
        let group = EventLoopGroup(loopCount: 3, cpus: [first, 1023])
        defer { group.shutdown() }
        let seen = Record<(loop: Int, cpus: String)>()
        for loop in group.loops { loop.execute { seen.append((loop.index, allowedCPUs())) } }
        let started = Record<String>()
        group.loops[0].execute {
            _ = ProcessControl.startThread { started.append(allowedCPUs()) }
        }
        #expect(await eventually { seen.all.count == 3 && started.all.count == 1 })
        let byLoop = Dictionary(uniqueKeysWithValues: seen.all.map { ($0.loop, $0.cpus) })
        #expect(byLoop[0] == "\(first)" && byLoop[2] == "\(first)")
        #expect(byLoop[1] == processCPUs, "CPU 1023 is not on this machine: loop 1 stays unpinned")
        #expect(started.all == [processCPUs], "a thread started from a pinned loop")
    }

    @Test func timersFireInDeadlineOrderAndCancelledOnesDoNot() async {
        let group = EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let loop = group.loops[0]
        let fired = Record<Int>()
        loop.execute {
            loop.scheduleTimer(after: .milliseconds(30)) { fired.append(3) }
            loop.scheduleTimer(after: .milliseconds(10)) { fired.append(1) }
            let cancelled = loop.scheduleTimer(after: .milliseconds(15)) { fired.append(99) }
            loop.scheduleTimer(after: .milliseconds(20)) { fired.append(2) }
            loop.cancelTimer(cancelled)
        }
        #expect(await eventually { fired.all.count == 3 })
        #expect(fired.all == [1, 2, 3])
    }

    /// Cancelling the earliest timer leaves libuv's timer armed for it: the
    /// early wake-up must find nothing due and still fire the later timers
    /// on time, and a timer armed earlier than all others must not wait.
    @Test func cancellingTheEarliestTimerNeitherFiresNorDelaysTheRest() async {
        let group = EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let loop = group.loops[0]
        let clock = ContinuousClock()
        let start = clock.now
        let fired = Record<(Int, Duration)>()
        loop.execute {
            let first = loop.scheduleTimer(after: .milliseconds(20)) { fired.append((99, clock.now - start)) }
            loop.scheduleTimer(after: .milliseconds(60)) { fired.append((2, clock.now - start)) }
            loop.cancelTimer(first)
            loop.scheduleTimer(after: .milliseconds(40)) { fired.append((1, clock.now - start)) }
        }
        #expect(await eventually { fired.all.count == 2 })
        let all = fired.all
        #expect(all.map(\.0) == [1, 2])
        #expect(all.count == 2 && all[0].1 >= .milliseconds(40) && all[1].1 >= .milliseconds(60))
        // A timer earlier than every armed one re-arms libuv's timer at once.
        let early = Mutex<Duration?>(nil)
        let second = clock.now
        loop.execute {
            loop.scheduleTimer(after: .seconds(30)) {}
            loop.scheduleTimer(after: .milliseconds(10)) { early.withLock { $0 = clock.now - second } }
        }
        #expect(await eventually(timeout: .seconds(30)) { early.withLock { $0 } != nil })
    }

    @Test func aTimerDoesNotFireBeforeItsDelay() async {
        let group = EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let loop = group.loops[0]
        let clock = ContinuousClock()
        let start = clock.now
        let elapsed = Mutex<Duration?>(nil)
        loop.execute { loop.scheduleTimer(after: .milliseconds(50)) { elapsed.withLock { $0 = clock.now - start } } }
        #expect(await eventually { elapsed.withLock { $0 } != nil })
        #expect(elapsed.withLock { $0 }! >= .milliseconds(50))
    }

    @Test func shutdownClosesEveryHandleAndFreesTheLoops() {
        weak var weakLoop: EventLoop?
        do {
            let group = EventLoopGroup(loopCount: 3)
            weakLoop = group.loops[2]
            for loop in group.loops {
                loop.execute { loop.scheduleTimer(after: .seconds(60)) {} }
            }
            group.shutdown()
            group.shutdown()  // idempotent
            for loop in group.loops {
                #expect(loop.shutdownReport.openHandles == 0)
                #expect(loop.shutdownReport.loopCloseResult == 0)
            }
        }
        #expect(weakLoop == nil)
    }

    @Test func workSubmittedAfterShutdownIsRefused() {
        let group = EventLoopGroup(loopCount: 1)
        group.shutdown()
        #expect(group.loops[0].execute {} == false)
    }

    @Test func aSwiftActorOnTheLoopExecutorRunsOnTheLoopThread() async {
        let group = EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let loop = group.loops[0]
        let counter = LoopBoundCounter(loop: loop)
        #expect(await counter.incrementReportingLoop() == true)
        // From a libuv callback on that loop, the actor's state is reachable synchronously.
        let value = Mutex<Int>(-1)
        loop.execute { value.withLock { $0 = counter.assumeIsolated { $0.value } } }
        #expect(await eventually { value.withLock { $0 } == 1 })
    }

    @Test func aTaskPreferringTheLoopRunsOnIt() async {
        let group = EventLoopGroup(loopCount: 2)
        defer { group.shutdown() }
        let loop = group.loops[1]
        let onLoop = await Task(executorPreference: loop.taskExecutor) {
            await Task.yield()
            return EventLoop.current === loop
        }.value
        #expect(onLoop)
    }
}

actor LoopBoundCounter {
    let loop: EventLoop
    var value = 0
    init(loop: EventLoop) { self.loop = loop }
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.executor.asUnownedSerialExecutor() }

    func incrementReportingLoop() -> Bool {
        value += 1
        return loop.inEventLoop
    }
}
