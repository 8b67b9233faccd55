import Oscar
import Testing

@Suite(.timeLimit(.minutes(5))) struct FutureLifetimeTests {
    @Test func anActorOutlivesItsFutureReactions() async throws {
        let system = ActorSystem(settings: .init(loopCount: 1))
        defer { system.shutdown() }
        let counter = try system.spawn("counter") { CounterActor() }
        for i in 0..<50 {
            #expect(try await counter.ask(Echo(text: "\(i)")) == "echo: \(i)")
            counter.tell(Increment(by: 1))
        }
        #expect(try await counter.ask(GetCount()) == 50)
    }
}
