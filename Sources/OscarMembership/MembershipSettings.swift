import Foundation

/// How a node's membership detects failures, gossips and resolves a
/// partition (`ClusterNode.Settings.membership`). Times are in seconds.
public struct MembershipSettings: Sendable, Hashable {
    /// How a partition is resolved. Default `.keepMajority`.
    public enum Downing: Sendable, Hashable {
        /// After `stableAfter`, a side holding a majority of the members
        /// that were up, agreed on by every member of that side, downs
        /// the others; any other node downs itself. A tie goes to the
        /// side holding the lowest address. (`KeepMajority` has the rule.)
        case keepMajority
        /// Members are downed only by an operator (`.down`).
        case manual
    }

    public var failureDetector = FailureDetectorSettings()
    /// Unreachable this long (without change) before downing acts.
    /// Default 5 s.
    public var stableAfter: Double = 5
    /// How much longer than `stableAfter` the unreachable set may keep
    /// changing, or this side stay unconverged, before the node decides
    /// anyway: a consistent majority downs the members unreachable for
    /// at least `stableAfter`; any other node downs itself. Default 4 s.
    public var decideWhenUnstableAfter: Double = 4
    /// How long a downed member stays in the membership before the
    /// leader removes it (and a singleton may move). It covers the time
    /// the downed side may still take to down itself: at most
    /// `decideWhenUnstableAfter` plus the detectors' skew. Default 8 s.
    public var removalMargin: Double = 8
    /// Whether a downed member whose address refuses connections, where
    /// this node had reached it, is removed at once instead of after
    /// `removalMargin`: nothing listens there, so its process is gone and
    /// needs no time to down itself. Default true. Turn it off where a
    /// firewall *rejects* a partition's traffic (a TCP reset, an ICMP port
    /// unreachable) rather than dropping it: that makes a member that still
    /// runs look gone.
    public var removesRefusingMembers = true
    /// A node that finds it did not tick for this long (it was frozen:
    /// SIGSTOP, a stalled machine) downs itself on its next tick; nil,
    /// the default, means `removalMargin`. Longer than that is unsafe:
    /// the others may have removed it before it could down itself.
    public var frozenLimit: Double?
    public var downing = Downing.keepMajority
    /// Members gossiped to per tick. Default 1.
    public var gossipFanout = 1
    /// Heartbeat requests a watcher sends again, at once, to a member that
    /// has gone quiet, before it may judge it unreachable (see
    /// `MembershipCore.retryPhi`), once in each silence. Default 8; 0 turns
    /// retries off. They cost nothing until a member has been silent for
    /// about 1.3 s. With 2 a tick, 10 % message loss raised enough false
    /// suspicions in a simulated 1,000-node cluster to keep its unreachable
    /// set changing past the unstable limit, and every node downed itself;
    /// with 8 once it rides out 20 % (docs/SIMULATION.md).
    public var heartbeatRetries = 8
    /// How long the first seed waits, after the last other seed asked
    /// it to join (so is in no cluster either), before it forms a new
    /// cluster; it forms one only once every seed has. The wait lets a
    /// cluster that lives on without its seeds invite them, or, cut off
    /// as a minority, down itself (`stableAfter` +
    /// `decideWhenUnstableAfter` + detection) before a second cluster
    /// can start. Default 12 s.
    public var firstSeedTimeout: Double = 12

    public init() {}

    /// These settings with the downing windows widened for a cluster that
    /// may grow to `members` (with the default 500 ms tick): each doubling
    /// beyond 1,000 members adds 3 s to `decideWhenUnstableAfter` and to
    /// `firstSeedTimeout`, and 3.5 s to `removalMargin`, each rounded up to
    /// whole seconds; up to 1,000 members they stay as they are.
    ///
    /// Why: a node whose view has not converged `stableAfter +
    /// decideWhenUnstableAfter` into an episode downs itself (rule 3 of
    /// docs/DOWNING.md). Convergence after a kill needs the leader's *down*
    /// to reach every node and their acknowledgements to come back, which
    /// takes longer the larger the cluster; past the window, nodes that
    /// have not heard down themselves and the loss cascades. The removal
    /// margin must cover the window plus the spread between two nodes'
    /// detections (which also grows with the cluster), and the first seed's
    /// wait must cover a cut-off minority's downing, so both grow at least
    /// as much: the safety argument holds unchanged. Akka likewise asks for
    /// a longer stable-after as a cluster grows. Every node must use the
    /// same size.
    public func scaled(toClusterSize members: Int) -> MembershipSettings {
        guard members > 1_000 else { return self }
        let doublings = log2(Double(members) / 1_000)
        let window = (3 * doublings).rounded(.up)
        var scaled = self
        scaled.decideWhenUnstableAfter += window
        scaled.firstSeedTimeout += window
        scaled.removalMargin += (3.5 * doublings).rounded(.up)
        return scaled
    }
}
