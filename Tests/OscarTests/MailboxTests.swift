import Oscar
import OscarTestSupport
import Synchronization
import Testing

struct Numbered: Message {
    var sender: Int
    var seq: Int
}
struct Report: Message { typealias Reply = [Int: [Int]] }
struct SendBurst: Message {
    var sender: Int
    var count: Int
    var to: ActorRef
}

/// Records, per sender, the sequence numbers in arrival order.
final class SequenceRecorder: Reactor {
    var seen: [Int: [Int]] = [:]
    static func reactions(_ r: inout Reactions<SequenceRecorder>) {
        r.on(Numbered.self, do: { me, m in me.seen[m.sender, default: []].append(m.seq) })
        r.on(Report.self, result: { me, _ in me.seen })
    }
}

/// An actor that sends a numbered burst when asked: a sender living on a loop.
final class BurstSender: Reactor {
    static func reactions(_ r: inout Reactions<BurstSender>) {
        r.on(
            SendBurst.self,
            do: { _, m in
                for seq in 0..<m.count { m.to.tell(Numbered(sender: m.sender, seq: seq)) }
            })
    }
}

@Suite(.timeLimit(.minutes(5))) struct MailboxTests {
    @Test func fifoPerSenderUnderEightConcurrentSenders() async throws {
        let system = ActorSystem(settings: .init(loopCount: 2))
        defer { system.shutdown() }
        let recorder = try system.spawn("recorder") { SequenceRecorder() }
        let perSender = 5_000
        // Four senders are tasks on the global pool, four are actors on the
        // loops (one of them on the recorder's own loop).
        let actorSenders = try (4..<8).map { i in
            try system.spawn("sender-\(i)", colocatedWith: i == 4 ? recorder : nil) { BurstSender() }
        }
        await withTaskGroup(of: Void.self) { group in
            for sender in 0..<4 {
                group.addTask {
                    for seq in 0..<perSender { recorder.tell(Numbered(sender: sender, seq: seq)) }
                }
            }
            for (i, ref) in actorSenders.enumerated() {
                group.addTask { ref.tell(SendBurst(sender: 4 + i, count: perSender, to: recorder)) }
            }
        }
        #expect(
            await eventually {
                let seen = (try? await recorder.ask(Report())) ?? [:]
                return seen.values.map(\.count).reduce(0, +) == 8 * perSender
            })
        let seen = try await recorder.ask(Report())
        #expect(seen.count == 8)
        for sender in 0..<8 {
            #expect(seen[sender] == Array(0..<perSender), "sender \(sender) out of order")
        }
        #expect(system.deadLetters == 0)
    }

    @Test func aFullMailboxRefusesMessagesWithATypedError() async throws {
        let system = ActorSystem(settings: .init(loopCount: 1, mailboxCapacity: 4))
        defer { system.shutdown() }
        let gate = Gate()
        let holder = try system.spawn("holder") { Holder(gate: gate) }
        holder.tell(Hold())
        #expect(await eventually { gate.waiting })
        for _ in 0..<4 { holder.tell(GetCount()) }  // fills the four places
        await #expect(throws: AskError.mailboxFull(holder.address)) {
            try await holder.ask(GetCount())
        }
        holder.tell(GetCount())
        #expect(system.deadLetters == 1)
        gate.open()
        // The accepted messages are handled, then the actor takes asks again.
        #expect(await eventually { (try? await holder.ask(GetCount())) == 1 })
    }

    @Test func stoppingAnActorFailsWaitingAsksAndLaterOnes() async throws {
        let system = ActorSystem(settings: .init(loopCount: 1))
        defer { system.shutdown() }
        let gate = Gate()
        let holder = try system.spawn("holder") { Holder(gate: gate) }
        holder.tell(Hold())
        #expect(await eventually { gate.waiting })
        async let waiting = holder.ask(GetCount())
        let opener = Task {
            system.stop(holder)
            gate.open()
        }
        await opener.value
        do {
            _ = try await waiting
            Issue.record("an ask queued behind a stop must not succeed")
        } catch {
            #expect(error as? AskError == .stopped(holder.address))
        }
        await #expect(throws: AskError.stopped(holder.address)) {
            try await holder.ask(GetCount())
        }
        #expect(await eventually { system.actor("holder") == nil })
    }
}
