import Foundation

/// A least-squares line through (x, y) points, with how well it fits: for
/// docs/SIMULATION.md's claim that dissemination grows with log N, and to
/// show that a line in N fits worse.
public struct DisseminationFit: Sendable, Equatable {
    /// How the size enters the line.
    public enum Scale: String, Sendable {
        /// y = a + b · log₂ N: a constant time per doubling.
        case log2N = "log2 N"
        /// y = a + b · N: a constant time per member.
        case n = "N"

        func x(_ nodes: Int) -> Double {
            switch self {
            case .log2N: log2(Double(nodes))
            case .n: Double(nodes)
            }
        }
    }

    public var scale: Scale
    public var intercept: Double
    public var slope: Double
    /// The share of the samples' variance the line explains (1 is a perfect
    /// fit; with the spread within one size it cannot reach 1).
    public var rSquared: Double
    /// The largest distance from a size's median to the line.
    public var largestMedianResidual: Double
    public var samples: Int

    /// Fits every sample (size, seconds). Nil with fewer than two sizes.
    public init?(_ samples: [(nodes: Int, seconds: Double)], scale: Scale) {
        let sizes = Set(samples.map(\.nodes))
        guard sizes.count >= 2 else { return nil }
        let xs = samples.map { scale.x($0.nodes) }
        let ys = samples.map(\.seconds)
        let count = Double(samples.count)
        let meanX = xs.reduce(0, +) / count
        let meanY = ys.reduce(0, +) / count
        var sxy = 0.0
        var sxx = 0.0
        for (x, y) in zip(xs, ys) {
            sxy += (x - meanX) * (y - meanY)
            sxx += (x - meanX) * (x - meanX)
        }
        self.scale = scale
        slope = sxy / sxx
        intercept = meanY - slope * meanX
        let total = ys.reduce(0) { $0 + ($1 - meanY) * ($1 - meanY) }
        var residual = 0.0
        for (x, y) in zip(xs, ys) {
            let e = y - (intercept + slope * x)
            residual += e * e
        }
        rSquared = total > 0 ? 1 - residual / total : 1
        largestMedianResidual = 0
        self.samples = samples.count
        for size in sizes {
            let median = SimulationReport.median(samples.filter { $0.nodes == size }.map(\.seconds))!
            largestMedianResidual = max(largestMedianResidual, abs(median - predicted(size)))
        }
    }

    /// The line's value at `nodes`.
    public func predicted(_ nodes: Int) -> Double { intercept + slope * scale.x(nodes) }

    /// One line: the equation and how well it fits.
    public var summary: String {
        func f(_ v: Double, _ digits: Int) -> String { String(format: "%.\(digits)f", v) }
        let sign = slope < 0 ? "−" : "+"
        let digits = scale == .n ? 5 : 2
        return
            "t = \(f(intercept, 2)) s \(sign) \(f(abs(slope), digits)) s × \(scale.rawValue): R² \(f(rSquared, 3)) over \(samples) kills, largest median off the line \(f(largestMedianResidual, 2)) s"
    }
}
