import OscarBase
import OscarCBOR
import OscarCluster
import OscarDistributed
import OscarMembership
import OscarRemote
import OscarRuntime
import Synchronization

/// Faults injected into this node's traffic at run time, for tests and
/// chaos runs without root: blackholes to and from chosen peers, loss,
/// delay with jitter, and a bandwidth limit (`FaultCommand`). A dropped
/// frame is lost as on a real network: a tell vanishes, an ask waits for
/// its timeout. Delayed frames keep their order.
///
/// Installed with `ClusterNode.Settings.injectFaults(with:)`, never by
/// default. Controlled in process (`ClusterNode.faults`), by the `/system/faults`
/// actor (over the authenticated transport), or by `POST /faults` on the
/// management endpoint, signed with the cluster secret.
///
/// Loss and jitter draw from a seeded generator, so a run with the same
/// traffic drops the same frames.
public final class FaultGate: FrameFilter, Sendable {
    private let rules = Mutex(FaultRules())
    /// False while no fault is set: the send path then pays one relaxed
    /// load per frame, no lock and no allocation.
    private let active = Atomic<Bool>(false)

    public init() {}

    /// Applies `command` and returns what is in force afterwards.
    @discardableResult
    public func apply(_ command: FaultCommand) -> FaultStatus {
        rules.withLock { r in
            r.apply(command)
            active.store(r.isActive, ordering: .relaxed)
            return r.status
        }
    }

    /// Drops every frame to and from `peer` (its host and port) until `restore`.
    public func blackhole(_ peer: NodeAddress, direction: FaultDirection = .both) {
        apply(.blackhole(peers: [Self.key(peer)], direction: direction))
    }

    public func restore(_ peer: NodeAddress) { apply(.restore(peers: [Self.key(peer)])) }

    /// Drops each outbound frame with probability `fraction` (0 to 1).
    public func setLoss(_ fraction: Double, seed: UInt64 = 1) {
        apply(.loss(fraction: fraction, peers: nil, seed: seed))
    }

    /// Removes every fault.
    public func heal() { apply(.heal) }

    /// Frames dropped so far, both directions.
    public var dropped: Int { rules.withLock { $0.droppedOutbound + $0.droppedInbound } }

    /// The fate of one outbound frame of `bytes` to `peer`.
    package func outboundFate(to peer: NodeAddress, bytes: Int) -> FrameFate {
        guard active.load(ordering: .relaxed) else { return .pass }
        return rules.withLock { $0.outboundFate(to: Self.key(peer), bytes: bytes, now: MonotonicTime.now()) }
    }

    /// True if a frame from `peer` must be dropped on arrival.
    package func dropsInbound(from peer: NodeAddress) -> Bool {
        guard active.load(ordering: .relaxed) else { return false }
        return rules.withLock { $0.dropsInbound(from: Self.key(peer)) }
    }

    package static func key(_ node: NodeAddress) -> String { "\(node.host):\(node.port)" }
}
