import Foundation
import OscarBase
import OscarTestSupport
import Testing

@testable import OscarTestKit

/// `oscar simulate --report`'s fit and picture: the fit recovers any line it
/// is given, and the picture draws every kill inside its frame with no two
/// texts overlapping, over random sizes and times.
@Suite(.timeLimit(.minutes(2))) struct SimulationPlotTests {
    @Test func theFitRecoversAnyLineExactly() {
        for seed in UInt64(1)...300 {
            var random = SplitMix64(seed: seed)
            let scale: DisseminationFit.Scale = seed % 2 == 0 ? .log2N : .n
            let intercept = random.unit() * 10 - 5
            let slope = (random.unit() - 0.5) * (scale == .n ? 0.01 : 2)
            let sizes = (0..<(2 + Int(random.next() % 5))).map { _ in 3 + Int(random.next() % 10_000) }
            let samples = sizes.flatMap { n in
                (0..<(1 + Int(random.next() % 4))).map { _ in
                    (nodes: n, seconds: intercept + slope * (scale == .n ? Double(n) : log2(Double(n))))
                }
            }
            guard Set(sizes).count >= 2 else {
                #expect(DisseminationFit(samples, scale: scale) == nil, "seed \(seed): one size has no line")
                continue
            }
            let fit = try! #require(DisseminationFit(samples, scale: scale), "seed \(seed)")
            #expect(abs(fit.intercept - intercept) < 1e-6, "seed \(seed): \(fit.summary)")
            #expect(abs(fit.slope - slope) < 1e-9, "seed \(seed): \(fit.summary)")
            #expect(fit.rSquared > 1 - 1e-9, "seed \(seed): \(fit.summary)")
            #expect(fit.largestMedianResidual < 1e-6, "seed \(seed): \(fit.summary)")
        }
    }

    @Test func aLineInNFitsLogarithmicDataWorse() throws {
        let samples = [10, 30, 100, 300, 1_000].map { (nodes: $0, seconds: 1 + 0.3 * log2(Double($0))) }
        let log = try #require(DisseminationFit(samples, scale: .log2N))
        let linear = try #require(DisseminationFit(samples, scale: .n))
        #expect(log.rSquared > 0.999_999)
        #expect(linear.rSquared < 0.9, "\(linear.summary)")
    }

    @Test func thePredictionsAreTheirFormulas() {
        let first = SimulationReport.Prediction.swimFirstDetection(period: 1)
        #expect(abs(first - 1.582) < 0.001)
        let dead10 = SimulationReport.Prediction.lifeguardDeclaredDead(nodes: 10, period: 0.5)
        #expect(abs(dead10.lowerBound - (first / 2 + 2)) < 1e-9)
        #expect(abs(dead10.upperBound - (first / 2 + 12)) < 1e-9)
        // Below 10 nodes the timeout stays at its floor, max(1, log₁₀ N).
        #expect(SimulationReport.Prediction.lifeguardDeclaredDead(nodes: 3, period: 0.5) == dead10)
        let swim = SimulationReport.Prediction.swimEveryoneSuspects(nodes: 1_024, period: 1)
        #expect(abs(swim - (first + 10 + Foundation.log(1_024.0))) < 1e-9)
    }

    /// Random reports of random sizes, and their pictures: drawn on a
    /// thread of their own, as Swift Testing's pool is shared by every test.
    static func drawn(seeds: ClosedRange<UInt64>) -> [(seed: UInt64, reports: [SimulationReport], svg: String)] {
        seeds.map { seed in
            var random = SplitMix64(seed: seed)
            let sizes = Set((0..<(1 + Int(random.next() % 5))).map { _ in 3 + Int(random.next() % 10_000) }).sorted()
            let reports = sizes.map { n in
                var r = SimulationReport(nodes: n, seed: seed)
                r.kills = (0..<(1 + Int(random.next() % 25))).map { k in
                    func time() -> Double? { random.next() % 10 == 0 ? nil : 0.01 + random.unit() * 100 }
                    return .init(victim: k, firstDetection: time(), allSawUnreachable: time(), removed: time())
                }
                r.killRemoved = r.kills[0].removed
                return r
            }
            return (seed, reports, SimulationReport.plot(reports, period: 0.5))
        }
    }

    @Test func everyKillIsDrawnInsideTheFrameAndNoTextsOverlap() async throws {
        for (seed, reports, svg) in try await offThePool({ Self.drawn(seeds: 1...40) }) {
            let drawn = ChaosPlotTests.lines("<circle ", in: svg)
            let expected = reports.flatMap(\.kills).reduce(0) {
                $0 + ($1.firstDetection == nil ? 0 : 1) + ($1.allSawUnreachable == nil ? 0 : 1)
            }
            #expect(drawn.count == expected, "seed \(seed)")
            let area = try ChaosPlotTests.plotArea(svg)
            for circle in drawn {
                let (x, y) = (ChaosPlotTests.attribute("cx", in: circle)!, ChaosPlotTests.attribute("cy", in: circle)!)
                #expect(area.x0 <= x && x <= area.x1 && area.y0 <= y && y <= area.y1, "seed \(seed): \(circle)")
            }
            let (width, height) = ChaosPlotTests.size(of: svg)
            let boxes = ChaosPlotTests.textBoxes(svg)
            #expect(boxes.count >= 10)
            for (i, a) in boxes.enumerated() {
                #expect(a.inside(width: width, height: height), "seed \(seed): \(a) leaves the picture")
                for b in boxes[(i + 1)...] where a.overlaps(b) {
                    Issue.record("seed \(seed): \(a) overlaps \(b)")
                }
            }
        }
    }
}
