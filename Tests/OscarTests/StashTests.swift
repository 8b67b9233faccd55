import Oscar
import OscarTestSupport
import Synchronization
import Testing

@testable import OscarRuntime

/// Handled at once when the stasher is open, stashed while it is closed;
/// the reply is `n`. With `catchFull`, a full stash answers -1 instead of
/// failing the reaction.
struct StashItem: Message {
    typealias Reply = Int
    var n: Int
    var catchFull: Bool? = nil
}
/// As `StashItem`, but stashes from a future reaction, after a suspension.
struct StashItemLater: Message {
    typealias Reply = Int
    var n: Int
}
struct StashOpen: Message {}
struct StashClose: Message {}
/// Waits for the stasher's gate, then opens as `StashOpen` does.
struct StashOpenAfterGate: Message {}
struct StashHandled: Message { typealias Reply = [Int] }
struct StashCount: Message { typealias Reply = Int }
struct StashFail: Message {}

protocol StashSize { static var capacity: Int { get } }
enum DefaultStash: StashSize { static var capacity: Int { 1_000 } }
enum ThreeStash: StashSize { static var capacity: Int { 3 } }

/// Stashes items while closed; opening unstashes them all.
final class Stasher<Size: StashSize>: Reactor {
    static var stashCapacity: Int { Size.capacity }
    let gate: Gate
    /// What `stash()` threw in `started(_:)`, where there is no message.
    let startErrors: Record<String>
    var context: ActorContext!
    var isOpen = false
    var handled: [Int] = []

    init(gate: Gate = Gate(), startErrors: Record<String> = Record()) {
        self.gate = gate
        self.startErrors = startErrors
    }

    func started(_ context: ActorContext) {
        self.context = context
        do { try context.stash() } catch { startErrors.append("\(error)") }
    }

    func open() {
        isOpen = true
        context.unstashAll()
    }

    static func reactions(_ r: inout Reactions<Stasher>) {
        r.on(
            StashItem.self,
            result: { me, m in
                if !me.isOpen {
                    if m.catchFull == true {
                        do { try me.context.stash() } catch let error as ActorContext.StashError {
                            return error == .full(capacity: Size.capacity) ? -1 : -2
                        }
                    } else {
                        try me.context.stash()
                    }
                }
                me.handled.append(m.n)
                return m.n
            })
        r.on(
            StashItemLater.self,
            future: { me, m in
                await Task.yield()
                guard me.isOpen else { try me.context.stash() }
                me.handled.append(m.n)
                return m.n
            })
        r.on(StashOpen.self, do: { me, _ in me.open() })
        r.on(StashClose.self, do: { me, _ in me.isOpen = false })
        r.on(
            StashOpenAfterGate.self,
            future: { me, _ in
                await me.gate.wait()
                me.open()
                return Done()
            })
        r.on(StashHandled.self, result: { me, _ in me.handled })
        r.on(StashCount.self, result: { me, _ in me.context.stashedCount })
        r.on(StashFail.self, do: { _, _ in throw TestFailure.planned })
    }
}

/// A reply target that records the outcome of an "ask" sent in order with
/// tells (through the cell, as `ask` does), for the randomized test.
final class StashReplyProbe: ReplyTarget, @unchecked Sendable {
    let n: Int
    let outcomes: Record<String>
    init(_ n: Int, _ outcomes: Record<String>) {
        self.n = n
        self.outcomes = outcomes
    }
    func arm(on loop: EventLoop) {}
    func succeed<R: Encodable & Sendable>(_ value: R) { outcomes.append("\(n): \(value)") }
    func fail(_ error: AskError) { outcomes.append("\(n): \(error)") }
    func complete(_ kind: EncodedOutcome, payload: RawSpan, decoder: CBORDecoder) {}
    func waitOn(_ table: any PendingAskTable, correlation: UInt64) {}
}

