import Oscar
import OscarTestSupport
import Testing

/// Three nodes in one process, dropped without `shutdown()` because an error
/// escaped, while receptionist and membership traffic is still in flight:
/// the error must reach the caller and the process must live on. (The same
/// shape crashed 6 of 6 times in `ReceptionistActor.publish`, through an
/// unowned reference to a system that was being deinitialised.)
@Suite(.serialized, .timeLimit(.minutes(8))) struct ReceptionistShutdownTests {
    static let key = ReceptionistKey<CheckIn>("escape")

    enum Escaped: Error, Equatable { case beforeShutdown(round: Int) }

    struct Released: Sendable {
        weak var system: ActorSystem?
    }

    /// Forms the cluster, checks an actor in on every node, waits until each
    /// lists all three, stirs the listings once more, then throws.
    static func clusterThatThrowsBeforeShutdown(round: Int, released: Record<Released>) async throws {
        let a = try node()
        let b = try node(seeds: [a.address])
        let c = try node(seeds: [a.address])
        let nodes = [a, b, c]
        for node in nodes { released.append(Released(system: node.system)) }
        let actors = try nodes.map { node in
            let actor = try node.system.spawn("checked-in") { CheckedIn() }
            node.receptionist.register(actor, as: key)
            return actor
        }
        let converged = await eventually(timeout: .seconds(30)) {
            nodes.allSatisfy { Set($0.receptionist.lookup(key).map(\.address)) == Set(actors.map(\.address)) }
        }
        #expect(converged, "every node lists the 3 actors before the error")
        // Every receptionist now sends its new entries to the other two,
        // so messages are queued on every loop when the nodes are dropped.
        for (node, actor) in zip(nodes, actors) { node.receptionist.deregister(actor, from: key) }
        throw Escaped.beforeShutdown(round: round)
    }

    @Test func nodesDroppedWhenAnErrorEscapesBeforeShutdownNeitherCrashNorLeak() async {
        for round in 0..<3 {
            let released = Record<Released>()
            do {
                try await Self.clusterThatThrowsBeforeShutdown(round: round, released: released)
                Issue.record("the scenario throws")
            } catch {
                #expect(error as? Escaped == .beforeShutdown(round: round), "the real error reaches the caller")
            }
            #expect(released.all.count == 3)
            let freed = await eventually(timeout: .seconds(30)) { released.all.allSatisfy { $0.system == nil } }
            #expect(freed, "round \(round): every dropped node shut itself down and was freed")
        }
    }

    static func node(seeds: [NodeAddress] = []) throws -> ClusterNode {
        try ClusterNode(
            settings: .init(
                secret: "a-long-cluster-secret", loopCount: 2, seeds: seeds, membershipTick: .milliseconds(100)))
    }
}

struct CheckIn: Message {}

final class CheckedIn: Reactor {
    static func reactions(_ r: inout Reactions<CheckedIn>) {
        r.on(CheckIn.self, do: { _, _ in })
    }
}
