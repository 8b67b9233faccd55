import Oscar
import OscarTestKit
import OscarTestSupport
import Testing

/// A check-in whose push was lost still reaches the other node: the
/// version told in turn each tick shows it behind, and it pulls.
@Suite(.timeLimit(.minutes(3))) struct ReceptionistRepairTests {
    final class Station: Reactor {
        static func reactions(_ r: inout Reactions<Station>) {
            r.on(Ping.self, result: { _, _ in true })
        }
    }
    struct Ping: Message {
        typealias Reply = Bool
    }
    static let key = ReceptionistKey<Ping>("repaired")

    @Test func aLostCheckInReachesTheOtherNodeByTheVersionItIsTold() async throws {
        let faults = FaultGate()
        var settingsA = ClusterNode.Settings(secret: "a-long-cluster-secret", loopCount: 1)
        settingsA.injectFaults(with: faults)
        let a = try ClusterNode(settings: settingsA)
        let b = try ClusterNode(
            settings: .init(secret: "a-long-cluster-secret", loopCount: 1, seeds: [a.address]))
        defer { [b, a].forEach { $0.shutdown() } }
        let bothUp = await eventually(timeout: .seconds(60)) {
            let (byA, byB) = (try? await a.membership(), try? await b.membership())
            return [byA, byB].allSatisfy { ($0?.members ?? []).filter { $0.status == .up }.count == 2 }
        }
        try #require(bothUp)
        // The receptionists have met: a check-in on b now reaches a by push.
        let first = try b.system.spawn("first") { Station() }
        b.receptionist.register(first, as: Self.key)
        #expect(await eventually(timeout: .seconds(60)) { a.receptionist.lookup(Self.key).count == 1 })

        // Frames from b are lost for a moment (well under failure detection):
        // the push of the next check-in, and any version told meanwhile.
        faults.blackhole(b.address, direction: .inbound)
        let second = try b.system.spawn("second") { Station() }
        b.receptionist.register(second, as: Self.key)
        // The push leaves b once b's listing has the check-in; two more of
        // b's frames dropped after that (heartbeats, on the same ordered
        // lane) make sure it was lost, not still on its way.
        #expect(await eventually(timeout: .seconds(30)) { b.receptionist.lookup(Self.key).count == 2 })
        let droppedBefore = faults.dropped
        #expect(await eventually(timeout: .seconds(30)) { faults.dropped >= droppedBefore + 2 })
        faults.restore(b.address)
        #expect(a.receptionist.lookup(Self.key).count == 1, "the push was dropped")

        // No further change on b: only the version b tells in turn repairs a.
        #expect(await eventually(timeout: .seconds(30)) { a.receptionist.lookup(Self.key).count == 2 })
    }
}
