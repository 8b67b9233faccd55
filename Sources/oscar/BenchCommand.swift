import Oscar

/// `oscar bench`: the shared workloads (`../shared/bench/README.md`), printing
/// the peers' `name metric value unit` lines.
enum BenchCommand {
    static func run(_ args: inout Arguments) async throws(CLIError) {
        guard let workload = args.positionals.first else { throw .usage("bench needs a workload: w4") }
        switch workload {
        case "w4":
            let count = try args.int("count", default: 10_000_000, range: 1...1_000_000_000)
            try args.rejectUnknownOptions()
            do {
                for figure in try await LocalTellBenchmark.run(count: count) { print(figure) }
            } catch {
                throw .failed("\(error)")
            }
        default:
            throw .usage("unknown workload '\(workload)'; available: w4")
        }
    }
}
