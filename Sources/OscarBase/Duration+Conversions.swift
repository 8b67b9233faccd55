extension Duration {
    /// The duration in seconds, as a floating-point number.
    package var inSeconds: Double {
        let (s, atto) = components
        return Double(s) + Double(atto) / 1e18
    }

    /// The duration in whole nanoseconds; negative durations count as zero
    /// and durations past about 292 years as `Int64.max` (every caller uses
    /// it for a delay or a period, some of them typed by a user).
    package var nanoseconds: Int64 {
        let (s, atto) = components
        guard s < Int64.max / 1_000_000_000 else { return .max }
        return max(0, s) * 1_000_000_000 + max(0, atto) / 1_000_000_000
    }
}

/// Durations as people write them: `100us`, `500ms`, `2s`, `1m`, or a plain
/// number of seconds. One parser for the CLI and configuration files.
package enum DurationText {
    /// Nil when the text is not a non-negative duration.
    public static func parse(_ text: String) -> Duration? {
        // Longer suffixes first: "500ms" also ends in "s".
        let units: [(String, Double)] = [("us", 1e-6), ("ms", 1e-3), ("s", 1), ("m", 60), ("", 1)]
        for (suffix, scale) in units where text.hasSuffix(suffix) {
            // Past about 292 years a duration no longer fits in nanoseconds:
            // refused like any other text that is not a duration.
            if let v = Double(text.dropLast(suffix.count)), v >= 0, v * scale * 1e9 < 9.2e18 {
                return .nanoseconds(Int64(v * scale * 1e9))
            }
        }
        return nil
    }

    /// The shortest of `250ms`, `5s` that says it exactly.
    public static func format(_ d: Duration) -> String {
        let ms = d.nanoseconds / 1_000_000
        return ms % 1000 == 0 ? "\(ms / 1000)s" : "\(ms)ms"
    }
}

extension String {
    /// A number with one decimal place, as reports print seconds.
    package init(format1 value: Double) { self = String((value * 10).rounded() / 10) }
}
