import Oscar
import OscarTestSupport
import Testing

/// The supervision decision alone, driven with a fake clock (times are
/// durations since an arbitrary origin).
@Suite(.timeLimit(.minutes(5))) struct SupervisorTests {
    @Test func theDefaultIsResume() {
        #expect(SupervisionStrategy.default == .resume)
    }

    @Test func resumeAndStopAnswerEveryFailureTheSameWay() {
        var resume = Supervisor(.resume)
        var stop = Supervisor(.stop)
        for second in 0..<5 {
            #expect(resume.onFailure(at: .seconds(second)) == .resume)
            #expect(stop.onFailure(at: .seconds(second)) == .stop)
        }
    }

    @Test func restartsBackOffExponentiallyAndStopOnceTheLimitIsSpent() {
        var s = Supervisor(.restart(maxRestarts: 3, within: .seconds(10), backoff: .milliseconds(100)))
        #expect(s.onFailure(at: .seconds(0)) == .restart(after: .milliseconds(100)))
        #expect(s.onFailure(at: .seconds(1)) == .restart(after: .milliseconds(200)))
        #expect(s.onFailure(at: .seconds(2)) == .restart(after: .milliseconds(400)))
        #expect(s.onFailure(at: .seconds(3)) == .stop, "a fourth failure within 10 s escalates")
    }

    @Test func restartsOlderThanTheWindowNoLongerCount() {
        var s = Supervisor(.restart(maxRestarts: 3, within: .seconds(10), backoff: .milliseconds(100)))
        for second in 0..<3 { _ = s.onFailure(at: .seconds(second)) }
        // The restart at 0 s has left the window; two remain, so the backoff
        // is the third step's.
        #expect(s.onFailure(at: .milliseconds(10_500)) == .restart(after: .milliseconds(400)))
        // 12.5 s: those at 1 s and 2 s have left it too.
        #expect(s.onFailure(at: .milliseconds(12_500)) == .restart(after: .milliseconds(200)))
        #expect(s.restartTimes.count == 2)
    }

    @Test func aQuietWindowResetsTheBackoff() {
        var s = Supervisor(.restart(maxRestarts: 5, within: .seconds(1), backoff: .milliseconds(50)))
        #expect(s.onFailure(at: .seconds(0)) == .restart(after: .milliseconds(50)))
        #expect(s.onFailure(at: .milliseconds(100)) == .restart(after: .milliseconds(100)))
        #expect(s.onFailure(at: .seconds(60)) == .restart(after: .milliseconds(50)))
    }

    @Test func backoffIsCappedAndDoublingNeverOverflows() {
        #expect(Supervisor.backoff(.seconds(1), doubled: 3, capped: .seconds(5)) == .seconds(5))
        #expect(Supervisor.backoff(.seconds(1), doubled: 2, capped: .seconds(5)) == .seconds(4))
        #expect(Supervisor.backoff(.seconds(1), doubled: 10_000, capped: .seconds(30)) == .seconds(30))
        #expect(Supervisor.backoff(.seconds(Int64.max / 2), doubled: 4, capped: .seconds(Int64.max)) > .zero)
        var s = Supervisor(
            .restart(maxRestarts: 100, within: .seconds(1_000), backoff: .seconds(1), maxBackoff: .seconds(8)))
        let delays = (0..<6).map { s.onFailure(at: .seconds($0)) }
        #expect(delays.last == .restart(after: .seconds(8)))
    }

    @Test func nonsenseLimitsAreClampedNotTrapped() {
        var s = Supervisor(.restart(maxRestarts: -4, within: .seconds(-1), backoff: .seconds(-1)))
        #expect(s.onFailure(at: .zero) == .restart(after: .zero), "at least one restart")
    }
}

