import OscarBase
import OscarCBOR
import OscarCluster
import OscarDistributed
import OscarMembership
import OscarRemote
import OscarRuntime
import OscarTestKit

/// `oscar bench pool`: asks spread over a cluster pool on three local nodes,
/// 64 outstanding, 200,000 in all, as W3 does against one remote actor.
///
/// The three nodes run in this process, one loop each, joined over TCP on
/// 127.0.0.1; the pool (2 routees per node) is asked through its ref on the
/// first node. With `leastBusy` most asks stay on that node while its
/// routees keep up (Oscar's rule prefers a free local routee); with
/// `roundRobin` two thirds cross a connection. The `pool_share_*` lines
/// show the spread. Start-up and the cluster forming are not timed.
public enum PoolBenchmark {
    struct Job: Message {
        typealias Reply = Int
        package var i: Int
    }

    final class Worker: Reactor {
        package var port = 0
        package func started(_ context: ActorContext) { port = context.node.port }
        static func reactions(_ r: inout Reactions<Worker>) { r.on(Job.self, result: { me, _ in me.port }) }
    }

    public enum Failure: Error, CustomStringConvertible {
        case noCluster
        public var description: String { "the three nodes did not form a cluster within 20 s" }
    }

    public static func run(
        total: Int = 200_000, inFlight: Int = 64, routing: ClusterPoolSettings.Routing = .leastBusy,
        label: String = "least_busy"
    ) async throws -> [BenchFigure] {
        func node(_ seeds: [NodeAddress]) throws -> ClusterNode {
            try ClusterNode(
                settings: .init(
                    secret: "oscar-bench-local-only", loopCount: 1, seeds: seeds, membershipTick: .milliseconds(200))
            ) { $0.clusterPool("bench", ClusterPoolSettings(perNode: 2, routing: routing)) { Worker() } }
        }
        let a = try node([])
        let nodes = [a, try node([a.address]), try node([a.address])]
        defer { nodes.forEach { $0.shutdown() } }
        let router = a.system.clusterPools[0]
        let clock = ContinuousClock()
        let formed = clock.now + .seconds(20)
        while Set(router.routees.map(\.node.port)).count < 3 {
            guard clock.now < formed else { throw Failure.noCluster }
            try await Task.sleep(for: .milliseconds(20))  // polling the forming cluster, not timed
        }
        let pool = a.system.ref(for: router.address)
        let t0 = clock.now
        let ports = try await withThrowingTaskGroup(of: [Int: Int].self) { group in
            for lane in 0..<inFlight {
                group.addTask {
                    var seen: [Int: Int] = [:]
                    for i in stride(from: lane, to: total, by: inFlight) {
                        seen[try await pool.ask(Job(i: i), timeout: .seconds(60)), default: 0] += 1
                    }
                    return seen
                }
            }
            var all: [Int: Int] = [:]
            for try await seen in group { all.merge(seen, uniquingKeysWith: +) }
            return all
        }
        let elapsed = clock.now - t0
        var figures = [
            BenchFigure(
                metric: "pool_\(label)_ask_c64_throughput", value: Double(total) / elapsed.inSeconds, unit: "req/s")
        ]
        for (i, n) in nodes.enumerated() {
            let share = Double(ports[n.address.port] ?? 0) / Double(total) * 100
            figures.append(BenchFigure(metric: "pool_\(label)_share_node\(i + 1)", value: share, unit: "%"))
        }
        return figures
    }
}
