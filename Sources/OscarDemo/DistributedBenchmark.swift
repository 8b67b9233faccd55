import Distributed
import OscarBase
import OscarCBOR
import OscarCluster
import OscarDistributed
import OscarMembership
import OscarRemote
import OscarRuntime
import OscarTestKit

/// W2 and W3 with Swift distributed actors (`oscar bench w2|w3 --api
/// distributed`): the same requests as `RemoteBenchmark`, made as calls to
/// a distributed actor on node B instead of asks to a reactor.
public enum DistributedBenchmark {
    /// The server's distributed actor: echoes the payload.
    public distributed actor EchoServer {
        public typealias ActorSystem = ClusterSystem
        public nonisolated var unownedExecutor: UnownedSerialExecutor { actorSystem.executor(for: id) }

        public distributed func echo(_ payload: Payload) -> Payload { payload }
    }

    /// Where node B hosts it.
    package static let path = "/user/dserver"

    /// Hosts the server on `node` for as long as the returned system lives.
    package static func host(on node: ClusterNode) -> (ClusterSystem, EchoServer) {
        let system = ClusterSystem(node: node)
        return (system, system.named(path) { EchoServer(actorSystem: system) })
    }

    /// Runs W2 or W3 against node B on `port`, from a task on the client's
    /// only loop (where its connection lives), and returns the figures.
    package static func run(_ workload: String, node: ClusterNode, port: Int) async throws -> [BenchFigure] {
        let system = ClusterSystem(node: node)
        let server = try EchoServer.resolve(
            id: ActorAddress(node: NodeAddress(host: "127.0.0.1", port: port), path: path), using: system)
        let loop = node.system.loops.next()
        let figures = Task(executorPreference: loop.taskExecutor) {
            workload == "w2"
                ? try await RemoteBenchmark.w2 { i in try await server.echo(Payload(i: i)).i }
                : try await RemoteBenchmark.w3 { i in try await server.echo(Payload(i: i)).i }
        }
        return try await figures.value.map {
            var f = $0; f.name = "oscar-distributed"; return f
        }
    }
}
