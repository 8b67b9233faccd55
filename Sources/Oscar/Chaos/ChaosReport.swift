/// What a person reads after a chaos run: the terminal table, and the
/// timeline picture (SVG, written here: no library draws it for us).
public enum ChaosReport {
    // MARK: - The table

    public static func text(_ verdict: ChaosChecker.Verdict, title: String, convergenceBound: Duration) -> String {
        let t = verdict.tally
        var lines = [title, ""]
        func row(_ label: String, _ value: String) { lines.append(label.padded(20) + value) }
        let faults = t.faults.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
        row("faults injected", faults.isEmpty ? "none" : faults.joined(separator: " · "))
        row(
            "asks",
            "ok".leftPadded(8, with: " ") + "failed".leftPadded(8, with: " ")
                + "timeout".leftPadded(9, with: " ") + "indeterminate".leftPadded(15, with: " "))
        var total = [0, 0, 0, 0]
        for (kind, counts) in t.asks.sorted(by: { $0.key < $1.key }) {
            row(
                "  " + kind,
                counts.enumerated().map { i, n in "\(n)".leftPadded([8, 8, 9, 15][i], with: " ") }.joined())
            for i in 0..<4 { total[i] += counts[i] }
        }
        row("  all", total.enumerated().map { i, n in "\(n)".leftPadded([8, 8, 9, 15][i], with: " ") }.joined())
        row(
            "reliable stream",
            "sent \(t.streamSent) · acknowledged \(t.streamAcknowledged) · processed \(t.streamProcessed)"
                + " · lost \(t.lost) · duplicated \(t.duplicated)")
        row(
            "convergence",
            t.convergenceMillis.map {
                "at most \(String(format1: Double($0) / 1000)) s after a heal (bound \(DurationText.format(convergenceBound)))"
            } ?? "not reached")
        if let peak = t.peakRSS.max(by: { $0.value < $1.value }) {
            row("peak RSS", "\(peak.value / 1_048_576) MiB (\(peak.key)), \(t.peakRSS.count) processes sampled")
        }
        lines.append("")
        lines.append("checks")
        for check in verdict.checks {
            lines.append("  \(check.passed ? "ok  " : "FAIL") \(check.name)")
            for finding in check.findings.prefix(5) { lines.append("         \(finding)") }
            if check.findings.count > 5 { lines.append("         … and \(check.findings.count - 5) more") }
        }
        lines.append("")
        row("verdict", verdict.passed ? "PASS" : "FAIL")
        return lines.joined(separator: "\n") + "\n"
    }

    // MARK: - The timeline

    /// One row per node: what it saw of the cluster over time (green: every
    /// node up and reachable; amber: some unreachable or missing; red: not
    /// up itself; grey: not running; violet: paused), under the windows of
    /// the network faults (shaded, labelled).
    public static func svg(_ history: [ChaosEvent], nodes: [String]) -> String {
        let events = history.sorted { $0.t < $1.t }
        guard let first = events.first?.t, let last = events.last?.t, last > first else {
            return
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"400\" height=\"40\"><text x=\"10\" y=\"25\">empty history</text></svg>\n"
        }
        let (left, width, rowHeight, top) = (150.0, 900.0, 26.0, 50.0)
        let span = Double(last - first)
        func x(_ t: UInt64) -> Double { left + width * Double(t - first) / span }
        var shapes: [String] = []
        // Fault windows.
        var open: (t: UInt64, label: String)?
        let height = top + rowHeight * Double(nodes.count)
        func closeFault(_ t: UInt64) {
            guard let f = open else { return }
            shapes.append(
                "<rect x=\"\(x(f.t).r)\" y=\"\(top - 6)\" width=\"\(max(x(t) - x(f.t), 1).r)\" height=\"\((height - top + 6).r)\" fill=\"#d33\" fill-opacity=\"0.12\"/>"
            )
            shapes.append("<text x=\"\(x(f.t).r)\" y=\"\(top - 10)\" font-size=\"10\">\(f.label.xmlEscaped)</text>")
            open = nil
        }
        for e in events {
            switch e.kind {
            case .fault:
                closeFault(e.t)
                open = (e.t, e.detail ?? "fault")
            case .heal: closeFault(e.t)
            default: break
            }
        }
        closeFault(last)
        // Node rows.
        for (row, node) in nodes.enumerated() {
            let y = top + rowHeight * Double(row)
            shapes.append("<text x=\"8\" y=\"\((y + 17).r)\" font-size=\"12\">\(node.xmlEscaped)</text>")
            var state = "#999"
            var since = first
            var running = false
            var paused = false
            var viewColour = "#999"
            func paint(_ t: UInt64) {
                if t > since {
                    shapes.append(
                        "<rect x=\"\(x(since).r)\" y=\"\((y + 4).r)\" width=\"\(max(x(t) - x(since), 0.5).r)\" height=\"\(rowHeight - 8)\" fill=\"\(state)\"/>"
                    )
                }
                since = t
                state = !running ? "#999" : paused ? "#8e44ad" : viewColour
            }
            for e in events where e.node == node {
                switch e.kind {
                case .start, .nodeStart:
                    running = true
                    viewColour = "#c0392b"
                case .kill, .exit, .removed: running = false
                case .pause: paused = true
                case .resume: paused = false
                case .view: viewColour = colour(of: e, nodes: nodes)
                default: continue
                }
                paint(e.t)
                if e.kind == .kill {
                    shapes.append(
                        "<text x=\"\((x(e.t) - 4).r)\" y=\"\((y + 18).r)\" font-size=\"14\" font-weight=\"bold\">×</text>"
                    )
                }
            }
            paint(last)
        }
        // Time axis, every 10 s.
        var tick: UInt64 = 0
        while first + tick <= last {
            let tx = x(first + tick)
            shapes.append(
                "<line x1=\"\(tx.r)\" y1=\"\(height.r)\" x2=\"\(tx.r)\" y2=\"\((height + 5).r)\" stroke=\"#333\"/>")
            shapes.append(
                "<text x=\"\((tx - 8).r)\" y=\"\((height + 18).r)\" font-size=\"10\">\(tick / 1_000_000_000) s</text>")
            tick += 10_000_000_000
        }
        let legend =
            "<text x=\"\(left)\" y=\"\((height + 36).r)\" font-size=\"11\">green: sees every node up and reachable · amber: some unreachable or missing · red: not up itself · violet: paused · grey: not running · shaded: network fault · ×: killed</text>"
        let totalHeight = height + 48
        return """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(left + width + 20))" height="\(Int(totalHeight))" font-family="sans-serif">
            <rect width="100%" height="100%" fill="white"/>
            \(shapes.joined(separator: "\n"))
            \(legend)
            </svg>

            """
    }

    private static func colour(of view: ChaosEvent, nodes: [String]) -> String {
        let members = view.view
        guard members.first(where: { $0.node == view.node })?.status == "up" else { return "#c0392b" }
        let healthy = members.filter(\.isUpAndReachable).count
        return healthy >= nodes.count ? "#27ae60" : "#f39c12"
    }
}

extension Double {
    /// One decimal, for SVG coordinates.
    fileprivate var r: String { String((self * 10).rounded() / 10) }
}

extension String {
    fileprivate var xmlEscaped: String {
        var out = ""
        for c in self {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            default: out.append(c)
            }
        }
        return out
    }

    /// Left-aligned in `width` columns, with at least one space after.
    public func padded(_ width: Int) -> String {
        count >= width ? self + " " : self + String(repeating: " ", count: width - count)
    }
}
