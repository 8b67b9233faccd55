/// The phi accrual failure detector's settings
/// (`MembershipSettings.failureDetector`): when a member that stopped
/// answering heartbeats counts as unreachable.
public struct FailureDetectorSettings: Sendable, Hashable {
    /// Phi at and above which the node is considered unreachable. Default 8.
    public var threshold: Double = 8
    /// Intervals remembered. Default 200.
    public var maxSamples: Int = 200
    /// Floor for the standard deviation, so very regular heartbeats do
    /// not make the detector hair-triggered. Default 100 ms.
    public var minStdDeviation: Duration = .milliseconds(100)
    /// Extra lateness tolerated on top of the usual interval (a busy
    /// loop, a loaded machine). Default 800 ms, which with 500 ms
    /// heartbeats detects a dead node in about 2 s.
    public var acceptablePause: Duration = .milliseconds(800)
    /// The interval assumed before any has been measured. Default 500 ms.
    public var firstHeartbeatEstimate: Duration = .milliseconds(500)

    public init() {}
}
