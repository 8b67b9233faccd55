import Synchronization

/// Faults injected into this node's outbound traffic, at run time, for
/// tests and chaos runs without root: frames to chosen peers are dropped
/// (a blackhole), and any frame is dropped with a probability. A dropped
/// frame is lost as on a real network: a tell vanishes, an ask waits for
/// its timeout. Setting it on both nodes of a pair cuts both directions.
///
/// The draws come from a seeded generator, so a run with the same traffic
/// drops the same frames.
public final class FaultGate: Sendable {
    private struct Rules {
        var blackholed: Set<String> = []
        var loss = 0.0
        var random = SplitMix64(seed: 1)
        var dropped = 0
    }
    private let rules = Mutex(Rules())
    /// False while no fault is set: the send path then pays one relaxed
    /// load per frame, no lock and no allocation.
    private let active = Atomic<Bool>(false)

    init() {}

    /// Drops every frame to `peer` (its host and port) until `restore`.
    public func blackhole(_ peer: NodeAddress) { update { $0.blackholed.insert(Self.key(peer)) } }

    public func restore(_ peer: NodeAddress) { update { $0.blackholed.remove(Self.key(peer)) } }

    /// Drops each outbound frame with probability `fraction` (0 to 1).
    public func setLoss(_ fraction: Double, seed: UInt64 = 1) {
        update {
            $0.loss = min(max(fraction, 0), 1)
            $0.random = SplitMix64(seed: seed)
        }
    }

    /// Removes every fault.
    public func heal() {
        update {
            $0.blackholed.removeAll()
            $0.loss = 0
        }
    }

    private func update(_ change: (inout Rules) -> Void) {
        rules.withLock { r in
            change(&r)
            active.store(!r.blackholed.isEmpty || r.loss > 0, ordering: .relaxed)
        }
    }

    /// Frames dropped so far.
    public var dropped: Int { rules.withLock { $0.dropped } }

    /// Decides the fate of one frame to `peer`.
    func drops(to peer: NodeAddress) -> Bool {
        guard active.load(ordering: .relaxed) else { return false }
        return rules.withLock { r in
            let drop = r.blackholed.contains(Self.key(peer)) || (r.loss > 0 && r.random.unit() < r.loss)
            if drop { r.dropped += 1 }
            return drop
        }
    }

    private static func key(_ node: NodeAddress) -> String { "\(node.host):\(node.port)" }
}
