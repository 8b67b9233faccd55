import Oscar
import OscarTestSupport
import Synchronization
import Testing

@testable import OscarRuntime

/// A timer's message: which key, and which start of it (`id`).
struct TimerTick: Message, Equatable {
    var key: String
    var id: Int
}

/// What a test asks a `TimerActor` to do with its timers, in its reaction.
enum TimerOp: Codable, Sendable {
    case single(String, id: Int, ms: Int)
    case fixed(String, id: Int, ms: Int)
    case cancel(String)
    case cancelAll
    /// Lets the loop run (and timers fire) while the reaction is suspended.
    case yield(Int)
}

/// Runs the ops in a future reaction (so `yield` suspends it).
struct TimerOps: Message { var ops: [TimerOp] }
/// Runs `before`, waits for the actor's gate, then runs `after`.
struct TimerOpsAroundGate: Message {
    var before: [TimerOp]
    var after: [TimerOp]
}
struct TimerActive: Message {
    typealias Reply = Bool
    var key: String
}
struct TimerFail: Message {}

/// Records the timer messages it handles, and checks each against its own
/// model of which start of each key is current: a message of a cancelled or
/// replaced timer, or an `isActive` that disagrees, is a violation.
final class TimerActor: Reactor {
    let log: Record<TimerTick>
    let violations: Record<String>
    let gate: Gate
    var context: ActorContext!
    var expected: [String: (id: Int, periodic: Bool)] = [:]

    init(log: Record<TimerTick> = Record(), violations: Record<String> = Record(), gate: Gate = Gate()) {
        self.log = log
        self.violations = violations
        self.gate = gate
    }

    func started(_ context: ActorContext) { self.context = context }

    static func reactions(_ r: inout Reactions<TimerActor>) {
        r.on(TimerTick.self, do: { me, m in me.ticked(m) })
        r.on(
            TimerOps.self,
            future: { me, m in
                for op in m.ops { await me.apply(op) }
                return Done()
            })
        r.on(
            TimerOpsAroundGate.self,
            future: { me, m in
                for op in m.before { await me.apply(op) }
                await me.gate.wait()
                for op in m.after { await me.apply(op) }
                return Done()
            })
        r.on(TimerActive.self, result: { me, m in me.context.timers.isActive(m.key) })
        r.on(TimerFail.self, do: { _, _ in throw TestFailure.planned })
    }

    func ticked(_ m: TimerTick) {
        if (context.ref.target as? ActorCell)?.loop.inEventLoop != true {
            violations.append("\(m) handled off the actor's loop")
        }
        guard let current = expected[m.key], current.id == m.id else {
            violations.append("\(m) delivered, but \(m.key) is now \(String(describing: expected[m.key]))")
            return
        }
        if !current.periodic { expected[m.key] = nil }
        if context.timers.isActive(m.key) != current.periodic {
            violations.append("isActive(\(m.key)) is \(!current.periodic) while its message is handled")
        }
        log.append(m)
    }

    func apply(_ op: TimerOp) async {
        switch op {
        case .single(let key, let id, let ms):
            context.timers.startSingle(key, sending: TimerTick(key: key, id: id), after: .milliseconds(ms))
            expected[key] = (id, false)
        case .fixed(let key, let id, let ms):
            context.timers.startWithFixedDelay(key, sending: TimerTick(key: key, id: id), delay: .milliseconds(ms))
            expected[key] = (id, true)
        case .cancel(let key):
            context.timers.cancel(key)
            expected[key] = nil
        case .cancelAll:
            context.timers.cancelAll()
            expected = [:]
        case .yield(let n):
            for _ in 0..<n { await Task.yield() }
        }
        for key in ["a", "b", "c", "t", "fence"] where context.timers.isActive(key) != (expected[key] != nil) {
            violations.append("isActive(\(key)) is \(!(expected[key] != nil)) after \(op)")
        }
    }
}

