import Oscar

@testable import OscarBase
@testable import OscarCBOR
@testable import OscarCluster
@testable import OscarDemo
@testable import OscarDistributed
@testable import OscarMembership
@testable import OscarRemote
@testable import OscarRuntime
@testable import OscarTestKit

/// The tests' seeded generator is the library's SplitMix64, so a randomised
/// test replays exactly from its seed.
typealias SeededRandom = SplitMix64
