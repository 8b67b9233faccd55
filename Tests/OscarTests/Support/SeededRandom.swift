import Oscar
@testable import OscarBase
@testable import OscarCBOR
@testable import OscarMembership
@testable import OscarRuntime
@testable import OscarRemote
@testable import OscarCluster
@testable import OscarDistributed
@testable import OscarTestKit
@testable import OscarDemo

/// The tests' seeded generator is the library's SplitMix64, so a randomised
/// test replays exactly from its seed.
typealias SeededRandom = SplitMix64
