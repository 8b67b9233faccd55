import Foundation
import Oscar
import OscarDemo
import OscarTestKit

/// `oscar bench`: the workloads W1–W4 (docs/BENCHMARKS.md), printing
/// the peers' `name metric value unit` lines.
///
/// W1–W3 use two processes: this one is node A (the client); node B is a
/// child `oscar bench serve`, started fresh for the workload. Start-up and
/// connection set-up are not timed.
enum BenchCommand {
    /// Fixed, so `--connect` can reach a separately started `bench serve`;
    /// a benchmark node is on 127.0.0.1 for one run and carries no data.
    static let secret = "oscar-bench-local-only"

    static func run(_ args: inout Arguments) async throws(CLIError) {
        guard let workload = args.positionals.first else {
            throw .usage("bench needs a workload: w1, w2, w3, w4, w5, w2s, all or pool")
        }
        switch workload {
        case "w4":
            let count = try args.int("count", default: 10_000_000, range: 1...1_000_000_000)
            try args.rejectUnknownOptions()
            try await report { try await LocalTellBenchmark.run(count: count) }
        case "pool":
            let count = try args.int("count", default: 200_000, range: 64...100_000_000)
            try args.rejectUnknownOptions()
            OscarLog.shared.level = .error
            try await report { try await PoolBenchmark.run(total: count) }
            try await report {
                try await PoolBenchmark.run(total: count, routing: .roundRobin, label: "round_robin")
            }
        case "w1", "w2", "w3", "w5", "w2s":
            let port = try args.int("connect", default: 0, range: 0...65535)
            let spin = try spinOption(&args)
            let api = args.option("api") ?? "messages"
            guard api == "messages" || (api == "distributed" && ["w2", "w3"].contains(workload)) else {
                throw .usage("--api is messages or (for w2 and w3) distributed, not '\(api)'")
            }
            let tls = args.has("tls")
            let bulkLane = args.has("bulk-lane")
            guard !bulkLane || ["w5", "w2s"].contains(workload) else { throw .usage("--bulk-lane is for w5 and w2s") }
            let pin = args.has("pin")
            guard !pin || ActorSystem.Settings.defaultLoopCount >= 2 else {
                throw .usage("--pin needs two CPUs, and this machine has one")
            }
            try args.rejectUnknownOptions()
            try await remote(
                workload, connectTo: port, spin: spin, distributed: api == "distributed", tls: tls, bulkLane: bulkLane,
                pin: pin)
            if workload == "w5" {
                try await report {
                    [BenchFigure(metric: "w5_raw_tcp_loopback", value: try RawTCPBenchmark.rawTCP(), unit: "MB/s")]
                }
            }
        case "all":
            let spin = try spinOption(&args)
            try args.rejectUnknownOptions()
            for w in ["w1", "w2", "w3"] { try await remote(w, connectTo: 0, spin: spin) }
            try await report { try await LocalTellBenchmark.run() }
        case "flood":
            let seconds = try args.int("seconds", default: 60, range: 1...3600)
            try args.rejectUnknownOptions()
            let figures: [BenchFigure]
            do {
                figures = try await FloodBenchmark.run(seconds: seconds, secret: secret)
            } catch {
                throw .failed("\(error)")
            }
            for figure in figures { print(figure) }
            try floodVerdict(figures)
        case "serve":
            let port = try args.int("port", default: 0, range: 0...65535)
            let spin = try spinOption(&args)
            let tls = try ClusterTLS.client(&args, dir: nil)
            let bulkLane = args.has("bulk-lane")
            let loopCPUs = try loopCPUsOption(&args)
            try args.rejectUnknownOptions()
            OscarLog.shared.level = .error  // node A leaving at the end is expected
            do {
                try await RemoteBenchmark.serve(
                    secret: secret, port: port, spin: spin, tls: tls, bulkLane: bulkLane, loopCPUs: loopCPUs
                ) {
                    print("PORT \($0)")
                }
            } catch {
                throw .failed("\(error)")
            }
        default:
            throw .usage(
                "unknown workload '\(workload)'; available: w1, w2, w3, w4, w5, w2s, all, pool, flood, serve")
        }
    }

    /// `--loop-cpus` as `oscar node` reads it (`0,2`, `0-3`).
    static func loopCPUsOption(_ args: inout Arguments) throws(CLIError) -> [Int] {
        guard let text = args.option("loop-cpus") else { return [] }
        do {
            return try NodeConfiguration.resolve(flags: ["loop-cpus": text], environment: [:]).configuration.loopCPUs
        } catch {
            throw .usage("\(error)")
        }
    }

    /// `--spin 100us` (the node default), `--spin 0` to block at once.
    static func spinOption(_ args: inout Arguments) throws(CLIError) -> Duration {
        guard let text = args.option("spin") else { return .microseconds(100) }
        return try NetworkCommands.duration(text, option: "spin", allowZero: true)
    }

