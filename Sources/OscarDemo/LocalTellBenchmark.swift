import Glibc
import OscarBase
import OscarCBOR
import OscarCluster
import OscarDistributed
import OscarMembership
import OscarRemote
import OscarRuntime
import OscarTestKit

/// Workload W4, local tell throughput: one process, a sender S and a receiver
/// R; S tells R `count` payloads in a tight loop, then asks R to flush, and
/// the count comes back to the caller.
///
/// S and R share a loop, which is how Oscar makes local sends cheap: each tell
/// is handed straight to the idle receiver, with no queue and no thread hop.
public enum LocalTellBenchmark {
    struct Start: Message {
        typealias Reply = Int64
        package var count: Int
        var receiver: ActorRef
    }

    final class Receiver: Reactor {
        package var count: Int64 = 0
        static func reactions(_ r: inout Reactions<Receiver>) {
            r.on(Payload.self, do: { me, _ in me.count += 1 })
            r.on(
                Flush.self,
                result: { me, _ in
                    defer { me.count = 0 }
                    return me.count
                })
        }
    }

    final class Sender: Reactor {
        static func reactions(_ r: inout Reactions<Sender>) {
            r.on(
                Start.self,
                future: { _, m in
                    let text = Payload.text
                    for i in 1...m.count { m.receiver.tell(Payload(i: Int64(i), s: text)) }
                    return try await m.receiver.ask(Flush(), timeout: .seconds(60))
                })
        }
    }

    public enum Failure: Error, CustomStringConvertible {
        case wrongCount(expected: Int, got: Int64)
        public var description: String {
            switch self {
            case .wrongCount(let e, let g): "W4: the receiver counted \(g) tells, expected \(e)"
            }
        }
    }

    /// Runs W4 and returns its figures.
    public static func run(count: Int = 10_000_000) async throws -> [BenchFigure] {
        let system = ActorSystem(settings: .init(name: "w4", loopCount: 1))
        defer { system.shutdown() }
        let receiver = try system.spawn("receiver") { Receiver() }
        let sender = try system.spawn("sender", colocatedWith: receiver) { Sender() }
        let clock = ContinuousClock()
        let t0 = clock.now
        let counted = try await sender.ask(Start(count: count, receiver: receiver), timeout: .seconds(120))
        let elapsed = clock.now - t0
        guard counted == Int64(count) else { throw Failure.wrongCount(expected: count, got: counted) }
        return [
            BenchFigure(metric: "w4_local_tell_throughput", value: Double(count) / elapsed.inSeconds, unit: "msg/s"),
            BenchFigure(metric: "w4_peak_rss", value: Double(ProcessStats.peakRSSKiB), unit: "KiB"),
        ]
    }
}

/// Figures about this process that benchmarks report.
public enum ProcessStats {
    /// Peak resident set size in KiB (`ru_maxrss`), as `/usr/bin/time -v` reports it.
    public static var peakRSSKiB: Int {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return usage.ru_maxrss
    }
}
