extension Duration {
    /// The duration in seconds, as a floating-point number.
    public var seconds: Double {
        let (s, atto) = components
        return Double(s) + Double(atto) / 1e18
    }

    /// The duration in whole nanoseconds; negative durations count as zero
    /// (every caller uses it for a delay or a period).
    public var nanoseconds: Int64 {
        let (s, atto) = components
        return max(0, s) &* 1_000_000_000 &+ max(0, atto) / 1_000_000_000
    }
}
