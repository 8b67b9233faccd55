import OscarBase
import OscarCBOR
import OscarCluster
import OscarDistributed
import OscarMembership
import OscarRemote
import OscarRuntime

/// A change to a node's fault gate, as the management endpoint and the
/// `/system/faults` actor take it. Peers are named `host:port`; a rule
/// without `peers` applies to every peer.
///
/// In JSON (the management endpoint's body), for example:
/// `{"blackhole":{"peers":["127.0.0.1:7002"],"direction":"both"}}`,
/// `{"delay":{"millis":100,"jitterMillis":20}}`, `{"heal":{}}`.
public enum FaultCommand: Message, Equatable {
    public typealias Reply = FaultStatus

    /// Drops frames to (`outbound`), from (`inbound`) or both ways with `peers`.
    case blackhole(peers: [String], direction: FaultDirection)
    /// Lifts the blackholes on `peers`.
    case restore(peers: [String])
    /// Drops each outbound frame with probability `fraction` (0 to 1).
    case loss(fraction: Double, peers: [String]?, seed: UInt64?)
    /// Holds each outbound frame `millis` ± `jitterMillis` (order is kept).
    case delay(millis: Int, jitterMillis: Int, peers: [String]?)
    /// Lets outbound frames leave at no more than `bytesPerSecond`.
    case throttle(bytesPerSecond: Int, peers: [String]?)
    /// Removes every fault.
    case heal
    /// Changes nothing; the reply says what is set.
    case status

    public static var manifest: String { "oscar.faults.command" }
}

public enum FaultDirection: String, Codable, Sendable {
    case outbound, inbound, both
}

/// What a fault gate is doing, in words and counts.
public struct FaultStatus: Codable, Sendable, Equatable {
    /// One line per rule in force, such as "blackhole outbound 127.0.0.1:7002".
    public var rules: [String]
    public var droppedOutbound: Int
    public var droppedInbound: Int
    public var delayed: Int
}

/// The rules of a fault gate, as a pure value: the gate asks it the fate of
/// each frame, handing in the clock, so tests drive it without sockets.
struct FaultRules {
    /// The shaping of traffic to one peer (or, as `everyone`, to all).
    struct Shaping: Equatable {
        package var loss = 0.0
        package var delay: UInt64 = 0
        package var jitter: UInt64 = 0
        var bytesPerSecond = 0
        package var isEmpty: Bool { loss == 0 && delay == 0 && bytesPerSecond == 0 }
    }

    private(set) var blockedOut: Set<String> = []
    private(set) var blockedIn: Set<String> = []
    private var shaping: [String: Shaping] = [:]
    private var everyone = Shaping()
    /// When the last held frame to each peer leaves: later frames leave
    /// after it, so delay and throttling keep each peer's frames in order.
    private var lastRelease: [String: UInt64] = [:]
    private var random = SplitMix64(seed: 1)
    private(set) var droppedOutbound = 0
    private(set) var droppedInbound = 0
    private(set) var delayed = 0

    var isActive: Bool {
        !blockedOut.isEmpty || !blockedIn.isEmpty || !everyone.isEmpty || !shaping.isEmpty
    }

    mutating func apply(_ command: FaultCommand) {
        switch command {
        case .blackhole(let peers, let direction):
            if direction != .inbound { blockedOut.formUnion(peers) }
            if direction != .outbound { blockedIn.formUnion(peers) }
        case .restore(let peers):
            blockedOut.subtract(peers)
            blockedIn.subtract(peers)
        case .loss(let fraction, let peers, let seed):
            if let seed { random = SplitMix64(seed: seed) }
            shape(peers) { $0.loss = min(max(fraction, 0), 1) }
        case .delay(let millis, let jitter, let peers):
            shape(peers) {
                $0.delay = UInt64(max(millis, 0)) * 1_000_000
                $0.jitter = min(UInt64(max(jitter, 0)) * 1_000_000, $0.delay)
            }
        case .throttle(let rate, let peers):
            shape(peers) { $0.bytesPerSecond = max(rate, 0) }
        case .heal:
            blockedOut.removeAll()
            blockedIn.removeAll()
            shaping.removeAll()
            everyone = Shaping()
        case .status:
            break
        }
    }

    private mutating func shape(_ peers: [String]?, _ change: (inout Shaping) -> Void) {
        guard let peers else { return change(&everyone) }
        for peer in peers {
            change(&shaping[peer, default: everyone])
            if shaping[peer]!.isEmpty { shaping[peer] = nil }
        }
    }

    mutating func outboundFate(to peer: String, bytes: Int, now: UInt64) -> FrameFate {
        if blockedOut.contains(peer) {
            droppedOutbound += 1
            return .drop
        }
        let rule = shaping[peer] ?? everyone
        if rule.loss > 0, random.unit() < rule.loss {
            droppedOutbound += 1
            return .drop
        }
        let previous = lastRelease[peer] ?? 0
        guard rule.delay > 0 || rule.bytesPerSecond > 0 || previous > now else { return .pass }
        var release = now + rule.delay
        if rule.jitter > 0 {
            let spread = Double(2 * rule.jitter) * random.unit()
            release = release - rule.jitter + UInt64(spread)
        }
        release = max(release, previous)
        if rule.bytesPerSecond > 0 {
            release = max(release, previous) + UInt64(bytes) * 1_000_000_000 / UInt64(rule.bytesPerSecond)
        }
        lastRelease[peer] = release
        delayed += 1
        return .holdUntil(release)
    }

    mutating func dropsInbound(from peer: String) -> Bool {
        guard blockedIn.contains(peer) else { return false }
        droppedInbound += 1
        return true
    }

    package var status: FaultStatus {
        var rules = blockedOut.sorted().map { "blackhole outbound \($0)" }
        rules += blockedIn.sorted().map { "blackhole inbound \($0)" }
        let shaped = [("every peer", everyone)] + shaping.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        for (who, s) in shaped where !s.isEmpty {
            var parts: [String] = []
            if s.loss > 0 { parts.append("loss \(s.loss)") }
            if s.delay > 0 { parts.append("delay \(s.delay / 1_000_000) ms ± \(s.jitter / 1_000_000) ms") }
            if s.bytesPerSecond > 0 { parts.append("throttle \(s.bytesPerSecond) B/s") }
            rules.append("\(parts.joined(separator: ", ")) to \(who)")
        }
        return FaultStatus(
            rules: rules, droppedOutbound: droppedOutbound, droppedInbound: droppedInbound, delayed: delayed)
    }
}
