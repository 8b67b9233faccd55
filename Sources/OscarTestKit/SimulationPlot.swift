import Foundation

/// `oscar simulate --report DIR`'s picture: measured first detection,
/// dissemination and removal against N, beside what SWIM and Lifeguard
/// predict at the same protocol period.
extension SimulationReport {
    /// The predictions drawn beside the measurements, in seconds, for a
    /// protocol period `period` (Oscar's tick).
    public enum Prediction {
        /// SWIM's expected time until some member probes a crashed one:
        /// e/(e−1) protocol periods (Das, Gupta and Motivala, 2002; the
        /// probe's own timeout comes on top).
        public static func swimFirstDetection(period: Double) -> Double { M_E / (M_E - 1) * period }

        /// SWIM's suspicion known everywhere: first detection, then push
        /// gossip to one member a period, which reaches everyone in about
        /// log₂ N + ln N rounds (Pittel, 1987).
        public static func swimEveryoneSuspects(nodes: Double, period: Double) -> Double {
            swimFirstDetection(period: period) + (log2(nodes) + log(nodes)) * period
        }

        /// Lifeguard (memberlist's defaults) declares a suspect dead after a
        /// timeout of 4 × max(1, log₁₀ N) periods with every confirmation it
        /// waits for, up to 6 times that with none; first detection comes before.
        public static func lifeguardDeclaredDead(nodes: Double, period: Double) -> ClosedRange<Double> {
            let least = 4 * max(1, log10(nodes)) * period
            let first = swimFirstDetection(period: period)
            return (first + least)...(first + 6 * least)
        }
    }