@Suite(.timeLimit(.minutes(4))) struct StashTests {
    static let full3 = AskError.handlerFailed(ActorContext.StashError.full(capacity: 3).description)

    @Test func stashedMessagesComeBackInOrderBeforeThoseThatArrivedMeanwhile() async throws {
        let system = ActorSystem(settings: .init(loopCount: 2))
        defer { system.shutdown() }
        let gate = Gate()
        let actor = try system.spawn("stasher") { Stasher<DefaultStash>(gate: gate) }
        let cell = try #require(actor.target as? ActorCell)
        for n in 0..<10 { actor.tell(StashItem(n: n)) }
        actor.tell(StashOpenAfterGate())
        #expect(await eventually { gate.waiting })
        for n in 10..<15 { actor.tell(StashItem(n: n)) }
        // Five wait in the mailbox behind the suspended reaction.
        #expect(await eventually { cell.load == 6 })
        gate.open()
        #expect(try await actor.ask(StashHandled(), timeout: .seconds(120)) == Array(0..<15))
    }

    @Test func aStashedAskIsAnsweredWhenItIsHandledAgainLocalOrEncoded() async throws {
        let system = ActorSystem(settings: .init(loopCount: 2))
        defer { system.shutdown() }
        let actor = try system.spawn("stasher") { Stasher<DefaultStash>() }
        let local = Task { try await actor.ask(StashItem(n: 7), timeout: .seconds(120)) }
        let later = Task { try await actor.ask(StashItemLater(n: 8), timeout: .seconds(120)) }
        // As from another node: decoded when first handled, stashed decoded.
        actor.tell(manifest: StashItem.manifest, value: .map([(key: .text("n"), value: .unsigned(9))]))
        #expect(await eventually { (try? await actor.ask(StashCount(), timeout: .seconds(120))) == 3 })
        actor.tell(StashOpen())
        #expect(try await local.value == 7)
        #expect(try await later.value == 8)
        #expect(try await actor.ask(StashHandled(), timeout: .seconds(120)).sorted() == [7, 8, 9])
        #expect(try await actor.ask(StashCount(), timeout: .seconds(120)) == 0)
    }

    @Test func stashingBeyondItsCapacityThrowsTheTypedErrorAndLosesNothing() async throws {
        let system = ActorSystem(settings: .init(loopCount: 2))
        defer { system.shutdown() }
        let actor = try system.spawn("stasher") { Stasher<ThreeStash>() }
        for n in 0..<3 { actor.tell(StashItem(n: n)) }
        await #expect(throws: Self.full3) { try await actor.ask(StashItem(n: 3), timeout: .seconds(120)) }
        #expect(try await actor.ask(StashItem(n: 4, catchFull: true), timeout: .seconds(120)) == -1)
        #expect(try await actor.ask(StashCount(), timeout: .seconds(120)) == 3)
        actor.tell(StashOpen())
        #expect(try await actor.ask(StashItem(n: 5), timeout: .seconds(120)) == 5)
        #expect(try await actor.ask(StashHandled(), timeout: .seconds(120)) == [0, 1, 2, 5])
    }

    @Test func stashOutsideAReactionThrowsNoMessage() async throws {
        let system = ActorSystem(settings: .init(loopCount: 2))
        defer { system.shutdown() }
        let errors = Record<String>()
        let actor = try system.spawn("stasher") { Stasher<DefaultStash>(startErrors: errors) }
        #expect(try await actor.ask(StashCount(), timeout: .seconds(120)) == 0)
        #expect(errors.all == [ActorContext.StashError.noMessage.description])
    }

    @Test func aStashedAskWhoseAskerTimedOutHasItsReplyDropped() async throws {
        let system = ActorSystem(settings: .init(loopCount: 2))
        defer { system.shutdown() }
        let actor = try system.spawn("stasher") { Stasher<DefaultStash>() }
        await #expect(throws: AskError.timeout(actor.address, .milliseconds(50))) {
            try await actor.ask(StashItem(n: 1), timeout: .milliseconds(50))
        }
        actor.tell(StashOpen())
        #expect(try await actor.ask(StashHandled(), timeout: .seconds(120)) == [1], "handled, and its reply dropped")
        #expect(try await actor.ask(StashItem(n: 2), timeout: .seconds(120)) == 2)
    }

    @Test func stashedMessagesAreRefusedAsTheMailboxsAreWhenTheActorStops() async throws {
        let system = ActorSystem(settings: .init(loopCount: 2))
        defer { system.shutdown() }
        let actor = try system.spawn("stasher") { Stasher<DefaultStash>() }
        actor.tell(StashItem(n: 0))
        actor.tell(StashItem(n: 1))
        let asked = Task { try await actor.ask(StashItem(n: 2), timeout: .seconds(60)) }
        #expect(await eventually { (try? await actor.ask(StashCount(), timeout: .seconds(120))) == 3 })
        let deadLetters = system.deadLetters
        system.stop(actor)
        await #expect(throws: AskError.stopped(actor.address)) { try await asked.value }
        #expect(await eventually { system.deadLetters == deadLetters + 2 })
    }

    @Test func aRestartPutsTheStashBackInFrontForTheFreshInstance() async throws {
        let system = ActorSystem(settings: .init(loopCount: 2))
        defer { system.shutdown() }
        let actor = try system.spawn("stasher", supervision: .restart(backoff: .milliseconds(1))) {
            Stasher<DefaultStash>()
        }
        for n in 0..<3 { actor.tell(StashItem(n: n)) }
        actor.tell(StashFail())
        actor.tell(StashItem(n: 3))
        // The fresh instance, closed too, stashes them again in order.
        #expect(await eventually { (try? await actor.ask(StashCount(), timeout: .seconds(120))) == 4 })
        actor.tell(StashOpen())
        #expect(try await actor.ask(StashHandled(), timeout: .seconds(120)) == [0, 1, 2, 3])
    }

    /// Random tells, asks, opens and closes from one sender, against a model
    /// of the mailbox and the stash: the order items are handled in, and each
    /// ask's outcome (its reply, the full stash's error, or -1 where the
    /// reaction caught it).
    @Test func randomStashAndUnstashSequencesKeepOrderAndAnswerEveryAsk() async throws {
        let system = ActorSystem(settings: .init(loopCount: 2))
        defer { system.shutdown() }
        for seed in UInt64(1)...(underSanitizer ? 8 : 30) {
            var rng = SeededRandom(seed: seed)
            let outcomes = Record<String>()
            let actor = try system.spawn("random-\(seed)") { Stasher<ThreeStash>() }
            let cell = try #require(actor.target as? ActorCell)
            enum Sent { case item(n: Int, asked: Bool, catchFull: Bool), open, close }
            var sent: [Sent] = []
            for n in 0..<80 {
                switch rng.next() % 8 {
                case 0: sent.append(.open)
                case 1, 2: sent.append(.close)
                default: sent.append(.item(n: n, asked: rng.next() % 2 == 0, catchFull: rng.next() % 3 == 0))
                }
            }
            sent.append(.open)
            for message in sent {
                switch message {
                case .open: actor.tell(StashOpen())
                case .close: actor.tell(StashClose())
                case .item(let n, let asked, let catchFull):
                    let item = StashItem(n: n, catchFull: catchFull)
                    if asked { cell.deliver(item, reply: StashReplyProbe(n, outcomes)) } else { actor.tell(item) }
                }
            }
            // The model.
            var queue = sent[...]
            var stash: [Sent] = []
            var isOpen = false
            var handled: [Int] = []
            var expected: [String] = []
            while let message = queue.popFirst() {
                switch message {
                case .open:
                    isOpen = true
                    queue = stash[...] + queue
                    stash = []
                case .close: isOpen = false
                case .item(let n, let asked, let catchFull):
                    if !isOpen, stash.count < 3 {
                        stash.append(message)
                    } else if !isOpen {
                        if asked { expected.append(catchFull ? "\(n): -1" : "\(n): \(Self.full3)") }
                    } else {
                        handled.append(n)
                        if asked { expected.append("\(n): \(n)") }
                    }
                }
            }
            #expect(try await actor.ask(StashHandled(), timeout: .seconds(120)) == handled, "seed \(seed)")
            #expect(outcomes.all.sorted() == expected.sorted(), "seed \(seed)")
            #expect(handled.count > 10, "seed \(seed): the run handled items")
            system.stop(actor)
        }
    }
}
