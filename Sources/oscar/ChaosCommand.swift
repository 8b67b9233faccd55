import Glibc
import Oscar
import OscarDemo
import OscarTestKit
import Synchronization

/// `oscar chaos`: launches a local cluster in chaos mode, carries out a
/// nemesis plan derived from the seed, heals, waits for convergence, stops
/// the cluster, then checks the merged history and reports.
enum ChaosCommand {
    static let usage = """
        usage: oscar chaos [--nodes 5] [--duration 60s] [--seed 1] [--faults kill,pause,partition,delay,loss]
                           [--scenario NAME|FILE] [--report DIR] [--netns] [--list] [--exec PATH [-- ARGS...]]
        """

    /// A named scenario, `Cluster/chaos/NAME.json`.
    struct Scenario: Codable {
        var description: String?
        var nodes: Int?
        var duration: String?
        var seed: UInt64?
        var faults: [String]?
    }

    static let scenarioDirectory = "Cluster/chaos"

    static func run(_ args: inout Arguments) async throws(CLIError) {
        if args.has("list") {
            try args.rejectUnknownOptions()
            return listScenarios()
        }
        let scenarioName = args.option("scenario")
        let scenario = try scenarioName.map(loadScenario)
        let nodes = try args.int("nodes", default: scenario?.nodes ?? 5, range: 2...16)
        let duration = try NetworkCommands.duration(
            args.option("duration") ?? scenario?.duration ?? "60s", option: "duration")
        guard duration >= .seconds(15) else { throw .usage("--duration must be at least 15s") }
        guard let seed = UInt64(args.option("seed") ?? scenario?.seed.map(String.init) ?? "1") else {
            throw .usage("--seed takes a whole number")
        }
        let faultNames =
            args.option("faults").map { $0.split(separator: ",").map(String.init) } ?? scenario?.faults
            ?? ["kill", "pause", "partition", "delay", "loss"]
        let faults = try faultNames.map { (name) throws(CLIError) -> NemesisPlan.Fault in
            guard let fault = NemesisPlan.Fault(rawValue: name) else {
                throw .usage(
                    "unknown fault '\(name)'; choose from \(NemesisPlan.Fault.allCases.map(\.rawValue).joined(separator: ", "))"
                )
            }
            return fault
        }
        let dir = args.option("report") ?? ".oscar/chaos"
        let netns = args.has("netns")
        // An application's own node binary, one that calls `ClusterNode.Runner.chaos`.
        let exec = try args.option("exec").map { (path) throws(CLIError) in
            (path: try ClusterCommand.executablePath(path), arguments: Array(args.positionals.dropFirst()))
        }
        if exec == nil, args.positionals.count > 1 {
            throw .usage(
                "unexpected arguments \(Array(args.positionals.dropFirst())); an application's own go after --exec PATH --"
            )
        }
        try args.rejectUnknownOptions()
        if netns { try NetnsChaos.requireAvailable() }
        OscarLog.shared.level = .off
        let run = try ChaosRun(
            nodes: nodes, duration: duration, seed: seed, faults: faults, dir: dir, netns: netns,
            title: "oscar chaos — \(exec.map { "\($0.path), " } ?? "")\(scenarioName.map { "scenario \($0), " } ?? "")"
                + "\(nodes) nodes, \(DurationText.format(duration)), seed \(seed), faults \(faultNames.joined(separator: ","))",
            exec: exec)
        let verdict = await run.execute()
        guard verdict.passed else { throw .failed("chaos run failed its checks; see \(dir)/report.txt") }
    }

    static func loadScenario(_ name: String) throws(CLIError) -> Scenario {
        let path = name.contains("/") || name.hasSuffix(".json") ? name : "\(scenarioDirectory)/\(name).json"
        guard let text = FileStream.readAll(path) else {
            throw .usage("no scenario '\(name)' (looked for \(path)); see 'oscar chaos --list'")
        }
        guard let scenario = JSONBridge.decode(Scenario.self, fromJSON: text) else {
            throw .usage("\(path) is not a scenario: expected {\"nodes\", \"duration\", \"faults\", ...}")
        }
        return scenario
    }

    static func listScenarios() {
        let names = FileStream.names(in: scenarioDirectory).filter { $0.hasSuffix(".json") }.map {
            String($0.dropLast(5))
        }
        guard !names.isEmpty else {
            return print("no scenarios in \(scenarioDirectory) (run from the repository root)")
        }
        for name in names.sorted() {
            let s = try? loadScenario(name)
            print(name.padded(20) + (s?.description ?? ""))
        }
    }
}
