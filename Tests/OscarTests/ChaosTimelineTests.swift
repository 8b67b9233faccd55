import Oscar
import Testing

@testable import OscarTestKit

/// The chaos timeline's fault labels: however close together the faults,
/// no two labels overlap, so a partition (a split brain) stays readable.
@Suite(.timeLimit(.minutes(5))) struct ChaosTimelineTests {
    static let nodes = (0..<5).map { "127.0.0.1:\(7100 + $0)" }
    static let s: UInt64 = 1_000_000_000

    /// A label's box as drawn: its text's estimated extent, from the cap
    /// height above the baseline to a descender below.
    struct Box: CustomStringConvertible {
        var x: Double, y: Double, width: Double, text: String
        var description: String { "'\(text)' at (\(x), \(y)), \(width) wide" }
        func overlaps(_ other: Box) -> Bool {
            let size = ChaosReport.labelFontSize
            let horizontal = x < other.x + other.width && other.x < x + width
            let vertical = y - size < other.y + 3 && other.y - size < y + 3
            return horizontal && vertical
        }
    }

    /// The fault labels of a drawn timeline.
    static func labels(in svg: String) -> [Box] {
        svg.split(separator: "\n").filter { $0.contains("class=\"fault-label\"") }.compactMap { line in
            func attribute(_ name: String) -> Double? {
                guard let start = line.range(of: " \(name)=\"") else { return nil }
                return Double(line[start.upperBound...].prefix { $0 != "\"" })
            }
            guard let x = attribute("x"), let y = attribute("y"),
                let open = line.firstIndex(of: ">"), let close = line.range(of: "</text>")
            else { return nil }
            let text = String(line[line.index(after: open)..<close.lowerBound])
                .replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
                .replacingOccurrences(of: "&amp;", with: "&")
            let width = ChaosReport.estimatedTextWidth(text, fontSize: ChaosReport.labelFontSize)
            return Box(x: x, y: y, width: width, text: text)
        }
    }

    /// Five nodes up for a minute, with faults every `every` seconds from
    /// 3 s on, each healed half-way to the next: partitions (long labels)
    /// alternating with loss and delay (short ones).
    static func crowded(every: Double, count: Int) -> [ChaosEvent] {
        var events = nodes.enumerated().map { i, node in
            ChaosEvent(t: 0, node: node, kind: .start, pid: Int32(100 + i))
        }
        let labels = [
            "partition {7100,7101} | {7102,7103,7104}", "loss 17%", "delay 120±30 ms",
            "partition {7100} | {7101,7102,7103,7104}",
        ]
        for i in 0..<count {
            let t = 3 + every * Double(i)
            events.append(
                ChaosEvent(
                    t: UInt64(t * Double(s)), node: "cluster", kind: .fault, detail: labels[i % labels.count]))
            events.append(ChaosEvent(t: UInt64((t + every / 2) * Double(s)), node: "cluster", kind: .heal))
        }
        events.append(ChaosEvent(t: 60 * s, node: nodes[0], kind: .exit, value: 0))
        return events
    }

    @Test func crowdedFaultLabelsDoNotOverlap() {
        let svg = ChaosReport.svg(Self.crowded(every: 1.2, count: 40), nodes: Self.nodes)
        let boxes = Self.labels(in: svg)
        #expect(boxes.count == 40, "one label per fault window")
        for (i, a) in boxes.enumerated() {
            for b in boxes[(i + 1)...] {
                #expect(!a.overlaps(b), "\(a) overlaps \(b)")
            }
        }
        #expect(Set(boxes.map(\.y)).count > 1, "crowded labels are stacked in lanes")
    }

    @Test func labelsStayInsideThePictureAndAboveTheRows() throws {
        let svg = ChaosReport.svg(Self.crowded(every: 1.2, count: 40), nodes: Self.nodes)
        let width = try #require(
            svg.firstRange(of: "width=\"").map { Double(svg[$0.upperBound...].prefix { $0 != "\"" }) ?? 0 })
        // The first node row's name is drawn 17 px below the rows' top.
        let firstRow = try #require(
            svg.split(separator: "\n").first { $0.contains(">\(Self.nodes[0])</text>") })
        let rowText = try #require(firstRow.firstRange(of: "y=\"").map { firstRow[$0.upperBound...] })
        let rowsTop = try #require(Double(rowText.prefix { $0 != "\"" })) - 17
        for box in Self.labels(in: svg) {
            #expect(box.x >= 0 && box.x + box.width <= width, "\(box) leaves the \(width) px picture")
            #expect(box.y - ChaosReport.labelFontSize >= 0, "\(box) is cut off at the top")
            #expect(box.y < rowsTop - 6, "\(box) runs into the rows, which start at \(rowsTop)")
        }
    }

    @Test func sparseLabelsKeepOneLane() {
        // 18 s of 60 is 270 px: room for the longest label (about 240 px).
        let svg = ChaosReport.svg(Self.crowded(every: 18, count: 3), nodes: Self.nodes)
        let boxes = Self.labels(in: svg)
        #expect(boxes.count == 3)
        #expect(Set(boxes.map(\.y)).count == 1, "\(boxes)")
    }

    @Test func lanesAreTheFirstFreeOne() {
        typealias B = ChaosReport.LabelBox
        let lanes = ChaosReport.labelLanes([
            B(x: 0, width: 100), B(x: 50, width: 100), B(x: 120, width: 10), B(x: 160, width: 50),
            B(x: 100, width: 40), B(x: 300, width: 10),
        ])
        // 120..130 fits after 0..100 in lane 0; 100..140 collides in lanes 0
        // (with 120..130) and 1 (with 50..150): lane 2.
        #expect(lanes == [0, 1, 0, 0, 2, 0])
        #expect(ChaosReport.labelLanes([]) == [])
    }

    @Test func longRunsGetFewerTicks() {
        #expect(ChaosReport.tickStep(spanSeconds: 60, pixels: 900) == 10)
        let hour = ChaosReport.tickStep(spanSeconds: 3600, pixels: 900)
        #expect(900 * Double(hour) / 3600 >= 50, "at least 50 px between tick labels, not \(hour) s")
        let day = ChaosReport.tickStep(spanSeconds: 86_400, pixels: 900)
        #expect(900 * Double(day) / 86_400 >= 50, "\(day) s")
    }
}
