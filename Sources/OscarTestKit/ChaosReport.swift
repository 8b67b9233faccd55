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
                + " · lost \(t.lost) · duplicated \(t.duplicated) · again after a consumer restart \(t.redelivered)"
                + (t.streams > 1 ? " · \(t.streams) streams (the producer restarted)" : ""))
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
        let (left, width, rowHeight) = (150.0, 900.0, 26.0)
        let right = left + width + 15  // the last pixel a label may reach
        let span = Double(last - first)
        func x(_ t: UInt64) -> Double { left + width * Double(t - first) / span }
        var shapes: [String] = []
        // Fault windows, and their labels in lanes above the rows: each label
        // in the lowest lane where it overlaps no other, so faults close
        // together (a partition, its heal, the next one) stay readable.
        var windows: [(from: UInt64, to: UInt64, label: String)] = []
        var open: (t: UInt64, label: String)?
        func closeFault(_ t: UInt64) {
            guard let f = open else { return }
            windows.append((f.t, t, f.label))
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
        let labels = windows.map { w in
            let textWidth = estimatedTextWidth(w.label, fontSize: labelFontSize)
            return LabelBox(x: max(0, min(x(w.from), right - textWidth)), width: textWidth)
        }
        let lanes = labelLanes(labels)
        let top = 50 + labelLaneHeight * Double(max(lanes.max() ?? 0, 0))
        let height = top + rowHeight * Double(nodes.count)
        func baseline(lane: Int) -> Double { top - 10 - labelLaneHeight * Double(lane) }
        for (i, w) in windows.enumerated() {
            shapes.append(
                "<rect x=\"\(x(w.from).r)\" y=\"\(top - 6)\" width=\"\(max(x(w.to) - x(w.from), 1).r)\" height=\"\((height - top + 6).r)\" fill=\"#d33\" fill-opacity=\"0.12\"/>"
            )
            if lanes[i] > 0 {  // a raised label: a thin line down to its window
                shapes.append(
                    "<line x1=\"\(x(w.from).r)\" y1=\"\((baseline(lane: lanes[i]) + 2).r)\" x2=\"\(x(w.from).r)\" y2=\"\(top - 6)\" stroke=\"#d33\" stroke-opacity=\"0.5\" stroke-width=\"0.8\"/>"
                )
            }
        }
        for (i, w) in windows.enumerated() {
            // A white halo keeps the text legible over the lines of lower labels.
            shapes.append(
                "<text class=\"fault-label\" x=\"\(labels[i].x.r)\" y=\"\(baseline(lane: lanes[i]).r)\" font-size=\"\(Int(labelFontSize))\" stroke=\"white\" stroke-width=\"3\" paint-order=\"stroke\">\(w.label.xmlEscaped)</text>"
            )
        }
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
        // Time axis: every 10 s, or a longer step when the run is long
        // enough for the tick labels to collide.
        let step = tickStep(spanSeconds: span / 1e9, pixels: width)
        var tick: UInt64 = 0
        while first + tick <= last {
            let tx = x(first + tick)
            shapes.append(
                "<line x1=\"\(tx.r)\" y1=\"\(height.r)\" x2=\"\(tx.r)\" y2=\"\((height + 5).r)\" stroke=\"#333\"/>")
            shapes.append(
                "<text x=\"\((tx - 8).r)\" y=\"\((height + 18).r)\" font-size=\"10\">\(tick / 1_000_000_000) s</text>")
            tick += step * 1_000_000_000
        }
        let legend = [
            "green: sees every node up and reachable · amber: some unreachable or missing · red: not up itself",
            "violet: paused · grey: not running · shaded: network fault (labelled above the rows) · ×: killed",
        ].enumerated().map { i, line in
            "<text x=\"\(left)\" y=\"\((height + 36 + 14 * Double(i)).r)\" font-size=\"11\">\(line)</text>"
        }.joined(separator: "\n")
        let totalHeight = height + 62
        return """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(left + width + 20))" height="\(Int(totalHeight))" font-family="sans-serif">
            <rect width="100%" height="100%" fill="white"/>
            \(shapes.joined(separator: "\n"))
            \(legend)
            </svg>

            """
    }

    // MARK: - Label layout

    static let labelFontSize = 10.0
    static let labelLaneHeight = 13.0

    /// A label's horizontal extent, in pixels.
    struct LabelBox: Equatable {
        var x: Double
        var width: Double
        var end: Double { x + width }
    }

    /// A text's width, estimated: no font metrics here, so a sans-serif
    /// character is taken as 0.6 em, which errs wide.
    static func estimatedTextWidth(_ text: String, fontSize: Double) -> Double {
        Double(text.count) * fontSize * 0.6
    }

    /// A lane (0 the lowest) for each label, in order: the first lane in
    /// which it comes no closer than `gap` to any label already there.
    /// Deterministic; labels in one lane never overlap.
    static func labelLanes(_ labels: [LabelBox], gap: Double = 6) -> [Int] {
        var occupied: [[LabelBox]] = []
        return labels.map { label in
            let lane =
                occupied.firstIndex { boxes in
                    boxes.allSatisfy { label.x >= $0.end + gap || label.end + gap <= $0.x }
                } ?? occupied.count
            if lane == occupied.count { occupied.append([]) }
            occupied[lane].append(label)
            return lane
        }
    }

    /// Seconds between time-axis ticks: the first of 10 s, 20 s, 30 s, 1 min,
    /// … that leaves at least 50 pixels between tick labels.
    static func tickStep(spanSeconds: Double, pixels: Double) -> UInt64 {
        let steps: [UInt64] = [10, 20, 30, 60, 120, 300, 600, 1200, 1800, 3600]
        let fit = steps.first { pixels * Double($0) / max(spanSeconds, 1) >= 50 }
        return fit ?? max(3600, UInt64(spanSeconds * 50 / pixels / 3600 + 1) * 3600)
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