    /// The picture as SVG. The axes are logarithmic: N from 10 to the next
    /// power of ten above the largest size, seconds from 0.5 to 64.
    public static func plot(_ reports: [SimulationReport], period: Double) -> String {
        let width = 900.0
        let height = 560.0
        let left = 70.0
        let right = 600.0
        let top = 40.0
        let bottom = 500.0
        let largest = Double(reports.map(\.nodes).max() ?? 1_000)
        let lastDecade = max(2, Int(log10(largest).rounded(.up)))
        // A margin of a fifth of a decade on each side keeps the bars at the
        // smallest and largest sizes inside the frame.
        let (firstLog, lastLog) = (0.8, Double(lastDecade) + 0.2)
        func x(_ nodes: Double) -> Double { left + (right - left) * (log10(nodes) - firstLog) / (lastLog - firstLog) }
        let (low, high) = (0.5, 64.0)
        func y(_ seconds: Double) -> Double {
            let clamped = min(max(seconds, low), high)
            return bottom - (bottom - top) * log2(clamped / low) / log2(high / low)
        }
        typealias Text = ChaosReport
        var shapes: [String] = []
        shapes.append(
            Text.text(
                "A member killed in a stable cluster: \(kills(reports.first?.kills.count ?? 0)) per size, tick \(period) s",
                x: left, y: 22, size: 14, extra: " font-weight=\"bold\""))

        // Grid and axes.
        var seconds = low
        while seconds <= high {
            shapes.append(
                "<line x1=\"\(left.r)\" y1=\"\(y(seconds).r)\" x2=\"\(right.r)\" y2=\"\(y(seconds).r)\" stroke=\"\(Text.Colour.grid)\"/>"
            )
            let label = seconds < 1 ? "\(seconds) s" : "\(Int(seconds)) s"
            shapes.append(Text.text(label, x: left - 6, y: y(seconds) + 4, size: 10, anchor: "end"))
            seconds *= 2
        }
        for decade in 1...lastDecade {
            let n = pow(10, Double(decade))
            shapes.append(
                "<line x1=\"\(x(n).r)\" y1=\"\(top.r)\" x2=\"\(x(n).r)\" y2=\"\(bottom.r)\" stroke=\"\(Text.Colour.grid)\"/>"
            )
            shapes.append(
                Text.text(decimalsGrouped(Int(n)), x: x(n), y: bottom + 16, size: 10, anchor: "middle"))
        }
        shapes.append(Text.text("nodes", x: (left + right) / 2, y: bottom + 34, size: 11, anchor: "middle"))
        shapes.append(
            "<rect class=\"plot-area\" x=\"\(left.r)\" y=\"\(top.r)\" width=\"\((right - left).r)\" height=\"\((bottom - top).r)\" fill=\"none\" stroke=\"\(Text.Colour.ink)\"/>"
        )

        // Predictions: curves over the whole axis.
        let span = stride(from: firstLog, through: lastLog, by: 0.05).map { pow(10, $0) }
        func path(_ points: [(Double, Double)], colour: String, dash: String, width: Double = 1.5) -> String {
            let d = points.enumerated().map { i, p in "\(i == 0 ? "M" : "L")\(x(p.0).r),\(y(p.1).r)" }.joined(
                separator: " ")
            return
                "<path d=\"\(d)\" fill=\"none\" stroke=\"\(colour)\" stroke-width=\"\(width)\" stroke-dasharray=\"\(dash)\"/>"
        }
        let dead = span.map { (n: $0, range: Prediction.lifeguardDeclaredDead(nodes: $0, period: period)) }
        let band =
            dead.map { "\(x($0.n).r),\(y($0.range.lowerBound).r)" }
            + dead.reversed().map {
                "\(x($0.n).r),\(y($0.range.upperBound).r)"
            }
        shapes.append(
            "<polygon points=\"\(band.joined(separator: " "))\" fill=\"\(Palette.lifeguard)\" opacity=\"0.15\"/>")
        shapes.append(
            path(span.map { ($0, Prediction.swimFirstDetection(period: period)) }, colour: Palette.first, dash: "6 4"))
        shapes.append(
            path(
                span.map { ($0, Prediction.swimEveryoneSuspects(nodes: $0, period: period)) }, colour: Palette.everyone,
                dash: "6 4"))

        // The fit of "every node saw it unreachable".
        let samples = reports.flatMap { r in r.kills.compactMap { k in k.allSawUnreachable.map { (r.nodes, $0) } } }
        let fit = DisseminationFit(samples.map { (nodes: $0.0, seconds: $0.1) }, scale: .log2N)
        if let fit {
            let sizes = reports.map { Double($0.nodes) }
            let fitted = stride(from: log10(sizes.min()!), through: log10(sizes.max()!), by: 0.05).map { pow(10, $0) }
            shapes.append(
                path(
                    fitted.map { ($0, fit.intercept + fit.slope * log2($0)) }, colour: Palette.everyone, dash: "2 3",
                    width: 1))
        }

        // Measurements: every kill as a faint dot, the median as a bar
        // across the spread (shortest to longest).
        func measured(_ values: [Double], at nodes: Int, offset: Double, colour: String) {
            guard let median = median(values), let least = values.min(), let most = values.max() else { return }
            let cx = x(Double(nodes)) + offset
            shapes.append(
                "<line x1=\"\(cx.r)\" y1=\"\(y(least).r)\" x2=\"\(cx.r)\" y2=\"\(y(most).r)\" stroke=\"\(colour)\" stroke-width=\"2\"/>"
            )
            for v in values {
                shapes.append("<circle cx=\"\(cx.r)\" cy=\"\(y(v).r)\" r=\"2\" fill=\"\(colour)\" opacity=\"0.35\"/>")
            }
            shapes.append(
                "<rect x=\"\((cx - 5).r)\" y=\"\((y(median) - 1.5).r)\" width=\"10\" height=\"3\" fill=\"\(colour)\"/>")
        }
        for r in reports {
            measured(r.kills.compactMap(\.firstDetection), at: r.nodes, offset: -7, colour: Palette.first)
            measured(r.kills.compactMap(\.allSawUnreachable), at: r.nodes, offset: 7, colour: Palette.everyone)
            if let removed = r.killRemoved {
                shapes.append(
                    "<rect x=\"\((x(Double(r.nodes)) - 4).r)\" y=\"\((y(removed) - 4).r)\" width=\"8\" height=\"8\" fill=\"\(Palette.removed)\"/>"
                )
            }
        }

        // Legend, right of the plot.
        let legend: [(String, String, String)] =
            [
                ("bar", Palette.first, "Oscar: first node judges it unreachable"),
                ("bar", Palette.everyone, "Oscar: every node sees it unreachable"),
            ] + (fit == nil ? [] : [("dots", Palette.everyone, "fit of the above: a + b × log₂ N")]) + [
                ("square", Palette.removed, "Oscar: removed everywhere (first kill)"),
                ("dash", Palette.first, "SWIM: first probe, e/(e−1) periods"),
                ("", "", "(the probe's timeout not drawn)"),
                ("dash", Palette.everyone, "SWIM: every node suspects it: first"),
                ("", "", "probe + log₂ N + ln N periods of gossip"),
                ("band", Palette.lifeguard, "Lifeguard: declared dead: first probe"),
                ("", "", "+ a suspicion timeout of 4 to 24 ×"),
                ("", "", "max(1, log₁₀ N) periods"),
                ("", "", "Bars: shortest to longest, mark: median;"),
                ("", "", "dots: one kill each."),
            ]
        for (i, entry) in legend.enumerated() {
            let ly = top + 10 + Double(i) * 20
            let lx = right + 20
            switch entry.0 {
            case "bar":
                shapes.append(
                    "<rect x=\"\(lx.r)\" y=\"\((ly - 1.5).r)\" width=\"16\" height=\"3\" fill=\"\(entry.1)\"/>")
            case "square":
                shapes.append(
                    "<rect x=\"\((lx + 4).r)\" y=\"\((ly - 4).r)\" width=\"8\" height=\"8\" fill=\"\(entry.1)\"/>")
            case "dash", "dots":
                let dash = entry.0 == "dash" ? "6 4" : "2 3"
                shapes.append(
                    "<line x1=\"\(lx.r)\" y1=\"\(ly.r)\" x2=\"\((lx + 16).r)\" y2=\"\(ly.r)\" stroke=\"\(entry.1)\" stroke-width=\"1.5\" stroke-dasharray=\"\(dash)\"/>"
                )
            case "band":
                shapes.append(
                    "<rect x=\"\(lx.r)\" y=\"\((ly - 6).r)\" width=\"16\" height=\"12\" fill=\"\(entry.1)\" opacity=\"0.15\"/>"
                )
            default: break
            }
            shapes.append(Text.text(entry.2, x: lx + 22, y: ly + 4, size: 10))
        }
        return """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" font-family="sans-serif" fill="\(Text.Colour.ink)">
            <rect width="100%" height="100%" fill="white"/>
            \(shapes.joined(separator: "\n"))
            </svg>

            """
    }

    /// "1 kill", "20 kills".
    static func kills(_ count: Int) -> String { count == 1 ? "1 kill" : "\(count) kills" }

    /// 10000 as "10,000", whatever the locale.
    static func decimalsGrouped(_ value: Int) -> String {
        let digits = Array(String(value))
        return String(
            digits.enumerated().flatMap { i, d in (i > 0 && (digits.count - i) % 3 == 0) ? [",", d] : [d] })
    }

    /// The picture's colours, one per measure.
    enum Palette {
        static let first = "#2471a3"
        static let everyone = "#d35400"
        static let removed = "#c0392b"
        static let lifeguard = "#8e44ad"
    }
}
