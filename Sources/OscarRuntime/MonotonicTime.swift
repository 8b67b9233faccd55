import CLibUV

/// The machine's monotonic clock in nanoseconds (`CLOCK_MONOTONIC`, which
/// the loops' timers use too). One clock for every process on the host, so
/// a chaos run's histories from several node processes line up.
package enum MonotonicTime {
    public static func now() -> UInt64 { uv_hrtime() }
}
