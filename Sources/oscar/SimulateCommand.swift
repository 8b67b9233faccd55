import Foundation
import Oscar
import OscarDemo
import OscarTestKit
import Synchronization

/// `oscar simulate`: membership on the deterministic simulator, as a table.
enum SimulateCommand {
    static func run(_ args: inout Arguments) throws(CLIError) {
        if let count = args.option("search") {
            try search(count: count, &args)
            return
        }
        let sizes: [Int]
        if let text = args.option("nodes") {
            let items = text.split(separator: ",", omittingEmptySubsequences: false)
            sizes = items.compactMap { Int($0) }
            guard !sizes.isEmpty, sizes.count == items.count, sizes.allSatisfy({ (3...10_000).contains($0) }) else {
                throw .usage(
                    "--nodes takes sizes from 3 to 10000, such as 10,100 or 1000"
                        + (text.contains("-") ? " (a range such as 3-9 is for --search)" : ""))
            }
            guard Set(sizes).count == sizes.count else { throw .usage("--nodes names each size once") }
        } else {
            sizes = [10, 100]
        }
        let seed = UInt64(try args.int("seed", default: 1, range: 0...Int(Int32.max)))
        let window = Double(try args.int("window", default: 60, range: 5...3_600))
        let kills = try args.int("kills", default: 20, range: 1...1_000)
        let jobs = try args.int("jobs", default: ProcessInfo.processInfo.activeProcessorCount, range: 1...256)
        let lossRates = try (args.option("loss") ?? "5,20").split(separator: ",", omittingEmptySubsequences: false).map
        {
            (text) throws(CLIError) in
            guard let percent = Double(text), (0..<100).contains(percent) else {
                throw .usage("--loss takes percentages below 100, such as 5,20")
            }
            return percent / 100
        }
        let reportDirectory = args.option("report")
        try args.rejectUnknownOptions()
        if let dir = reportDirectory {
            try ClusterCommand.makeDirectory(dir)
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: dir, isDirectory: &isDirectory), isDirectory.boolValue else {
                throw .usage("--report names a directory; \(dir) is a file")
            }
        }
        let clock = ContinuousClock()
        var reports: [SimulationReport] = []
        for n in sizes {
            let start = clock.now
            reports.append(
                SimulationReport.run(
                    nodes: n, seed: seed, lossRates: lossRates, window: window, kills: kills,
                    membership: membership(forClusterSize: n), jobs: jobs
                ) { line in
                    let elapsed = (clock.now - start).inSeconds
                    FileStream.standardError.write("… \(line)  [\(format1(elapsed)) s]\n")
                })
            FileStream.standardError.write("… n=\(n) took \(Int((clock.now - start).inSeconds)) s of real time\n")
        }
        let text = table(reports, lossRates: lossRates) + "\n\n" + fits(reports) + scalingNote(sizes)
        print(text)
        if let dir = reportDirectory {
            try FileStream.replace(
                dir + "/simulation.txt",
                with:
                    "oscar simulate --nodes \(sizes.map(String.init).joined(separator: ",")) --seed \(seed) --kills \(kills) --loss \(lossRates.map(percent).joined(separator: ","))\n\n"
                    + text + "\n")
            try FileStream.replace(dir + "/kills.tsv", with: killTable(reports))
            try FileStream.replace(
                dir + "/simulation.svg",
                with: SimulationReport.plot(reports, period: ClusterSimulator.Settings(nodes: 1, seed: 0).tickInterval))
            FileStream.standardError.write("… wrote \(dir)/simulation.svg, simulation.txt and kills.tsv\n")
        }
    }

    /// The settings each size runs with: the defaults, widened as a user
    /// of a cluster that large is told to (`scaled(toClusterSize:)`).
    static func membership(forClusterSize n: Int) -> MembershipSettings {
        MembershipSettings().scaled(toClusterSize: n)
    }

    /// Which sizes ran with widened downing windows, and what they were.
    static func scalingNote(_ sizes: [Int]) -> String {
        let defaults = MembershipSettings()
        let widened = sizes.filter { membership(forClusterSize: $0) != defaults }
        guard !widened.isEmpty else { return "" }
        let lines = widened.map { n in
            let m = membership(forClusterSize: n)
            return "  \(n) nodes: decideWhenUnstableAfter \(format1(m.decideWhenUnstableAfter)) s, "
                + "removalMargin \(format1(m.removalMargin)) s, firstSeedTimeout \(format1(m.firstSeedTimeout)) s"
        }
        return "\nabove 1,000 nodes the downing windows are widened (MembershipSettings.scaled(toClusterSize:)):\n"
            + lines.joined(separator: "\n")
    }

    /// How "every node saw it unreachable" grows with N, fitted two ways;
    /// with fewer than two sizes, why there is no fit.
    static func fits(_ reports: [SimulationReport]) -> String {
        let samples = reports.flatMap { r in
            r.kills.compactMap { k in k.allSawUnreachable.map { (nodes: r.nodes, seconds: $0) } }
        }
        let spreading = reports.flatMap { r in
            r.kills.compactMap { k in
                k.allSawUnreachable.flatMap { all in k.firstDetection.map { (nodes: r.nodes, seconds: all - $0) } }
            }
        }
        guard let log = DisseminationFit(samples, scale: .log2N), let linear = DisseminationFit(samples, scale: .n),
            let spread = DisseminationFit(spreading, scale: .log2N)
        else { return "(no fit: it needs two sizes or more)" }
        let fewSizes =
            Set(samples.map(\.nodes)).count < 3
            ? "\n(with two sizes any curve of two parameters passes through both sizes' means: compare fits over three or more, such as --nodes 10,30,100,300,1000)"
            : ""
        return """
            every node sees the killed member unreachable, fitted over all kills:
              \(log.summary)
              \(linear.summary)
            spreading alone (every node minus the first detection):
              \(spread.summary)
            """ + fewSizes
    }

    /// Every kill: size, victim and its times, tab-separated, for plotting elsewhere.
    static func killTable(_ reports: [SimulationReport]) -> String {
        var lines = ["nodes\tvictim\tfirst_detection_s\tall_saw_unreachable_s\tremoved_s"]
        for r in reports {
            for k in r.kills {
                func cell(_ v: Double?) -> String { v.map { String(format: "%.2f", $0) } ?? "" }
                lines.append(
                    "\(r.nodes)\t\(k.victim)\t\(cell(k.firstDetection))\t\(cell(k.allSawUnreachable))\t\(cell(k.removed))"
                )
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// A median and, for more than one sample, the spread: "1.55 s (1.31–1.80)".
    static func spread(_ values: [Double]) -> String {
        guard let median = SimulationReport.median(values) else { return "—" }
        let text = String(format: "%.2f s", median)
        guard values.count > 1 else { return text }
        return text + String(format: " (%.2f–%.2f)", values.min()!, values.max()!)
    }

    /// `oscar simulate --search N [--nodes 5 | 3-9] [--seed FIRST]`: N random
    /// fault schedules, one per seed, checked for split brain, two
    /// singletons and a removed connected majority.
    static func search(count text: String, _ args: inout Arguments) throws(CLIError) {
        guard let count = Int(text), (1...10_000_000).contains(count) else {
            throw .usage("--search takes a number of schedules, such as 1000")
        }
        let nodeText = args.option("nodes") ?? "3-9"
        let bounds = nodeText.split(separator: "-").compactMap { Int($0) }
        guard (1...2).contains(bounds.count), bounds.allSatisfy({ (3...15).contains($0) }),
            bounds.first! <= bounds.last!
        else { throw .usage("with --search, --nodes takes a size or a range from 3 to 15, such as 5 or 3-9") }
        let (low, high) = (bounds.first!, bounds.last!)
        let first = UInt64(try args.int("seed", default: 1, range: 0...Int(Int32.max)))
        let trace = args.has("trace")
        try args.rejectUnknownOptions()
        let clock = ContinuousClock()
        let start = clock.now
        let done = Mutex(0)
        let step = max(1, count / 20)
        FileStream.standardError.write(
            "… \(count) schedules from seed \(first), \(nodeText) nodes: split brain, two singletons, a connected majority removed\n"
        )
        let outcomes = SplitBrainSearch().search(
            seeds: first...(first + UInt64(count) - 1),
            nodes: { seed in low + Int(seed % UInt64(high - low + 1)) }
        ) { outcome in
            let n = done.withLock { d in
                d += 1
                return d
            }
            if let v = outcome.violation {
                FileStream.standardError.write("✗ seed \(outcome.seed) (\(outcome.nodes) nodes): \(v)\n")
            } else if n % step == 0 {
                FileStream.standardError.write("… \(n)/\(count)  [\(Int((clock.now - start).inSeconds)) s]\n")
            }
        }
        let failed = outcomes.filter { $0.violation != nil }
        for o in failed {
            print("seed \(o.seed), \(o.nodes) nodes: \(o.violation!)")
            print("  again: oscar simulate --search 1 --seed \(o.seed) --nodes \(o.nodes)")
            let minimal = o.minimal ?? o.schedule
            print(
                "  minimal schedule (\(minimal.steps.count) of \(o.schedule.steps.count) steps, seconds after the cluster formed):"
            )
            print(minimal.description.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n"))
            if trace {
                print("  the minimal schedule's run, seconds after the cluster formed (nodes 0–\(o.nodes - 1)):")
                for line in SplitBrainSearch().trace(minimal, nodes: o.nodes, seed: o.seed) { print("    " + line) }
            }
        }
        let downed = outcomes.map(\.downed).reduce(0, +)
        print(
            "\(count) schedules, \(failed.count) failed, \(downed) members downed in all; \(Int((clock.now - start).inSeconds)) s"
        )
        if !failed.isEmpty { throw .failed("\(failed.count) schedules broke a property") }
    }

    /// A loss rate as a percentage: 0.05 as "5", 0.125 as "12.5".
    static func percent(_ rate: Double) -> String {
        let p = (rate * 1_000).rounded() / 10
        return p == p.rounded() ? String(Int(p)) : format1(p)
    }

    static func seconds(_ v: Double?) -> String { v.map { String(format1($0)) + " s" } ?? "—" }
    static func format1(_ v: Double) -> String { v.isNaN ? "—" : String(format1: v) }

    static func table(_ reports: [SimulationReport], lossRates: [Double] = [0.05, 0.20]) -> String {
        let rates = lossRates.map { percent($0) + "%" }
        func perRate(_ value: (Double) -> String) -> String { lossRates.map(value).joined(separator: " / ") }
        var rows = [
            [
                "nodes", "cold start", "new member up", "killed: first detection", "killed: unreachable",
                "killed: removed (first kill)",
                "false suspicions /min (\(rates.joined(separator: " / ")) loss)", "false removals", "nodes downed",
                "gossip /node/s",
            ]
        ]
        for r in reports {
            rows.append([
                "\(r.nodes)", seconds(r.coldStartConvergence), seconds(r.newMemberUp),
                spread(r.kills.compactMap(\.firstDetection)),
                spread(r.kills.compactMap(\.allSawUnreachable)),
                seconds(r.killRemoved),
                perRate { format1(r.falseSuspicionsPerMinute[$0] ?? .nan) },
                perRate { "\(r.falseRemovals[$0] ?? 0)" },
                perRate { "\(r.downedUnderLoss[$0] ?? 0)" }, format1(r.gossipPerNodeSecond),
            ])
        }
        let widths = (0..<rows[0].count).map { c in rows.map { $0[c].count }.max()! }
        return rows.map { row in
            zip(row, widths).map { $0 + String(repeating: " ", count: $1 - $0.count) }.joined(separator: "  ")
        }.joined(separator: "\n")
    }
}