/// Supervision through a real system.
@Suite(.timeLimit(.minutes(5))) struct SupervisionTests {
    @Test func aThrowingReactionResumesByDefaultAndKeepsState() async throws {
        let probe = FlakyProbe()
        let system = ActorSystem(settings: .init(loopCount: 2))
        defer { system.shutdown() }
        let flaky = try system.spawn("flaky") { Flaky(probe) }
        _ = try await flaky.ask(Add(n: 5))
        await #expect(throws: AskError.handlerFailed("boom")) { try await flaky.ask(Explode()) }
        #expect(try await flaky.ask(Total()) == 5)
        #expect(probe.starts.count == 1)
    }

    @Test func restartMakesAFreshInstanceAndHandlesEveryQueuedMessageOnce() async throws {
        let probe = FlakyProbe()
        let system = ActorSystem(settings: .init(loopCount: 2))
        defer { system.shutdown() }
        let flaky = try system.spawn("flaky", supervision: .restart(backoff: .milliseconds(200))) { Flaky(probe) }
        _ = try await flaky.ask(Add(n: 5))
        // The ask whose reaction threw gets its typed error.
        await #expect(throws: AskError.handlerFailed("boom")) { try await flaky.ask(Explode()) }
        // Sent during the backoff: they wait, then the new instance takes each once.
        for n in 1...10 { flaky.tell(Add(n: n)) }
        #expect(try await flaky.ask(Total(), timeout: .seconds(20)) == 55, "fresh state, no message lost or doubled")
        #expect(probe.starts.count == 2)
        #expect(probe.stops.count == 1, "the failed instance got stopped()")
        #expect(await eventually(timeout: .seconds(10)) { probe.freed.count == 1 }, "the failed instance is released")
    }

    @Test func aFutureReactionThatThrowsIsSupervisedToo() async throws {
        let probe = FlakyProbe()
        let system = ActorSystem(settings: .init(loopCount: 2))
        defer { system.shutdown() }
        let flaky = try system.spawn("flaky", supervision: .restart(backoff: .milliseconds(10))) { Flaky(probe) }
        _ = try await flaky.ask(Add(n: 4))
        await #expect(throws: AskError.handlerFailed("boom")) { try await flaky.ask(ExplodeLater()) }
        #expect(try await flaky.ask(Total(), timeout: .seconds(20)) == 0)
        #expect(probe.starts.count == 2)
    }

    @Test func exceedingTheRestartLimitStopsTheActorAndTellsItsWatchers() async throws {
        let probe = FlakyProbe()
        let seen = Record<ActorAddress>()
        let system = ActorSystem(settings: .init(loopCount: 2))
        defer { system.shutdown() }
        let flaky = try system.spawn(
            "flaky", supervision: .restart(maxRestarts: 2, within: .seconds(60), backoff: .milliseconds(10))
        ) { Flaky(probe) }
        let watcher = try system.spawn("watcher") { DeathRecorder(seen) }
        _ = try await watcher.ask(WatchIt(target: flaky))
        for _ in 0..<3 {
            await #expect(throws: AskError.handlerFailed("boom")) {
                try await flaky.ask(Explode(), timeout: .seconds(20))
            }
        }
        #expect(await eventually(timeout: .seconds(20)) { seen.all == [flaky.address] }, "Terminated, once")
        await #expect(throws: AskError.stopped(flaky.address)) { try await flaky.ask(Total()) }
        #expect(system.actor("flaky") == nil, "its name is free")
        #expect(probe.starts.count == 3)
        #expect(await eventually(timeout: .seconds(10)) { probe.freed.count == 3 }, "no instance leaks")
    }

    @Test func stopEndsTheActorAfterTheFailedMessageAndFailsWhatWaited() async throws {
        let probe = FlakyProbe()
        let seen = Record<ActorAddress>()
        let system = ActorSystem(settings: .init(loopCount: 2))
        defer { system.shutdown() }
        let flaky = try system.spawn("flaky", supervision: .stop) { Flaky(probe) }
        let watcher = try system.spawn("watcher") { DeathRecorder(seen) }
        _ = try await watcher.ask(WatchIt(target: flaky))
        flaky.tell(Explode())
        await #expect(throws: AskError.stopped(flaky.address)) { try await flaky.ask(Total()) }
        #expect(await eventually(timeout: .seconds(20)) { seen.all == [flaky.address] })
        #expect(probe.stops.count == 1)
    }

    @Test func aPoolReplacesARouteeItsSupervisionStopped() async throws {
        let probe = FlakyProbe()
        let system = ActorSystem(settings: .init(loopCount: 2)) { actors in
            actors.pool("flakies", size: 1, supervision: .stop) { Flaky(probe) }
        }
        defer { system.shutdown() }
        let pool = try #require(system.actor("flakies"))
        await #expect(throws: AskError.handlerFailed("boom")) { try await pool.ask(Explode()) }
        let served = await eventually(timeout: .seconds(20)) {
            (try? await pool.ask(Add(n: 1))) != nil
        }
        #expect(served, "a fresh routee takes over")
        #expect(probe.starts.count == 2)
    }

    @Test func shutdownDuringARestartBackoffFailsWaitingAsksAtOnce() async throws {
        let probe = FlakyProbe()
        let system = ActorSystem(settings: .init(loopCount: 2))
        let flaky = try system.spawn("flaky", supervision: .restart(backoff: .seconds(60), maxBackoff: .seconds(60))) {
            Flaky(probe)
        }
        await #expect(throws: AskError.handlerFailed("boom")) { try await flaky.ask(Explode()) }
        let waiting = Task { try await flaky.ask(Total(), timeout: .seconds(120)) }
        #expect(await eventually(timeout: .seconds(10)) { (flaky.target as? ActorCell)?.load ?? 0 >= 2 })
        let clock = ContinuousClock()
        let start = clock.now
        system.shutdown()
        await #expect(throws: AskError.stopped(flaky.address)) { try await waiting.value }
        #expect(clock.now - start < .seconds(30), "not at the end of the 60 s backoff")
        #expect(probe.starts.count == 1)
    }
}