@Suite(.timeLimit(.minutes(4))) struct ReactorTimerTests {
    // MARK: - The book alone

    typealias Book = TimerBook<String, Int, Int>

    @Test func aStartReplacingAnArmedTimerCancelsItAndOnlyTheNewGenerationIsDelivered() {
        var book = Book()
        guard case .arm(_, let first, _, _) = book.start("k", mode: .single, payload: 1, initialDelay: .zero).last
        else { return #expect(Bool(false)) }
        #expect(book.armed("k", generation: first, handle: 100) == nil)
        let replacing = book.start("k", mode: .single, payload: 2, initialDelay: .zero)
        guard case .cancel(100) = replacing.first, case .arm(_, let second, _, 2) = replacing.last else {
            return #expect(Bool(false), "\(replacing)")
        }
        #expect(second != first)
        let firedStale = book.fired("k", generation: first)
        #expect(!firedStale)
        #expect(book.taken("k", generation: first) == .drop)
        let firedCurrent = book.fired("k", generation: second)
        #expect(firedCurrent)
        #expect(book.taken("k", generation: second) == .deliver(periodic: false))
        #expect(!book.isActive("k"))
    }

    @Test func aPeriodicTimerArmsItsNextMessageOnlyAfterTheReactionEnds() {
        var book = Book()
        guard
            case .arm(_, let g, _, _) = book.start("p", mode: .fixedDelay(.seconds(1)), payload: 7, initialDelay: .zero)
                .last
        else { return #expect(Bool(false)) }
        #expect(book.armed("p", generation: g, handle: 1) == nil)
        let fired = book.fired("p", generation: g)
        #expect(fired)
        #expect(book.taken("p", generation: g) == .deliver(periodic: true))
        #expect(book.isActive("p"))
        guard case .arm(_, g, .seconds(1), 7) = book.handled("p", generation: g) else { return #expect(Bool(false)) }
        #expect(book.armed("p", generation: g, handle: 2) == nil)
        #expect(book.handled("p", generation: g) == nil, "one message in flight at a time")
        guard case .cancel(2) = book.cancel("p") else { return #expect(Bool(false)) }
        #expect(book.handled("p", generation: g) == nil)
    }

    @Test func keysOfAnyHashableTypeCompareByTypeAndValue() {
        enum Phase: Hashable, Sendable { case load, refresh }
        #expect(TimerKey(Phase.load) == TimerKey(Phase.load))
        #expect(TimerKey(Phase.load) != TimerKey(Phase.refresh))
        #expect(TimerKey("1") != TimerKey(1))
        #expect(TimerKey("tick") == TimerKey("tick"))
    }

    /// Random starts, replacements, cancels, firings, takes and reaction ends
    /// against a model: nothing of a cancelled or replaced start is
    /// delivered, a timer never has two messages armed, queued or in flight,
    /// cancelled loop timers are ones that exist, and `isActive` agrees.
    @Test func randomInterleavingsNeverDeliverAStaleMessage() {
        var (delivered, dropped) = (0, 0)
        for seed in UInt64(1)...40 {
            var rng = SeededRandom(seed: seed)
            var book = Book()
            var armed: [Int: (key: String, generation: UInt64, payload: Int)] = [:]  // handle → timer
            var mailbox: [(key: String, generation: UInt64, payload: Int)] = []
            var inFlight: (key: String, generation: UInt64)?
            var current: [String: (payload: Int, periodic: Bool, generation: UInt64)] = [:]
            var nextHandle = 0
            var nextPayload = 0
            // What the cell does with directives, on a fake loop.
            func run(_ directives: [Book.Directive]) {
                for directive in directives {
                    switch directive {
                    case .cancel(let handle):
                        #expect(armed.removeValue(forKey: handle) != nil, "seed \(seed): cancelled a timer not armed")
                    case .arm(let key, let generation, _, let payload):
                        nextHandle += 1
                        armed[nextHandle] = (key, generation, payload)
                        let stale = book.armed(key, generation: generation, handle: nextHandle)
                        #expect(stale == nil, "seed \(seed): a timer armed at once is current")
                    }
                }
            }
            for _ in 0..<400 {
                let key = ["a", "b", "c"][Int(rng.next() % 3)]
                switch rng.next() % 10 {
                case 0, 1:
                    nextPayload += 1
                    let periodic = rng.next() % 2 == 0
                    let directives = book.start(
                        key, mode: periodic ? .fixedDelay(.milliseconds(1)) : .single, payload: nextPayload,
                        initialDelay: .zero)
                    guard case .arm(key, let generation, _, nextPayload) = directives.last else {
                        return #expect(Bool(false), "seed \(seed): a start arms its timer")
                    }
                    run(directives)
                    current[key] = (nextPayload, periodic, generation)
                case 2:
                    run(book.cancel(key).map { [$0] } ?? [])
                    current[key] = nil
                case 3 where rng.next() % 4 == 0:
                    run(book.cancelAll())
                    current = [:]
                case 3, 4, 5:
                    // The loop fires one of the armed timers.
                    if let handle = armed.keys.sorted().randomElement(using: &rng),
                        let t = armed.removeValue(forKey: handle), book.fired(t.key, generation: t.generation)
                    {
                        mailbox.append(t)
                    }
                case 6 where inFlight == nil && !mailbox.isEmpty, 7 where inFlight == nil && !mailbox.isEmpty:
                    let t = mailbox.removeFirst()
                    switch book.taken(t.key, generation: t.generation) {
                    case .drop:
                        dropped += 1
                        #expect(current[t.key]?.generation != t.generation, "seed \(seed): dropped a live \(t)")
                    case .deliver(let periodic):
                        delivered += 1
                        #expect(current[t.key]?.generation == t.generation, "seed \(seed): delivered a stale \(t)")
                        #expect(current[t.key]?.payload == t.payload)
                        #expect(current[t.key]?.periodic == periodic)
                        if periodic { inFlight = (t.key, t.generation) } else { current[t.key] = nil }
                    }
                default:
                    if let t = inFlight {
                        inFlight = nil
                        run(book.handled(t.key, generation: t.generation).map { [$0] } ?? [])
                    }
                }
                for (k, timer) in current {
                    #expect(book.isActive(k), "seed \(seed): \(k) is active")
                    let live =
                        armed.values.filter { $0.generation == timer.generation }.count
                        + mailbox.filter { $0.generation == timer.generation }.count
                        + (inFlight?.generation == timer.generation ? 1 : 0)
                    // Exactly one: never two, and a periodic timer never stalls.
                    #expect(live == 1, "seed \(seed): \(live) messages of \(k) armed, queued or in flight")
                }
                #expect(book.count == current.count, "seed \(seed): the active keys")
            }
        }
        // The runs exercised both: messages delivered, and stale ones dropped.
        #expect(delivered > 200 && dropped > 50, "\(delivered) delivered, \(dropped) dropped")
    }

    // MARK: - On an actor

    @Test func aSingleTimerSendsItsMessageOnceOnTheActorsLoop() async throws {
        let system = ActorSystem(settings: .init(loopCount: 2))
        defer { system.shutdown() }
        let log = Record<TimerTick>()
        let violations = Record<String>()
        let actor = try system.spawn("timed") { TimerActor(log: log, violations: violations) }
        _ = try await actor.ask(
            TimerOps(ops: [.single("a", id: 1, ms: 5), .single("fence", id: 2, ms: 60)]), timeout: .seconds(120))
        // Timers fire in deadline order on one loop: once the fence has
        // arrived, a second message of "a" would have too.
        #expect(await eventually { log.all.contains(TimerTick(key: "fence", id: 2)) })
        #expect(log.all == [TimerTick(key: "a", id: 1), TimerTick(key: "fence", id: 2)])
        #expect(try await actor.ask(TimerActive(key: "a"), timeout: .seconds(120)) == false)
        #expect(violations.all.isEmpty, "\(violations.all)")
    }

    @Test func aMessageAlreadyQueuedIsDroppedWhenItsTimerIsCancelledOrReplaced() async throws {
        let system = ActorSystem(settings: .init(loopCount: 2))
        defer { system.shutdown() }
        for (n, after) in [[TimerOp.cancel("t")], [.single("t", id: 2, ms: 0)], [.cancelAll]].enumerated() {
            for periodic in [false, true] {
                let log = Record<TimerTick>()
                let violations = Record<String>()
                let gate = Gate()
                let actor = try system.spawn("queued-\(n)-\(periodic)") {
                    TimerActor(log: log, violations: violations, gate: gate)
                }
                let cell = try #require(actor.target as? ActorCell)
                let start: TimerOp = periodic ? .fixed("t", id: 1, ms: 0) : .single("t", id: 1, ms: 0)
                actor.tell(TimerOpsAroundGate(before: [start], after: after))
                // The reaction waits on the gate; the timer fires meanwhile,
                // and its message waits in the mailbox (load 2: it and the
                // suspended reaction).
                #expect(await eventually { cell.load == 2 && gate.waiting })
                gate.open()
                _ = try await actor.ask(TimerOps(ops: [.single("fence", id: 9, ms: 40)]), timeout: .seconds(120))
                #expect(await eventually { log.all.contains(TimerTick(key: "fence", id: 9)) })
                #expect(!log.all.contains(TimerTick(key: "t", id: 1)), "\(after), periodic: \(periodic)")
                #expect(log.all.contains(TimerTick(key: "t", id: 2)) == (n == 1), "\(log.all)")
                #expect(violations.all.isEmpty, "\(violations.all)")
                system.stop(actor)
            }
        }
    }

    @Test func randomStartsCancelsAndReplacementsNeverDeliverAStaleMessage() async throws {
        let system = ActorSystem(settings: .init(loopCount: 2))
        defer { system.shutdown() }
        var rng = SeededRandom(seed: 0x71_AE25)
        let log = Record<TimerTick>()
        let violations = Record<String>()
        let actor = try system.spawn("random") { TimerActor(log: log, violations: violations) }
        var id = 0
        for _ in 0..<(underSanitizer ? 40 : 120) {
            var ops: [TimerOp] = []
            for _ in 0..<8 {
                let key = ["a", "b", "c"][Int(rng.next() % 3)]
                id += 1
                switch rng.next() % 6 {
                case 0, 1: ops.append(.single(key, id: id, ms: Int(rng.next() % 3)))
                case 2: ops.append(.fixed(key, id: id, ms: Int(rng.next() % 3)))
                case 3: ops.append(.cancel(key))
                case 4 where rng.next() % 5 == 0: ops.append(.cancelAll)
                default: ops.append(.yield(Int(rng.next() % 30)))
                }
            }
            // Tells, so that ticks and further ops interleave in the mailbox.
            actor.tell(TimerOps(ops: ops))
            if rng.next() % 4 == 0 { _ = try await actor.ask(TimerOps(ops: []), timeout: .seconds(120)) }
        }
        _ = try await actor.ask(TimerOps(ops: [.cancelAll, .single("fence", id: -1, ms: 30)]), timeout: .seconds(120))
        #expect(await eventually { log.all.contains(TimerTick(key: "fence", id: -1)) })
        #expect(violations.all.isEmpty, "\(violations.all.prefix(5))")
        // Not vacuous: timers did fire between the ops (how many depends on
        // the machine's speed; an instrumented run on two cores saw ten).
        let ticks = log.all.filter { $0.key != "fence" }.count
        #expect(ticks >= 2, "the run delivered timer messages: \(ticks)")
    }

    @Test func aPeriodicTimerWaitsForTheReactionSoASlowActorGetsNoPileUp() async throws {
        let system = ActorSystem(settings: .init(loopCount: 2))
        defer { system.shutdown() }
        let slow = Record<(load: Int, start: ContinuousClock.Instant, end: ContinuousClock.Instant)>()
        let actor = try system.spawn("slow") { SlowTimerActor(slow: slow) }
        #expect(await eventually { slow.all.count >= 15 })
        // Taken before the stop is sent: each tick reads its load when it
        // starts and is recorded after, so none of these can count the stop
        // message (a tick that starts with the stop queued behind it sees
        // load 2, rightly).
        let ticks = slow.all
        _ = try await actor.ask(StopSlowTicks(), timeout: .seconds(120))
        // Only the tick being handled: no other waits behind it, though each
        // reaction takes five times the delay.
        #expect(ticks.allSatisfy { $0.load == 1 }, "\(ticks.map(\.load))")
        for (previous, next) in zip(ticks, ticks.dropFirst()) {
            #expect(next.start - previous.end >= .milliseconds(2), "fixed delay after the reaction")
        }
    }

    @Test func everyTimerEndsWhenTheActorStopsAndNoneBecomesADeadLetter() async throws {
        let system = ActorSystem(settings: .init(loopCount: 2))
        defer { system.shutdown() }
        let log = Record<TimerTick>()
        let actor = try system.spawn("stopping") { TimerActor(log: log) }
        let cell = try #require(actor.target as? ActorCell)
        _ = try await actor.ask(
            TimerOps(ops: [.fixed("a", id: 1, ms: 1), .single("b", id: 2, ms: 1_000)]), timeout: .seconds(120))
        #expect(await eventually { log.all.count >= 3 })
        let deadLetters = system.deadLetters
        system.stop(actor)
        #expect(await eventually { cell.isTerminated })
        let count = log.all.count
        // On a loaded machine the stop can come after b's second: then b
        // ran before it, which is no fault.
        let bRanBeforeTheStop = log.all.contains(TimerTick(key: "b", id: 2))
        let fenceLog = Record<TimerTick>()
        let fence = try system.spawn("fence", colocatedWith: actor) { TimerActor(log: fenceLog) }
        _ = try await fence.ask(TimerOps(ops: [.single("fence", id: 0, ms: 1_200)]), timeout: .seconds(120))
        #expect(await eventually { !fenceLog.all.isEmpty })
        #expect(log.all.count == count, "no timer message after the stop")
        #expect(
            log.all.contains(TimerTick(key: "b", id: 2)) == bRanBeforeTheStop,
            "b, due before the fence, ran after the stop")
        #expect(system.deadLetters == deadLetters)
    }

    @Test func aRestartCancelsTheTimersOfTheRetiredInstance() async throws {
        let system = ActorSystem(settings: .init(loopCount: 2))
        defer { system.shutdown() }
        let log = Record<TimerTick>()
        let violations = Record<String>()
        let actor = try system.spawn("restarting", supervision: .restart(backoff: .milliseconds(1))) {
            TimerActor(log: log, violations: violations)
        }
        _ = try await actor.ask(
            TimerOps(ops: [.single("a", id: 1, ms: 1_000), .fixed("b", id: 2, ms: 1_000)]), timeout: .seconds(120))
        await #expect(throws: AskError.self) { try await actor.ask(TimerFail(), timeout: .seconds(120)) }
        #expect(try await actor.ask(TimerActive(key: "a"), timeout: .seconds(120)) == false)
        #expect(try await actor.ask(TimerActive(key: "b"), timeout: .seconds(120)) == false)
        _ = try await actor.ask(TimerOps(ops: [.single("fence", id: 3, ms: 1_200)]), timeout: .seconds(120))
        #expect(await eventually { log.all.contains(TimerTick(key: "fence", id: 3)) })
        // A message of the old timers reaching the fresh instance (which
        // started none) would be a violation; one the old instance handled
        // before it failed (a very slow machine) would not.
        #expect(violations.all.isEmpty, "\(violations.all)")
        #expect(log.all.last == TimerTick(key: "fence", id: 3))
    }
}

/// A periodic timer's message whose reaction is slow.
struct SlowTick: Message {}
struct StopSlowTicks: Message {}

/// Handles a fixed-delay tick every 2 ms whose reaction takes 10 ms.
final class SlowTimerActor: Reactor {
    let slow: Record<(load: Int, start: ContinuousClock.Instant, end: ContinuousClock.Instant)>
    var context: ActorContext!
    init(slow: Record<(load: Int, start: ContinuousClock.Instant, end: ContinuousClock.Instant)>) { self.slow = slow }

    func started(_ context: ActorContext) {
        self.context = context
        context.timers.startWithFixedDelay("slow", sending: SlowTick(), delay: .milliseconds(2))
    }

    static func reactions(_ r: inout Reactions<SlowTimerActor>) {
        r.on(
            SlowTick.self,
            do: { me, _ in
                let clock = ContinuousClock()
                let start = clock.now
                let load = (me.context.ref.target as? ActorCell)?.load ?? -1
                while clock.now - start < .milliseconds(10) {}  // a slow reaction, not a wait
                me.slow.append((load, start, clock.now))
            })
        r.on(StopSlowTicks.self, do: { me, _ in me.context.timers.cancelAll() })
    }
}
