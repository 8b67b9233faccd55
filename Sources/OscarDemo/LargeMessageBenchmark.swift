import Foundation
import Glibc
import OscarBase
import OscarCluster
import OscarRuntime
import Synchronization

/// W5 (large messages) and W2 under a stream of them (docs/BENCHMARKS.md),
/// run by `RemoteBenchmark.Client` against node B's `server` and `sink`.
enum LargeMessageBenchmark {
    /// A large message: its bytes are one CBOR byte string. The reply is
    /// how many arrived, so the sender knows it went through whole.
    struct Blob: Message {
        typealias Reply = Int
        var data: Data
    }

    /// Node B's receiver of large messages.
    final class Sink: Reactor {
        static func reactions(_ r: inout Reactions<Sink>) {
            r.on(Blob.self, result: { _, m in m.data.count })
        }
    }

    struct WrongSize: Error, CustomStringConvertible {
        var sent: Int
        var received: Int
        var description: String { "sent \(sent) bytes, the sink received \(received)" }
    }

    /// Sends `total` bytes in messages of `size`, `inFlight` asks at a time.
    /// Returns the rate in MB/s (10^6 bytes a second).
    static func stream(
        to sink: ActorRef, size: Int, total: Int, inFlight: Int, started: DoneFlag? = nil,
        until stop: (@Sendable () -> Bool)? = nil
    ) async throws -> Double {
        let blob = Blob(data: Data(repeating: 0x5a, count: size))
        let count = total / size
        let clock = ContinuousClock()
        let t0 = clock.now
        let sent = try await withThrowingTaskGroup(of: Int.self) { group in
            for worker in 0..<inFlight {
                group.addTask {
                    var i = worker
                    var sent = 0
                    while stop.map({ !$0() }) ?? (i < count) {
                        let received = try await sink.ask(blob, timeout: .seconds(120))
                        guard received == size else { throw WrongSize(sent: size, received: received) }
                        started?.set()
                        sent += size
                        i += inFlight
                    }
                    return sent
                }
            }
            return try await group.reduce(0, +)
        }
        return Double(sent) / (clock.now - t0).inSeconds / 1e6
    }

    /// W5: 1 MiB and 16 MiB messages from A to B.
    static func w5(_ sink: ActorRef) async throws -> [BenchFigure] {
        _ = try await stream(to: sink, size: 1 << 20, total: 16 << 20, inFlight: 4)  // warm-up
        let small = try await stream(to: sink, size: 1 << 20, total: 512 << 20, inFlight: 4)
        let large = try await stream(to: sink, size: 16 << 20, total: 512 << 20, inFlight: 2)
        return [
            BenchFigure(metric: "w5_1mib_throughput", value: small, unit: "MB/s"),
            BenchFigure(metric: "w5_16mib_throughput", value: large, unit: "MB/s"),
        ]
    }

    /// W2 while another actor pair streams 16 MiB messages between the same
    /// two nodes: the stream runs until W2 is done.
    static func w2UnderStream(
        _ request: @escaping RemoteBenchmark.Request, sink: ActorRef
    ) async throws
        -> [BenchFigure]
    {
        let done = DoneFlag()
        let started = DoneFlag()
        let streaming = Task {
            try await stream(to: sink, size: 16 << 20, total: 0, inFlight: 2, started: started) { done.isSet }
        }
        // W2 starts once the stream has delivered its first message.
        while !started.isSet { try await Task.sleep(for: .milliseconds(1)) }
        let figures: [BenchFigure]
        do {
            figures = try await RemoteBenchmark.w2(request)
        } catch {
            done.set()
            _ = try? await streaming.value
            throw error
        }
        done.set()
        let rate = try await streaming.value
        return figures.map { figure in
            var renamed = figure
            renamed.metric = figure.metric.replacingOccurrences(of: "w2_", with: "w2s_")
            return renamed
        } + [BenchFigure(metric: "w2s_stream_throughput", value: rate, unit: "MB/s")]
    }

    final class DoneFlag: Sendable {
        private let value = Atomic<Bool>(false)
        func set() { value.store(true, ordering: .releasing) }
        var isSet: Bool { value.load(ordering: .acquiring) }
    }
}
