import Foundation
import Oscar
import OscarBase
import OscarTestSupport
import Testing

@testable import OscarTestKit

/// The chaos report's pictures and page, drawn from seeded random histories:
/// every ask is drawn once where it belongs, nothing leaves the picture, no
/// two texts overlap, and the page escapes what the checks found.
@Suite(.timeLimit(.minutes(4))) struct ChaosPlotTests {
    static let s: UInt64 = 1_000_000_000
    /// Ten runs; four under the sanitizer, where drawing them costs seconds.
    static let seeds: [UInt64] = Array(1...(underSanitizer ? 4 : 10))

    typealias Run = (events: [ChaosEvent], nodes: [String])

    /// A run and its pictures, drawn once for every test that reads them.
    struct Drawn: Sendable {
        var seed: UInt64
        var events: [ChaosEvent]
        var nodes: [String]
        var plots: [ChaosReport.KindPlots]
        var timeline: String
        /// The timeline and each kind's plots, by file name.
        var pictures: [(name: String, svg: String)] {
            [("timeline.svg", timeline)] + plots.flatMap { [($0.latencyFile, $0.latency), ($0.rateFile, $0.rate)] }
        }
    }

    /// The seeded runs, and the timeline tests' crowded one as seed 0.
    static let drawing = ComputedOnce<[Drawn]> {
        let crowded: Run = (ChaosTimelineTests.crowded(every: 1.2, count: 40), ChaosTimelineTests.nodes)
        let runs: [(UInt64, Run)] = seeds.map { ($0, history(seed: $0)) } + [(0, crowded)]
        return runs.map { seed, run in
            Drawn(
                seed: seed, events: run.events, nodes: run.nodes, plots: ChaosReport.kindPlots(run.events),
                timeline: ChaosReport.svg(run.events, nodes: run.nodes))
        }
    }

    // MARK: - A run, made up

    /// A run of 3 to 5 nodes for 20 to 90 s: asks of four kinds every few
    /// tens of milliseconds from each node, network faults of a few seconds
    /// (during which asks fail fast or time out), kills (whose asks stay
    /// open) and restarts, pauses, and views when membership changes. The
    /// clock starts far from zero, as the host's monotonic clock does.
    static func history(seed: UInt64) -> Run {
        var random = SplitMix64(seed: seed)
        let nodes = (0..<(3 + Int(random.next() % 3))).map { "127.0.0.1:\(7100 + $0)" }
        let seconds = 20 + Double(random.next() % 71)
        let origin: UInt64 = 5_000_000_000_000 + seed * 7_919
        func at(_ t: Double) -> UInt64 { origin + UInt64(t * Double(s)) }
        var events: [ChaosEvent] = []
        // The nemesis's plan: faults, kills and pauses, one at a time.
        let labels = [
            "partition {7100,7101} | {7102,7103,7104}", "loss 17%", "delay 120±30 ms", "partition {7100} | {7101,7102}",
        ]
        var faults: [(from: Double, to: Double)] = []
        var down: [String: [(from: Double, to: Double)]] = [:]
        var t = 2 + random.unit() * 3
        while t < seconds - 4 {
            let length = 1 + random.unit() * 5
            switch random.next() % 4 {
            case 0, 1:
                events.append(
                    ChaosEvent(t: at(t), node: "cluster", kind: .fault, detail: labels[Int(random.next() % 4)]))
                events.append(ChaosEvent(t: at(t + length), node: "cluster", kind: .heal))
                faults.append((t, t + length))
            case 2:
                let node = nodes[Int(random.next() % UInt64(nodes.count))]
                events.append(ChaosEvent(t: at(t), node: node, kind: .kill, pid: 1))
                events.append(ChaosEvent(t: at(t + length), node: node, kind: .start, pid: 2))
                down[node, default: []].append((t, t + length))
            default:
                let node = nodes[Int(random.next() % UInt64(nodes.count))]
                events.append(ChaosEvent(t: at(t), node: node, kind: .pause, pid: 1))
                events.append(ChaosEvent(t: at(t + length), node: node, kind: .resume, pid: 1))
            }
            t += length + 1 + random.unit() * 6
        }
        func inFault(_ t: Double) -> Bool { faults.contains { $0.from <= t && t < $0.to } }
        func isDown(_ node: String, _ t: Double) -> Bool { (down[node] ?? []).contains { $0.from <= t && t < $0.to } }
        func diedBetween(_ node: String, _ from: Double, _ to: Double) -> Bool {
            (down[node] ?? []).contains { from < $0.from && $0.from <= to }
        }
        let kinds = ["echo", "pool", "singleton", "virtual"]
        for (i, node) in nodes.enumerated() {
            events.append(ChaosEvent(t: at(0), node: node, kind: .start, pid: Int32(100 + i)))
            // A view at each fault's edges: someone unreachable inside.
            for change in [0.5] + faults.flatMap({ [$0.from + 0.2, $0.to + 0.3] }) {
                let members = nodes.map { "\($0)=up" + (inFault(change) && $0 != node ? "!" : "") }
                events.append(ChaosEvent(t: at(change), node: node, kind: .view, uid: 1, members: members))
            }
            var (t, op) = (0.5 + random.unit(), 0)
            while t < seconds - 0.5 {
                defer { t += 0.02 + random.unit() * 0.08 }
                guard !isDown(node, t) else { continue }
                op += 1
                let kind = kinds[Int(random.next() % 4)]
                let target = kind == "echo" ? "echo@\(nodes[Int(random.next() % UInt64(nodes.count))])" : kind
                let timeout = kind == "virtual" ? 5000 : 2000
                events.append(
                    ChaosEvent(t: at(t), node: node, kind: .invoke, uid: 1, op: op, target: target, value: timeout))
                let draw = random.unit()
                let (outcome, took): (ChaosEvent.Kind, Double) =
                    inFault(t) && draw < 0.3
                    ? (.timeout, Double(timeout) / 1000 + random.unit() * 0.05)
                    : inFault(t) && draw < 0.6
                        ? (.fail, 0.0005 + random.unit() * 0.01)
                        : (.ok, 0.0002 * pow(1.6, Double(random.next() % 20)))
                // A kill before the outcome, or the end of the run: open.
                guard t + took < seconds, !diedBetween(node, t, t + took) else { continue }
                events.append(
                    ChaosEvent(t: at(t + took), node: node, kind: outcome, uid: 1, op: op, target: target))
            }
            events.append(ChaosEvent(t: at(seconds), node: node, kind: .exit, value: 0))
        }
        return (events.sorted { $0.t < $1.t }, nodes)
    }

    // MARK: - Reading the pictures back

    /// An element's numeric attribute.
    static func attribute(_ name: String, in element: Substring) -> Double? {
        guard let start = element.range(of: " \(name)=\"") else { return nil }
        return Double(element[start.upperBound...].prefix { $0 != "\"" })
    }

    /// The lines of a picture that start with `prefix`: the pictures write
    /// one element a line (a legend entry's group and swatch on one).
    static func lines(_ prefix: String, in svg: String) -> [Substring] {
        svg.split(separator: "\n").filter { $0.hasPrefix(prefix) }
    }

    struct Box: CustomStringConvertible {
        var x0: Double, y0: Double, x1: Double, y1: Double, text: String
        var description: String { "'\(text)' (\(x0)…\(x1), \(y0)…\(y1))" }
        func overlaps(_ o: Box) -> Bool { x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1 }
        func inside(width: Double, height: Double) -> Bool { x0 >= 0 && y0 >= 0 && x1 <= width && y1 <= height }
    }

    /// Every text's estimated box: its estimated width placed by its anchor,
    /// from the cap height above the baseline to a descender below. The
    /// pictures write each text on a line of its own.
    static func textBoxes(_ svg: String) -> [Box] {
        svg.split(separator: "\n").filter { $0.hasPrefix("<text ") }.compactMap { line in
            guard let x = attribute("x", in: line), let y = attribute("y", in: line),
                let size = attribute("font-size", in: line), let open = line.firstIndex(of: ">"),
                line.hasSuffix("</text>")
            else { return nil }
            let text = String(line[line.index(after: open)...].dropLast("</text>".count))
                .replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
                .replacingOccurrences(of: "&amp;", with: "&")
            let width = ChaosReport.estimatedTextWidth(text, fontSize: size)
            let x0 =
                line.contains("text-anchor=\"end\"")
                ? x - width : line.contains("text-anchor=\"middle\"") ? x - width / 2 : x
            return Box(x0: x0, y0: y - 0.8 * size, x1: x0 + width, y1: y + 0.25 * size, text: text)
        }
    }

    static func size(of svg: String) -> (width: Double, height: Double) {
        let root = lines("<svg ", in: svg)[0]
        return (attribute("width", in: root) ?? 0, attribute("height", in: root) ?? 0)
    }

    static func plotArea(_ svg: String) throws -> Box {
        let area = try #require(lines("<rect class=\"plot-area\"", in: svg).first)
        let (x, y) = (attribute("x", in: area)!, attribute("y", in: area)!)
        return Box(
            x0: x, y0: y, x1: x + attribute("width", in: area)!, y1: y + attribute("height", in: area)!, text: "")
    }

    // MARK: - The plots

    @Test func everyCompletedAskIsOnePointInsideThePlotArea() async throws {
        for run in await Self.drawing.value {
            let (seed, asks) = (run.seed, ChaosAsk.all(in: run.events))
            for plot in run.plots {
                let area = try Self.plotArea(plot.latency)
                let ofKind = asks.filter { $0.kind == plot.kind }
                let points = Self.lines("<circle class=\"point ", in: plot.latency)
                let open = Self.lines("<circle class=\"open-point\"", in: plot.latency)
                #expect(points.count == ofKind.filter { $0.outcome != .open }.count, "seed \(seed) \(plot.kind)")
                #expect(open.count == ofKind.filter { $0.outcome == .open }.count, "seed \(seed) \(plot.kind)")
                for point in points + open {
                    let (x, y) = (Self.attribute("cx", in: point)!, Self.attribute("cy", in: point)!)
                    #expect(
                        area.x0 <= x && x <= area.x1 && area.y0 <= y && y <= area.y1,
                        "seed \(seed) \(plot.kind): \(point) outside \(area)")
                }
            }
        }
    }

    @Test func thePlotsCountWhatTheCheckerCounts() async {
        for run in await Self.drawing.value {
            let (seed, tally) = (run.seed, ChaosChecker().check(run.events).tally)
            for plot in run.plots {
                let row = tally.asks[plot.kind] ?? []
                for (i, outcome) in ["ok", "failed", "unknown"].enumerated() {
                    let drawn = Self.lines("<circle class=\"point \(outcome)\"", in: plot.latency).count
                    #expect(drawn == row[i], "seed \(seed) \(plot.kind) \(outcome)")
                }
            }
        }
    }

    @Test func rateBucketsSumToTheCompletionsAndStayInsideThePlot() async throws {
        for run in await Self.drawing.value {
            let (seed, axis) = (run.seed, try #require(ChaosReport.TimeAxis(run.events)))
            let asks = ChaosAsk.all(in: run.events)
            let buckets = ChaosReport.rateBuckets(asks, axis: axis)
            for outcome in [ChaosAsk.Outcome.ok, .failed, .unknown] {
                #expect(buckets[outcome]?.reduce(0, +) == asks.filter { $0.outcome == outcome }.count)
            }
            #expect(buckets[.ok]?.count == Int((axis.last - axis.first + Self.s - 1) / Self.s))
            for plot in run.plots {
                let area = try Self.plotArea(plot.rate)
                for line in Self.lines("<polyline ", in: plot.rate) {
                    let points = try #require(line.firstRange(of: "points=\"")).upperBound
                    for pair in line[points...].prefix(while: { $0 != "\"" }).split(separator: " ") {
                        let xy = pair.split(separator: ",").compactMap { Double($0) }
                        #expect(
                            xy.count == 2 && area.x0 <= xy[0] && xy[0] <= area.x1 && area.y0 <= xy[1]
                                && xy[1] <= area.y1, "seed \(seed) \(plot.kind): \(pair) outside \(area)")
                    }
                }
            }
        }
    }

    @Test func anAskCutOffByAKillIsDrawnAtItsAgeAtTheKill() throws {
        func e(_ t: Double, _ kind: ChaosEvent.Kind, op: Int? = nil, node: String = "a") -> ChaosEvent {
            ChaosEvent(
                t: UInt64(t * Double(Self.s)), node: node, kind: kind, uid: op.map { _ in 1 }, op: op,
                target: op.map { _ in "pool" }, value: kind == .invoke ? 2000 : nil)
        }
        let svg = ChaosReport.latencyPlot(
            [
                e(0, .start), e(0, .start, node: "b"), e(1, .invoke, op: 1), e(1.5, .kill),
                e(2, .invoke, op: 2, node: "b"),
                e(2.01, .ok, op: 2, node: "b"), e(10, .exit, node: "b"),
            ], kind: "pool")
        func tick(_ label: String) throws -> Double {
            let line = try #require(Self.lines("<text ", in: svg).first { $0.hasSuffix(">\(label)</text>") })
            return try #require(Self.attribute("y", in: line)) - 3.5
        }
        let ring = try #require(Self.lines("<circle class=\"open-point\"", in: svg).first)
        let y = try #require(Self.attribute("cy", in: ring))
        // 500 ms: between the 100 ms and 1 s ticks (not 9 s, its age at the end).
        #expect(try tick("1 s") < y && y < tick("100 ms"), "\(ring)")
    }

    @Test func theLogScaleHoldsEveryValueAndLabelsItsDecades() {
        let scale = ChaosReport.LogScale(values: [0.3, 40, 2000], from: 300, to: 100)
        #expect(scale.low == 0.1 && scale.high == 10_000)
        #expect(scale.ticks.map(\.label) == ["0.1 ms", "1 ms", "10 ms", "100 ms", "1 s", "10 s"])
        #expect(scale.y(0.1) == 300 && scale.y(10_000) == 100)
        #expect(scale.y(0) == 300 && scale.y(1e9) == 100, "out of range: at the edge")
        let one = ChaosReport.LogScale(values: [5], from: 10, to: 0)
        #expect(one.low == 1 && one.high == 10)
    }

    // MARK: - Every picture

    @Test func everyTextAndLegendStaysInsideItsPicture() async throws {
        for run in await Self.drawing.value {
            for picture in run.pictures {
                let (seed, (width, height)) = (run.seed, Self.size(of: picture.svg))
                for box in Self.textBoxes(picture.svg) {
                    #expect(box.inside(width: width, height: height), "seed \(seed) \(picture.name): \(box)")
                }
                for entry in Self.lines("<g class=\"legend-entry\">", in: picture.svg) {
                    let swatch = entry.dropFirst("<g class=\"legend-entry\">".count)
                    // Its left or centre: x, cx, x1, or where a path starts.
                    let start = swatch.firstRange(of: " d=\"M").map { swatch[$0.upperBound...] }?
                        .prefix { $0 != " " }.split(separator: ",").compactMap { Double($0) }
                    let x =
                        ["x", "cx", "x1"].lazy.compactMap { Self.attribute($0, in: swatch) }.first ?? start?.first ?? -1
                    let y =
                        ["y", "cy", "y1"].lazy.compactMap { Self.attribute($0, in: swatch) }.first ?? start?.last ?? -1
                    #expect(x >= 0 && x + 12 <= width && y >= 0 && y <= height, "\(picture.name): \(swatch)")
                }
            }
        }
    }

    @Test func noTwoTextsOverlap() async {
        for run in await Self.drawing.value {
            for picture in run.pictures {
                let (seed, boxes) = (run.seed, Self.textBoxes(picture.svg))
                #expect(boxes.count > 5, "\(picture.name) has its labels")
                for (i, a) in boxes.enumerated() {
                    for b in boxes[(i + 1)...] where a.overlaps(b) {
                        Issue.record("seed \(seed) \(picture.name): \(a) overlaps \(b)")
                    }
                }
            }
        }
    }

    @Test func anEmptyHistoryHasNoPlots() {
        #expect(ChaosReport.kindPlots([]).isEmpty)
        #expect(ChaosReport.latencyPlot([], kind: "echo").contains("empty history"))
        #expect(ChaosReport.ratePlot([], kind: "echo").contains("empty history"))
    }

    @Test func fileNamesAreSafeAndDistinct() {
        let events = ["echo@127.0.0.1:7100", "a/b", "a?b", "../x"].enumerated().flatMap { i, target in
            [
                ChaosEvent(t: UInt64(i) * Self.s, node: "n", kind: .invoke, uid: 1, op: i, target: target, value: 9),
                ChaosEvent(t: UInt64(i) * Self.s + 1, node: "n", kind: .ok, uid: 1, op: i, target: target),
            ]
        }
        let plots = ChaosReport.kindPlots(events)
        #expect(plots.map(\.kind) == ["../x", "a/b", "a?b", "echo"])
        #expect(plots.map(\.rateFile) == ["rate-___x.svg", "rate-a_b.svg", "rate-a_b-2.svg", "rate-echo.svg"])
        #expect(plots.map(\.latencyFile).allSatisfy { !$0.dropFirst().contains("/") })
    }

    // MARK: - The page

    @Test func thePageEscapesFindingsAndHoldsEveryPicture() async {
        let h = await Self.drawing.value[3]
        var verdict = ChaosChecker().check(h.events)
        verdict.checks.append(
            ChaosChecker.Check(name: "x < y & z", findings: ["ask <b>1</b> & 2", "</td><script>alert(1)</script>"]))
        let (plots, timeline) = (h.plots, h.timeline)
        let page = ChaosReport.html(
            title: "chaos <3 & co", verdict: verdict, summary: "a < b", timeline: timeline, plots: plots)
        #expect(page.contains("<td>x &lt; y &amp; z</td>"))
        #expect(page.contains("<li>ask &lt;b&gt;1&lt;/b&gt; &amp; 2</li>"))
        #expect(page.contains("&lt;/td&gt;&lt;script&gt;"))
        #expect(!page.contains("<script") && !page.contains("<b>"))
        #expect(page.contains("<title>chaos &lt;3 &amp; co</title>") && page.contains("<pre>a &lt; b</pre>"))
        #expect(page.contains("<p class=\"verdict fail\">FAIL</p>"))
        #expect(page.contains(timeline))
        for plot in plots { #expect(page.contains(plot.latency) && page.contains(plot.rate)) }
        #expect(!page.contains("<link") && !page.contains("src="), "self-contained")
    }

    @Test func thePageListsAtMostFiftyFindingsACheck() {
        let verdict = ChaosChecker.Verdict(
            checks: [ChaosChecker.Check(name: "c", findings: (1...80).map { "finding \($0)" })],
            tally: ChaosChecker.Tally())
        let page = ChaosReport.html(title: "t", verdict: verdict, summary: "", timeline: "", plots: [])
        #expect(page.ranges(of: "<li>finding ").count == 50)
        #expect(page.contains("<li>… and 30 more</li>"))
    }

    // MARK: - For a person

    /// With `OSCAR_PLOT_DIR` set, writes the pictures of a few made-up runs
    /// there, to be looked at (`rsvg-convert -o x.png x.svg`).
    @Test func writesPicturesWhenAsked() async throws {
        guard let dir = ProcessInfo.processInfo.environment["OSCAR_PLOT_DIR"] else { return }
        for run in await Self.drawing.value where [0, 1, 4].contains(run.seed) {
            for picture in run.pictures {
                let seed = run.seed
                try picture.svg.write(toFile: "\(dir)/seed\(seed)-\(picture.name)", atomically: true, encoding: .utf8)
            }
        }
    }
}
