@testable import Oscar

/// The tests' seeded generator is the library's SplitMix64, so a randomised
/// test replays exactly from its seed.
typealias SeededRandom = SplitMix64
