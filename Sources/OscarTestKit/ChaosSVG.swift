/// What every chaos picture is drawn with: one palette, one time axis, one
/// legend layout and the text measure the label layout relies on, so the
/// timeline and the plots look alike and line up one under another.
extension ChaosReport {
    // MARK: - Colours

    /// One meaning, one colour, in every picture.
    enum Colour {
        static let healthy = "#27ae60"
        static let degraded = "#f39c12"
        static let down = "#c0392b"
        static let off = "#999"
        static let paused = "#8e44ad"
        static let fault = "#d33"
        static let ink = "#333"
        static let grid = "#e4e4e4"
    }

    // MARK: - Text

    static let labelFontSize = 10.0
    static let labelLaneHeight = 13.0

    /// A text's width, estimated: no font metrics here, so a sans-serif
    /// character is taken as 0.6 em, which errs wide.
    static func estimatedTextWidth(_ text: String, fontSize: Double) -> Double {
        Double(text.count) * fontSize * 0.6
    }

    /// A `<text>` element; `anchor` is `start`, `middle` or `end`. Every
    /// picture writes its text through here, one element a line, so the
    /// tests can find and measure it.
    static func text(
        _ content: String, x: Double, y: Double, size: Double, anchor: String = "start", extra: String = ""
    ) -> String {
        let anchorAttribute = anchor == "start" ? "" : " text-anchor=\"\(anchor)\""
        return
            "<text x=\"\(x.r)\" y=\"\(y.r)\" font-size=\"\(size.r)\"\(anchorAttribute)\(extra)>\(content.xmlEscaped)</text>"
    }

    // MARK: - Time axis

    /// The horizontal layout every picture of one run shares: the history's
    /// first and last event at the same pixels, so on the HTML page a fault
    /// window sits at the same place in the timeline and in every plot.
    struct TimeAxis {
        static let left = 150.0
        static let width = 900.0
        /// The picture's width: the axis and a margin on the right.
        static let pictureWidth = left + width + 20

        let first: UInt64
        let last: UInt64

        /// The axis of a history sorted by time; nil when it spans no time.
        init?(_ events: [ChaosEvent]) {
            guard let first = events.first?.t, let last = events.last?.t, last > first else { return nil }
            self.first = first
            self.last = last
        }

        var span: Double { Double(last - first) }

        func x(_ t: UInt64) -> Double {
            Self.left + Self.width * Double(min(max(t, first), last) - first) / span
        }

        /// Tick marks and labels (seconds since the first event) hanging
        /// from `y`: every 10 s, or a longer step when the run is long
        /// enough for the tick labels to collide.
        func ticks(at y: Double) -> [String] {
            let step = tickStep(spanSeconds: span / 1e9, pixels: Self.width)
            var shapes: [String] = []
            var tick: UInt64 = 0
            while first + tick <= last {
                let tx = x(first + tick)
                shapes.append(
                    "<line x1=\"\(tx.r)\" y1=\"\(y.r)\" x2=\"\(tx.r)\" y2=\"\((y + 5).r)\" stroke=\"\(Colour.ink)\"/>")
                shapes.append(text("\(tick / 1_000_000_000) s", x: tx, y: y + 17, size: 10, anchor: "middle"))
                tick += step * 1_000_000_000
            }
            return shapes
        }
    }

    /// Seconds between time-axis ticks: the first of 10 s, 20 s, 30 s, 1 min,
    /// … that leaves at least 50 pixels between tick labels.
    static func tickStep(spanSeconds: Double, pixels: Double) -> UInt64 {
        let steps: [UInt64] = [10, 20, 30, 60, 120, 300, 600, 1200, 1800, 3600]
        let fit = steps.first { pixels * Double($0) / max(spanSeconds, 1) >= 50 }
        return fit ?? max(3600, UInt64(spanSeconds * 50 / pixels / 3600 + 1) * 3600)
    }

    /// A round step (1, 2 or 5 times a power of ten) that divides 0…`maximum`
    /// into at most `count` intervals, for a linear value axis.
    static func niceStep(maximum: Double, count: Int = 5) -> Double {
        guard maximum > 0 else { return 1 }
        var power = 1.0
        while power * 10 <= maximum { power *= 10 }
        while power > maximum { power /= 10 }
        for multiple in [0.1, 0.2, 0.5, 1, 2, 5, 10] where maximum / (power * multiple) <= Double(count) {
            return power * multiple
        }
        return power * 10
    }

    // MARK: - Legend

    /// What a legend entry shows before its text.
    enum Swatch {
        case dot(String)
        case ring(String)
        case line(String)
        case dashed(String)
        case block(String, opacity: Double)
        /// The timeline's mark of a kill.
        case cross
    }