// MARK: - Test actors

struct Add: Message {
    var n: Int
}
struct Total: Message {
    typealias Reply = Int
}
struct Explode: Message {}
struct ExplodeLater: Message {}
struct WatchIt: Message {
    var target: ActorRef
}

enum FlakyError: Error, CustomStringConvertible {
    case boom
    var description: String { "boom" }
}

final class FlakyProbe: Sendable {
    let starts = Tally()
    let stops = Tally()
    let freed = Tally()
}

/// Sums what it is told; throws on `Explode` (at once) and `ExplodeLater`
/// (after a suspension). Counts its starts, stops and deinits.
final class Flaky: Reactor {
    let probe: FlakyProbe
    var total = 0
    init(_ probe: FlakyProbe) { self.probe = probe }
    deinit { probe.freed.increment() }
    func started(_ context: ActorContext) { probe.starts.increment() }
    func stopped() { probe.stops.increment() }
    static func reactions(_ r: inout Reactions<Flaky>) {
        r.on(Add.self, do: { me, m in me.total += m.n })
        r.on(Total.self, result: { me, _ in me.total })
        r.on(Explode.self, do: { _, _ in throw FlakyError.boom })
        r.on(
            ExplodeLater.self,
            future: { _, _ in
                await Task.yield()
                throw FlakyError.boom
            })
    }
}

/// Watches what it is asked to, and records every `Terminated`.
final class DeathRecorder: Reactor {
    let seen: Record<ActorAddress>
    var context: ActorContext?
    init(_ seen: Record<ActorAddress>) { self.seen = seen }
    func started(_ context: ActorContext) { self.context = context }
    static func reactions(_ r: inout Reactions<DeathRecorder>) {
        r.on(WatchIt.self, do: { me, m in me.context?.watch(m.target) })
        r.on(Terminated.self, do: { me, m in me.seen.append(m.actor.address) })
    }
}
