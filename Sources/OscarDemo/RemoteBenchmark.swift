import Glibc
import OscarBase
import OscarCBOR
import OscarCluster
import OscarDistributed
import OscarMembership
import OscarRemote
import OscarRuntime
import OscarTestKit

/// Workloads W1–W3 (docs/BENCHMARKS.md): node A (this process) talks
/// to the server actor on node B (another process) over TCP on 127.0.0.1.
///
/// Both nodes run one loop: the connection and the actors share it, so a
/// message is decoded straight from the read buffer into a direct hand-off,
/// and a send is encoded straight into the connection's outbound batch.
public enum RemoteBenchmark {
    /// `stop()`: node B shuts down.
    public struct Stop: Message { public init() {} }

    /// The server actor: counts tells, echoes asks, flushes, stops.
    final class Server: Reactor {
        package var count: Int64 = 0
        package let stop: @Sendable () -> Void
        init(stop: @escaping @Sendable () -> Void) { self.stop = stop }
        static func reactions(_ r: inout Reactions<Server>) {
            r.on(Payload.self, do: { me, _ in me.count += 1 })
            r.on(Echo.self, result: { _, m in Payload(i: m.i, s: m.s) })
            r.on(
                Flush.self,
                result: { me, _ in
                    defer { me.count = 0 }
                    return me.count
                })
            r.on(Stop.self, do: { me, _ in me.stop() })
        }
    }

    /// `ask(Payload) -> Payload`: the echo request (its own manifest, so the
    /// server tells it apart from a tell of the same payload).
    public struct Echo: Message {
        public typealias Reply = Payload
        public var i: Int64
        public var s: String
        public init(_ payload: Payload) {
            i = payload.i
            s = payload.s
        }
    }

    /// Runs node B until it is sent `Stop`. Calls `ready` with the port.
    /// With `tls`, the node speaks TLS 1.3 only (the `--tls` figures); with
    /// `bulkLane`, it takes the bulk connections node A dials; its loop is
    /// kept on `loopCPUs` if given.
    public static func serve(
        secret: String, port: Int = 0, spin: Duration, tls: ClusterNode.Settings.TLS? = nil, bulkLane: Bool = false,
        loopCPUs: [Int] = [], ready: (Int) -> Void
    ) async throws {
        let stopped = StopSignal()
        var settings = ClusterNode.Settings(port: port, secret: secret, loopCount: 1, spinBeforeBlock: spin)
        settings.tls = tls
        settings.bulkLane = bulkLane
        settings.loopCPUs = loopCPUs
        let node = try ClusterNode(settings: settings) {
            actors in
            actors.nodeSingleton("server") { Server(stop: { stopped.fire() }) }
            actors.nodeSingleton("sink") { LargeMessageBenchmark.Sink() }
        }
        let distributed = DistributedBenchmark.host(on: node)  // for `--api distributed`
        ready(node.address.port)
        await stopped.wait()
        withExtendedLifetime(distributed) {}
        node.shutdown()
    }

    struct Run: Message {
        typealias Reply = [BenchFigure]
        package var workload: String
        package var server: ActorRef
        /// Node B's receiver of large messages (W5, W2 under a stream).
        package var sink: ActorRef
    }

    /// Runs the workload from an actor on A's only loop, where the connection lives.
    package final class Client: Reactor {
        package static func reactions(_ r: inout Reactions<Client>) {
            r.on(
                Run.self,
                future: { _, m in
                    switch m.workload {
                    case "w1": return try await w1(m.server)
                    case "w2": return try await w2(askingEcho(m.server))
                    case "w5": return try await LargeMessageBenchmark.w5(m.sink)
                    case "w2s":
                        return try await LargeMessageBenchmark.w2UnderStream(
                            askingEcho(m.server), sink: m.sink)
                    default: return try await w3(askingEcho(m.server))
                    }
                })
        }
    }

    public enum Failure: Error, CustomStringConvertible {
        case wrongCount(expected: Int64, got: Int64)
        case wrongReply(expected: Int64, got: Int64)
        public var description: String {
            switch self {
            case .wrongCount(let e, let g): "the server counted \(g) tells, expected \(e)"
            case .wrongReply(let e, let g): "reply \(g) to request \(e)"
            }
        }
    }