    /// A legend's entries laid out left to right from `x`, wrapping before
    /// they would pass `maxX`, so a legend never runs off the picture; the
    /// first row's baseline at `y`. Returns the elements and the height
    /// taken, so the picture can end below it.
    static func legend(
        _ entries: [(Swatch, String)], x: Double, y: Double, maxX: Double
    ) -> (
        shapes: [String], height: Double
    ) {
        let size = 11.0
        let rowHeight = 16.0
        var shapes: [String] = []
        var (cx, row) = (x, 0.0)
        for (swatch, label) in entries {
            let width = 16 + estimatedTextWidth(label, fontSize: size)
            if cx > x, cx + width > maxX {
                cx = x
                row += 1
            }
            let baseline = y + rowHeight * row
            let mid = baseline - 4
            let swatchShape: String
            switch swatch {
            case .dot(let c):
                swatchShape = "<circle cx=\"\((cx + 5).r)\" cy=\"\(mid.r)\" r=\"3.5\" fill=\"\(c)\"/>"
            case .ring(let c):
                swatchShape =
                    "<circle cx=\"\((cx + 5).r)\" cy=\"\(mid.r)\" r=\"3\" fill=\"none\" stroke=\"\(c)\" stroke-width=\"1.2\"/>"
            case .line(let c):
                swatchShape =
                    "<line x1=\"\(cx.r)\" y1=\"\(mid.r)\" x2=\"\((cx + 12).r)\" y2=\"\(mid.r)\" stroke=\"\(c)\" stroke-width=\"2\"/>"
            case .dashed(let c):
                swatchShape =
                    "<line x1=\"\(cx.r)\" y1=\"\(mid.r)\" x2=\"\((cx + 12).r)\" y2=\"\(mid.r)\" stroke=\"\(c)\" stroke-dasharray=\"4 3\"/>"
            case .block(let c, let opacity):
                swatchShape =
                    "<rect x=\"\(cx.r)\" y=\"\((mid - 5).r)\" width=\"12\" height=\"10\" fill=\"\(c)\" fill-opacity=\"\(opacity)\"/>"
            case .cross:
                swatchShape = cross(x: cx + 6, y: mid)
            }
            shapes.append("<g class=\"legend-entry\">" + swatchShape)
            shapes.append(text(label, x: cx + 16, y: baseline, size: size, extra: " class=\"legend\""))
            shapes.append("</g>")
            cx += width + 14
        }
        return (shapes, entries.isEmpty ? 0 : rowHeight * (row + 1))
    }

    // MARK: - A plot's frame

    /// What every plot has around its data, so the latency and rate plots
    /// differ only in what they draw inside: a title, the fault windows
    /// shaded behind the plot area and labelled above it, value ticks on the
    /// left, a caption for them in the margin, the time axis below, and a
    /// legend under that.
    struct PlotFrame {
        static let titleSize = 14.0
        let axis: TimeAxis
        let band: FaultBand
        /// The plot area's top and bottom edges; it spans the time axis.
        let top: Double
        let bottom: Double
        var left: Double { TimeAxis.left }
        var right: Double { TimeAxis.left + TimeAxis.width }

        init(_ events: [ChaosEvent], axis: TimeAxis, plotHeight: Double) {
            self.axis = axis
            band = FaultBand(events, axis: axis)
            top = 50 + band.raise
            bottom = top + plotHeight
        }

        /// The picture: `data` drawn over the frame, `ticks` (a height in
        /// the plot area and its label) as grid lines, `caption` as lines of
        /// text in the left margin, and `legend` below the time axis.
        func picture(
            title: String, caption: [String], ticks: [(y: Double, label: String)], data: [String],
            legend entries: [(Swatch, String)]
        ) -> String {
            var shapes = [
                text(title, x: 8, y: 22, size: Self.titleSize, extra: " font-weight=\"bold\" class=\"title\"")
            ]
            shapes += band.shapes(axis: axis, top: top, bottom: bottom)
            for tick in ticks {
                shapes.append(
                    "<line x1=\"\(left.r)\" y1=\"\(tick.y.r)\" x2=\"\(right.r)\" y2=\"\(tick.y.r)\" stroke=\"\(Colour.grid)\"/>"
                )
                shapes.append(text(tick.label, x: left - 6, y: tick.y + 3.5, size: 10, anchor: "end"))
            }
            let middle = (top + bottom) / 2 - 7 * Double(caption.count - 1)
            for (i, line) in caption.enumerated() {
                shapes.append(text(line, x: 8, y: middle + 14 * Double(i), size: 11))
            }
            shapes.append(
                "<rect class=\"plot-area\" x=\"\(left.r)\" y=\"\(top.r)\" width=\"\(TimeAxis.width.r)\" height=\"\((bottom - top).r)\" fill=\"none\" stroke=\"#bbb\"/>"
            )
            shapes += data
            shapes += axis.ticks(at: bottom)
            let legend = ChaosReport.legend(
                entries, x: left, y: bottom + 40, maxX: TimeAxis.pictureWidth - 10)
            return ChaosReport.picture(height: bottom + 40 + legend.height, shapes + legend.shapes)
        }
    }

    /// The mark of a kill: an 8-pixel cross centred on (`x`, `y`).
    static func cross(x: Double, y: Double) -> String {
        "<path class=\"cross\" d=\"M\((x - 4).r),\((y - 4).r) l8,8 m0,-8 l-8,8\" stroke=\"\(Colour.ink)\" stroke-width=\"2\"/>"
    }

    // MARK: - The picture

    /// An SVG document `height` high, on white, in the shared width.
    static func picture(height: Double, _ shapes: [String]) -> String {
        let width = Int(TimeAxis.pictureWidth)
        let h = Int(height.rounded(.up))
        return """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(width)" height="\(h)" viewBox="0 0 \(width) \(h)" font-family="sans-serif">
            <rect width="100%" height="100%" fill="white"/>
            \(shapes.joined(separator: "\n"))
            </svg>

            """
    }

    /// What a picture of an empty history says.
    static func emptyPicture(_ message: String) -> String {
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"400\" height=\"40\"><text x=\"10\" y=\"25\">\(message.xmlEscaped)</text></svg>\n"
    }
}

extension Double {
    /// One decimal, for SVG coordinates.
    var r: String { String((self * 10).rounded() / 10) }
}

extension String {
    /// Safe as XML (and HTML) text.
    var xmlEscaped: String {
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
}