    /// What the flood figures mean, on standard error: the check counts
    /// only if the flood filled the queue (dead letters), and passes only
    /// with no unreachable event.
    static func floodVerdict(_ figures: [BenchFigure]) throws(CLIError) {
        func value(_ metric: String) -> Double { figures.first { $0.metric == metric }?.value ?? 0 }
        let unreachable = Int(value("flood_unreachable_events"))
        let dead = Int(value("flood_dead_letters"))
        let err = FileStream.standardError
        err.write("flood: tells sent include the \(dead) refused as dead letters when A's queue to B was full\n")
        guard dead > 0 else {
            throw .failed(
                "the flood never filled the outbound queue (0 dead letters), so it tested nothing; use a release build (swift build -c release) or more --seconds"
            )
        }
        guard unreachable == 0 else {
            throw .failed("FAIL: \(unreachable) unreachable events while user traffic filled the queue (goal 0)")
        }
        err.write("flood: PASS: the queue was full and membership saw no unreachable event (goal 0)\n")
    }

    static func report(_ body: () async throws -> [BenchFigure]) async throws(CLIError) {
        do {
            for figure in try await body() { print(figure) }
        } catch {
            throw .failed("\(error)")
        }
    }

    /// Runs W1–W3 as node A, against `--connect PORT` or a fresh child node B.
    static func remote(
        _ workload: String, connectTo port: Int, spin: Duration, distributed: Bool = false, tls: Bool = false,
        bulkLane: Bool = false, pin: Bool = false
    ) async throws(CLIError) {
        OscarLog.shared.level = .error
        // With --tls: a CA and a certificate for each node in a fresh
        // directory, made before the clock starts.
        let certificates = tls ? try BenchCertificates() : nil
        defer { certificates?.remove() }
        if port != 0 {
            try await report {
                try await RemoteBenchmark.run(
                    workload, port: port, secret: secret, spin: spin, distributed: distributed,
                    tls: certificates?.settings("a"), bulkLane: bulkLane, loopCPUs: pin ? [0] : [])
            }
            return
        }
        let server = Process()
        server.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL
        if !FileManager.default.isExecutableFile(atPath: server.executableURL!.path) {
            server.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        }
        server.arguments =
            ["bench", "serve", "--spin", "\(spin.nanoseconds / 1_000)us"] + (certificates?.arguments("b") ?? [])
            + (bulkLane ? ["--bulk-lane"] : []) + (pin ? ["--loop-cpus", "1"] : [])
        let out = Pipe()
        server.standardOutput = out
        do {
            try server.run()
        } catch {
            throw .failed("could not start node B: \(error)")
        }
        guard let line = readLine(out.fileHandleForReading), line.hasPrefix("PORT "), let p = Int(line.dropFirst(5))
        else {
            server.terminate()
            throw .failed("node B did not report its port")
        }
        let cpuBefore = ProcessStats.cpuSeconds
        do {
            let figures = try await RemoteBenchmark.run(
                workload, port: p, secret: secret, spin: spin, distributed: distributed,
                tls: certificates?.settings("a"), bulkLane: bulkLane, loopCPUs: pin ? [0] : [])
            server.waitUntilExit()
            for figure in figures { print(figure) }
            let b = ProcessStats.children
            print(BenchFigure(metric: "\(workload)_A_peak_rss", value: Double(ProcessStats.peakRSSKiB), unit: "KiB"))
            print(BenchFigure(metric: "\(workload)_A_cpu", value: ProcessStats.cpuSeconds - cpuBefore, unit: "s"))
            print(BenchFigure(metric: "\(workload)_B_peak_rss", value: Double(b.peakRSSKiB), unit: "KiB"))
            print(BenchFigure(metric: "\(workload)_B_cpu", value: b.cpuSeconds, unit: "s"))
        } catch {
            server.terminate()
            throw .failed("\(workload): \(error)")
        }
    }

    /// One line from a pipe, byte by byte (the child prints it first thing).
    static func readLine(_ handle: FileHandle) -> String? {
        var bytes: [UInt8] = []
        while let chunk = try? handle.read(upToCount: 1), let byte = chunk.first {
            if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(byte)
        }
        return nil
    }
}

/// `oscar bench --tls`: a throwaway CA and node certificates (127.0.0.1)
/// for the two benchmark nodes, removed afterwards.
struct BenchCertificates {
    let certs: CertificateDirectory

    init() throws(CLIError) {
        guard let dir = mkdtemp(strdup("/tmp/oscar-bench-tls.XXXXXX")).map({ String(cString: $0) }) else {
            throw .failed("cannot make a directory for the benchmark's certificates")
        }
        certs = CertificateDirectory(dir)
        do {
            try certs.createAuthority()
            for node in ["a", "b"] { try certs.issue(name: node, hosts: ["127.0.0.1"]) }
        } catch {
            throw .failed("cannot make the benchmark's certificates: \(error)")
        }
    }

    func settings(_ node: String) -> ClusterNode.Settings.TLS { ClusterTLS.settings(certs, node) }

    func arguments(_ node: String) -> [String] { ClusterTLS.flags(certs, node) }

    func remove() {
        for file in [certs.caCertificate, certs.caKey]
            + ["a", "b"].flatMap({ [certs.certificate(of: $0), certs.key(of: $0)] })
        {
            unlink(file)
        }
        rmdir(certs.path)
    }
}
