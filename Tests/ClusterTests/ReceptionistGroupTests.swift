import Oscar
import OscarTestSupport
import Synchronization
import Testing

/// A group router over a receptionist listing, and typed check-ins.
@Suite(.timeLimit(.minutes(4))) struct ReceptionistGroupTests {
    final class Station: Reactor {
        let name: String
        init(name: String) { self.name = name }
        static func reactions(_ r: inout Reactions<Station>) {
            r.on(WhoServes.self, result: { me, _ in me.name })
        }
    }
    struct WhoServes: Message {
        typealias Reply = String
        typealias Receiver = Station
    }
    static let key = ReceptionistKey<WhoServes>("stations")

    @Test func aGroupSendsToEachListedActorInTurnAndFollowsTheListing() async throws {
        let node = try ClusterNode(settings: .init(secret: "a-long-cluster-secret", loopCount: 1))
        defer { node.shutdown() }
        _ = try await node.waitUntilUp(within: .seconds(120))  // wide: see WaitUntilUpTests
        let group = node.receptionist.group(Self.key)
        await #expect(throws: AskError.self) { try await group.ask(WhoServes(), timeout: .seconds(60)) }
        let stations = try (0..<3).map { i in
            try node.system.spawn("station-\(i)") { Station(name: "s\(i)") }.typed(as: Station.self)
        }
        for station in stations { node.receptionist.register(station, as: Self.key) }
        #expect(await eventually(timeout: .seconds(60)) { node.receptionist.lookup(Self.key).count == 3 })
        let typed: [TypedActorRef<Station>] = node.receptionist.lookup(typed: Self.key)
        #expect(typed.count == 3)
        var answers: [String: Int] = [:]
        for _ in 0..<30 { answers[try await group.ask(WhoServes(), timeout: .seconds(60)), default: 0] += 1 }
        #expect(answers == ["s0": 10, "s1": 10, "s2": 10], "round robin: \(answers)")
        // One checks out: the group follows the listing.
        node.receptionist.deregister(stations[1].untyped, from: Self.key)
        #expect(await eventually(timeout: .seconds(60)) { node.receptionist.lookup(Self.key).count == 2 })
        var after: Set<String> = []
        for _ in 0..<10 { after.insert(try await group.ask(WhoServes(), timeout: .seconds(60))) }
        #expect(after == ["s0", "s2"])
    }
}
