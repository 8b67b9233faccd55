import OscarBase
import OscarCBOR
import OscarCluster
import OscarDistributed
import OscarMembership
import OscarRemote
import OscarRuntime

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
                + "unknown".leftPadded(9, with: " ") + "no outcome".leftPadded(15, with: " "))
        var total = [0, 0, 0, 0]
        for (kind, counts) in t.asks.sorted(by: { $0.key < $1.key }) {
            row(
                "  " + kind,
                counts.enumerated().map { i, n in "\(n)".leftPadded([8, 8, 9, 15][i], with: " ") }.joined())
            for i in 0..<4 { total[i] += counts[i] }
        }
        row("  all", total.enumerated().map { i, n in "\(n)".leftPadded([8, 8, 9, 15][i], with: " ") }.joined())
        // An application's run (`oscar chaos --exec`) has no stream.
        if t.streamSent > 0 || t.streamProcessed > 0 {
            row(
                "reliable stream",
                "sent \(t.streamSent) · acknowledged \(t.streamAcknowledged) · processed \(t.streamProcessed)"
                    + " · lost \(t.lost) · duplicated \(t.duplicated) · again after a consumer restart \(t.redelivered)"
                    + (t.streams > 1 ? " · \(t.streams) streams (the producer restarted)" : ""))
        }
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
        guard let axis = TimeAxis(events) else { return emptyPicture("empty history") }
        let (first, last) = (axis.first, axis.last)
        let rowHeight = 26.0
        let band = FaultBand(events, axis: axis)
        let top = 50 + band.raise
        let height = top + rowHeight * Double(nodes.count)
        var shapes = [
            text(
                "membership: what each node saw", x: 8, y: 22, size: PlotFrame.titleSize,
                extra: " font-weight=\"bold\" class=\"title\"")
        ]
        shapes += band.shapes(axis: axis, top: top, bottom: height)
        // Node rows.
        for (row, node) in nodes.enumerated() {
            let y = top + rowHeight * Double(row)
            shapes.append(text(node, x: 8, y: y + 17, size: 12))
            var state = Colour.off
            var since = first
            var running = false
            var paused = false
            var viewColour = Colour.off
            func paint(_ t: UInt64) {
                if t > since {
                    shapes.append(
                        "<rect x=\"\(axis.x(since).r)\" y=\"\((y + 4).r)\" width=\"\(max(axis.x(t) - axis.x(since), 0.5).r)\" height=\"\(rowHeight - 8)\" fill=\"\(state)\"/>"
                    )
                }
                since = t
                state = !running ? Colour.off : paused ? Colour.paused : viewColour
            }
            for e in events where e.node == node {
                switch e.kind {
                case .start, .nodeStart:
                    running = true
                    viewColour = Colour.down
                case .kill, .exit, .removed: running = false
                case .pause: paused = true
                case .resume: paused = false
                case .view: viewColour = colour(of: e, nodes: nodes)
                default: continue
                }
                paint(e.t)
                if e.kind == .kill { shapes.append(cross(x: axis.x(e.t), y: y + rowHeight / 2)) }
            }
            paint(last)
        }
        shapes += axis.ticks(at: height)
        // Colour swatches rather than colour names, wrapped to the
        // picture's width so no entry runs off its right edge.
        let legend = ChaosReport.legend(
            [
                (.block(Colour.healthy, opacity: 1), "sees every node up and reachable"),
                (.block(Colour.degraded, opacity: 1), "sees some unreachable or missing"),
                (.block(Colour.down, opacity: 1), "not up itself"), (.block(Colour.paused, opacity: 1), "paused"),
                (.block(Colour.off, opacity: 1), "not running"), (.cross, "killed"),
                (.block(Colour.fault, opacity: 0.12), "network fault (labelled above the rows)"),
            ], x: TimeAxis.left, y: height + 40, maxX: TimeAxis.pictureWidth - 10)
        return picture(height: height + 40 + legend.height, shapes + legend.shapes)
    }

    private static func colour(of view: ChaosEvent, nodes: [String]) -> String {
        let members = view.view
        guard members.first(where: { $0.node == view.node })?.status == "up" else { return Colour.down }
        let healthy = members.filter(\.isUpAndReachable).count
        return healthy >= nodes.count ? Colour.healthy : Colour.degraded
    }
}

extension String {
    /// Left-aligned in `width` columns, with at least one space after.
    public func padded(_ width: Int) -> String {
        count >= width ? self + " " : self + String(repeating: " ", count: width - count)
    }
}
