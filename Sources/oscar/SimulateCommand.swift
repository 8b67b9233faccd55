import Oscar

/// `oscar simulate`: membership on the deterministic simulator, as a table.
enum SimulateCommand {
    static func run(_ args: inout Arguments) throws(CLIError) {
        let sizes: [Int]
        if let text = args.option("nodes") {
            sizes = text.split(separator: ",").compactMap { Int($0) }
            guard !sizes.isEmpty, sizes.allSatisfy({ (3...5_000).contains($0) }) else {
                throw .usage("--nodes takes sizes from 3 to 5000, such as 10,100 or 1000")
            }
        } else {
            sizes = [10, 100]
        }
        let seed = UInt64(try args.int("seed", default: 1, range: 0...Int(Int32.max)))
        let window = Double(try args.int("window", default: 60, range: 5...3_600))
        try args.rejectUnknownOptions()
        let clock = ContinuousClock()
        var reports: [SimulationReport] = []
        for n in sizes {
            let start = clock.now
            reports.append(
                SimulationReport.run(nodes: n, seed: seed, window: window) { line in
                    let elapsed = (clock.now - start).seconds
                    FileStream.standardError.write("… \(line)  [\(format1(elapsed)) s]\n")
                })
            FileStream.standardError.write("… n=\(n) took \(Int((clock.now - start).seconds)) s of real time\n")
        }
        print(table(reports))
    }

    static func seconds(_ v: Double?) -> String { v.map { String(format1($0)) + " s" } ?? "—" }
    static func format1(_ v: Double) -> String { v.isNaN ? "—" : String(format1: v) }

    static func table(_ reports: [SimulationReport]) -> String {
        var rows = [
            [
                "nodes", "cold start", "new member up", "killed: unreachable", "killed: removed",
                "false suspicions /min (5% / 20% loss)", "false removals", "gossip /node/s",
            ]
        ]
        for r in reports {
            rows.append([
                "\(r.nodes)", seconds(r.coldStartConvergence), seconds(r.newMemberUp), seconds(r.killDetected),
                seconds(r.killRemoved),
                "\(format1(r.falseSuspicionsPerMinute[0.05] ?? .nan)) / \(format1(r.falseSuspicionsPerMinute[0.20] ?? .nan))",
                "\(r.falseRemovals[0.05] ?? 0) / \(r.falseRemovals[0.20] ?? 0)", format1(r.gossipPerNodeSecond),
            ])
        }
        let widths = (0..<rows[0].count).map { c in rows.map { $0[c].count }.max()! }
        return rows.map { row in
            zip(row, widths).map { $0 + String(repeating: " ", count: $1 - $0.count) }.joined(separator: "  ")
        }.joined(separator: "\n")
    }
}
