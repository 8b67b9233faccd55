import Oscar
import Testing

/// `MembershipSettings.scaled(toClusterSize:)`: the downing windows widen
/// with the cluster, and never in a way that breaks the safety argument of
/// docs/DOWNING.md (the removal margin covers the unstable window plus the
/// detection spread, and the first seed's wait a cut-off minority's
/// downing, so both must grow at least as much as the window).
@Suite(.timeLimit(.minutes(1))) struct MembershipScalingTests {
    @Test func upToAThousandMembersTheSettingsStayAsGiven() {
        var custom = MembershipSettings()
        custom.stableAfter = 2
        custom.decideWhenUnstableAfter = 1.5
        custom.removalMargin = 3
        for n in [1, 3, 64, 500, 999, 1_000] {
            #expect(MembershipSettings().scaled(toClusterSize: n) == MembershipSettings())
            #expect(custom.scaled(toClusterSize: n) == custom)
        }
    }

    /// Over random pairs of sizes: larger never means narrower, the margin
    /// grows at least as much as the window, and only those two change.
    @Test func theMarginGrowsAtLeastAsMuchAsTheWindowAtEverySize() {
        var rng = SeededRandom(seed: 0x5CA1_ED)
        let base = MembershipSettings()
        for _ in 0..<2_000 {
            let a = 1 + Int(rng.next() % 200_000)
            let b = 1 + Int(rng.next() % 200_000)
            let (small, large) = (base.scaled(toClusterSize: min(a, b)), base.scaled(toClusterSize: max(a, b)))
            #expect(large.decideWhenUnstableAfter >= small.decideWhenUnstableAfter)
            #expect(large.removalMargin >= small.removalMargin)
            let windowGrowth = large.decideWhenUnstableAfter - base.decideWhenUnstableAfter
            let marginGrowth = large.removalMargin - base.removalMargin
            #expect(marginGrowth >= windowGrowth, "sizes \(a), \(b)")
            #expect(large.firstSeedTimeout - base.firstSeedTimeout == windowGrowth, "the first seed waits as long more")
            var rest = large
            rest.decideWhenUnstableAfter = base.decideWhenUnstableAfter
            rest.removalMargin = base.removalMargin
            rest.firstSeedTimeout = base.firstSeedTimeout
            #expect(rest == base, "only the three windows change")
        }
    }

    /// The sizes the simulator ran (docs/SIMULATION.md): 3,000 nodes with the
    /// defaults cascaded; these are the windows that rode it out.
    @Test func theSizesOnTheSimulatorGetTheWindowsItWasRunWith() {
        let base = MembershipSettings()
        #expect(base.scaled(toClusterSize: 3_000).decideWhenUnstableAfter == base.decideWhenUnstableAfter + 5)
        #expect(base.scaled(toClusterSize: 3_000).removalMargin == base.removalMargin + 6)
        #expect(base.scaled(toClusterSize: 5_000).decideWhenUnstableAfter == base.decideWhenUnstableAfter + 7)
        #expect(base.scaled(toClusterSize: 5_000).removalMargin == base.removalMargin + 9)
    }
}
