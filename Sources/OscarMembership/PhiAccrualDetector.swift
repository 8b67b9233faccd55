import Foundation
import OscarBase

/// The phi accrual failure detector (Hayashibara et al., 2004), as a pure
/// value: heartbeats in, a suspicion level out, time passed in by the caller.
///
/// Phi is -log10 of the probability that a heartbeat this late would still
/// come, given the intervals seen so far (modelled as a normal distribution,
/// widened by `acceptablePause`). Phi 8 means about a one-in-10⁸ chance of
/// being wrong.
package struct PhiAccrualDetector: Sendable {
    /// Settings, one `Sendable` struct; the defaults suit loopback and LAN
    /// clusters heartbeating every 500 ms.
    package typealias Settings = FailureDetectorSettings

    public let settings: Settings
    private var intervals: [Double] = []  // seconds, a ring once full
    private var next = 0
    private var sum = 0.0
    private var sumOfSquares = 0.0
    private var lastHeartbeat: Double?

    public init(settings: Settings = Settings()) {
        self.settings = settings
        // Seed with the estimate, as a first interval with a broad spread.
        let first = settings.firstHeartbeatEstimate.inSeconds
        record(first - first / 4)
        record(first + first / 4)
    }

    /// A heartbeat arrived at `now` (seconds on any monotonic clock).
    ///
    /// An interval the detector had already judged a failure (phi at or over
    /// the threshold when the heartbeat came) is an outage, not a heartbeat
    /// interval, and is not learned: learned, a partition's silence widens
    /// the distribution until the next partition of the same length looks
    /// normal, and the member is never suspected again.
    public mutating func heartbeat(at now: Double) {
        if let last = lastHeartbeat, now > last, isAvailable(at: now) { record(now - last) }
        lastHeartbeat = now
    }

    /// The suspicion level at `now`: 0 before the first heartbeat.
    public func phi(at now: Double) -> Double {
        guard let last = lastHeartbeat else { return 0 }
        let n = Double(intervals.count)
        let mean = sum / n + settings.acceptablePause.inSeconds
        let variance = max(0, sumOfSquares / n - (sum / n) * (sum / n))
        let std = max(variance.squareRoot(), settings.minStdDeviation.inSeconds)
        let y = (now - last - mean) / std
        // The logistic approximation of the normal CDF (as Akka and Cassandra
        // use) gives P(later) = 1 / (1 + e^k) with k = y (1.5976 + 0.070566 y²),
        // so phi = log10(1 + e^k). Written so neither e^k nor e^-k overflows
        // or underflows to log(0): the direct form returns infinity after a
        // few seconds of silence.
        let k = y * (1.5976 + 0.070566 * y * y)
        return k > 0 ? k / M_LN10 + log10(1 + exp(-k)) : log10(1 + exp(k))
    }

    public func isAvailable(at now: Double) -> Bool { phi(at: now) < settings.threshold }

    private mutating func record(_ interval: Double) {
        if intervals.count < settings.maxSamples {
            intervals.append(interval)
        } else {
            let old = intervals[next]
            sum -= old
            sumOfSquares -= old * old
            intervals[next] = interval
            next = (next + 1) % settings.maxSamples
        }
        sum += interval
        sumOfSquares += interval * interval
    }
}