    /// Runs one workload against the server on `port` and returns its figures.
    /// With `distributed`, W2 and W3 call a distributed actor instead; with
    /// `bulkLane`, node A sends its large messages on the bulk lane (node B
    /// must take it), and three more figures say which lane carried them;
    /// node A's loop is kept on `loopCPUs` if given.
    public static func run(
        _ workload: String, port: Int, secret: String, spin: Duration, distributed: Bool = false,
        tls: ClusterNode.Settings.TLS? = nil, bulkLane: Bool = false, loopCPUs: [Int] = []
    ) async throws -> [BenchFigure] {
        var settings = ClusterNode.Settings(secret: secret, loopCount: 1, spinBeforeBlock: spin)
        settings.tls = tls
        settings.bulkLane = bulkLane
        settings.loopCPUs = loopCPUs
        let node = try ClusterNode(settings: settings)
        defer { node.shutdown() }
        let server = node.system.ref("oscar://127.0.0.1:\(port)/user/server")!
        let client = try node.system.spawn("client") { Client() }
        _ = try await server.ask(Identify(), timeout: .seconds(10))  // connected; not timed
        let figures =
            distributed
            ? try await DistributedBenchmark.run(workload, node: node, port: port)
            : try await client.ask(
                Run(workload: workload, server: server, sink: node.system.ref("oscar://127.0.0.1:\(port)/user/sink")!),
                timeout: .seconds(600))
        server.tell(Stop())
        _ = try? await server.ask(Identify(), timeout: .seconds(2))  // the stop has left
        guard bulkLane else { return figures }
        return figures + [
            BenchFigure(
                metric: "\(workload)_A_bulk_messages_out", value: Double(node.stats.value(.bulkMessagesOut)),
                unit: "msg"),
            BenchFigure(metric: "\(workload)_A_chunks_out", value: Double(node.stats.value(.chunksOut)), unit: "count"),
            BenchFigure(
                metric: "\(workload)_A_bulk_fallbacks", value: Double(node.stats.value(.bulkFallbacks)), unit: "count"),
        ]
    }

    package static func w1(_ server: ActorRef) async throws -> [BenchFigure] {
        let n: Int64 = 1_000_000
        let clock = ContinuousClock()
        let t0 = clock.now
        for i in 1...n { server.tell(Payload(i: i)) }
        let counted = try await server.ask(Flush(), timeout: .seconds(120))
        let elapsed = clock.now - t0
        guard counted == n else { throw Failure.wrongCount(expected: n, got: counted) }
        return [BenchFigure(metric: "w1_remote_tell_throughput", value: Double(n) / elapsed.inSeconds, unit: "msg/s")]
    }

    /// One W2/W3 request: sends payload `i`, returns the `i` of the reply.
    package typealias Request = nonisolated(nonsending) @Sendable (Int64) async throws -> Int64

    static func askingEcho(_ server: ActorRef) -> Request {
        { i in try await server.ask(Echo(Payload(i: i)), timeout: .seconds(60)).i }
    }

    package static func w2(_ request: Request) async throws -> [BenchFigure] {
        for i in 1...2_000 { _ = try await request(Int64(i)) }
        let clock = ContinuousClock()
        var latencies: [Duration] = []
        latencies.reserveCapacity(20_000)
        let start = clock.now
        for i in 1...20_000 {
            let t = clock.now
            let reply = try await request(Int64(i))
            latencies.append(clock.now - t)
            guard reply == Int64(i) else { throw Failure.wrongReply(expected: Int64(i), got: reply) }
        }
        let total = clock.now - start
        latencies.sort()
        // Nearest rank: the element at 1-based rank ceil(p * 20000).
        func percentile(_ p: Double) -> Double { latencies[Int((p * 20_000).rounded(.up)) - 1].inSeconds * 1e6 }
        return [
            BenchFigure(metric: "w2_remote_ask_p50", value: percentile(0.50), unit: "us"),
            BenchFigure(metric: "w2_remote_ask_p99", value: percentile(0.99), unit: "us"),
            BenchFigure(metric: "w2_remote_ask_rate", value: 20_000 / total.inSeconds, unit: "rt/s"),
        ]
    }

    package static func w3(_ request: @escaping Request) async throws -> [BenchFigure] {
        let total = 200_000
        let inFlight = 64
        let clock = ContinuousClock()
        let t0 = clock.now
        // 64 requesters each issue their next ask as soon as their reply is in:
        // 64 outstanding until the last 64. Child tasks keep the loop as executor.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<inFlight {
                group.addTask {
                    var i = worker + 1
                    while i <= total {
                        let reply = try await request(Int64(i))
                        guard reply == Int64(i) else { throw Failure.wrongReply(expected: Int64(i), got: reply) }
                        i += inFlight
                    }
                }
            }
            try await group.waitForAll()
        }
        let elapsed = clock.now - t0
        return [
            BenchFigure(metric: "w3_remote_ask_c64_throughput", value: Double(total) / elapsed.inSeconds, unit: "req/s")
        ]
    }
}

/// A one-shot signal an async caller can wait for.
final class StopSignal: Sendable {
    private let stream: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation

    init() { (stream, continuation) = AsyncStream.makeStream() }
    func fire() { continuation.finish() }
    package func wait() async { for await _ in stream {} }
}

extension ProcessStats {
    /// User + system CPU seconds of this process so far.
    public static var cpuSeconds: Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
            + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }

    /// Peak RSS (KiB) and CPU seconds of the children this process waited for.
    public static var children: (peakRSSKiB: Int, cpuSeconds: Double) {
        var usage = rusage()
        getrusage(RUSAGE_CHILDREN.rawValue, &usage)
        let cpu =
            Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(
                usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
        return (usage.ru_maxrss, cpu)
    }
}
