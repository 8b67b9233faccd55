import CoreEngine
import OscarBase
import OscarCBOR
import OscarMembership
import OscarRemote
import OscarRuntime
import Synchronization

/// How a cluster pool is laid out and routes. Every node that declares the
/// pool (`ActorSystemBuilder.clusterPool`) with the same name takes part.
public struct ClusterPoolSettings: Sendable {
    public enum Routing: Sendable {
        /// Oscar's rule, cluster-wide: the first free routee (this node's
        /// first), else the least busy one. Routees are created on their node
        /// at their first message, so a routee comes to life only when all
        /// before it were busy: "create one while below the limit".
        case leastBusy
        case roundRobin
        case random
        /// The same key always reaches the same routee while membership is
        /// stable; a node joining moves about 1/N of keys. `key` returns nil
        /// for a message it cannot key (it is routed `leastBusy`). Messages
        /// that arrive encoded (from another node's router or the CLI) are
        /// keyed by their encoded bytes.
        case consistentHash(key: @Sendable (any Message) -> String?)
        /// Every routee gets the message; an ask is answered by one of them
        /// (the first, this node's first) and told to the others.
        case broadcast
    }

    /// Routees each hosting node runs. Default 2.
    public var perNode: Int
    /// At most this many routees in the whole pool (nil: no bound); the
    /// first routee of every node comes before the second of any.
    public var max: Int?
    /// Only members with this role host routees (nil: every member).
    public var role: String?
    public var routing: Routing

    public init(perNode: Int = 2, max: Int? = nil, role: String? = nil, routing: Routing = .leastBusy) {
        precondition(perNode > 0, "a pool needs at least one routee per node")
        self.perNode = perNode
        self.max = max
        self.role = role
        self.routing = routing
    }
}

/// A message that may be delivered twice without harm. A cluster pool
/// retries it once on another routee when its routee's node is lost, instead
/// of failing the ask with `nodeUnreachable`.
public protocol IdempotentMessage: Message {}

/// The router behind a cluster pool's ref (`/user/<name>` on every node). It
/// routes each message, typed or encoded, to one routee (`/user/<name>/<i>`
/// on some member), passing the asker's reply target along, so the routee
/// answers the asker directly.
///
/// Routees follow membership: members that are up and reachable (and have
/// the role) host routees; an unreachable, leaving or removed member's
/// routees leave the routing at once, and asks in flight to them fail with
/// `nodeUnreachable` (or are retried, when idempotent).
package final class ClusterPoolRouter: MessageTarget, SystemPart, @unchecked Sendable {
    /// Nothing to stop: its routees are registered actors, which the system
    /// stops with the rest.
    package func stop() {}

    package let address: ActorAddress
    package let settings: ClusterPoolSettings
    /// Weak, and checked at each use: the system owns this router, and a
    /// system that deinitialises without `shutdown()` may still route a
    /// message from a loop while it goes.
    private weak let system: ActorSystem?
    /// This node (the system's, kept so routing never needs the system).
    private let node: NodeAddress

    private struct Routee {
        var address: ActorAddress
        var ref: ActorRef
        var local: Bool

        /// A local routee that stopped (its supervision said so).
        var stopped: Bool { (ref.target as? ActorCell)?.isTerminated ?? false }
    }

    private struct State {
        /// Members that may host routees, by uid.
        var hosts: [UInt64: Member] = [:]
        var routees: [Routee] = []
        /// The consistent-hash ring over `routees`, built when a message is
        /// first routed by it after they changed (nil until then): building
        /// hashes every routee at a hundred places, and membership changes
        /// many times while a cluster forms (on every node, for every
        /// member), where most pools never route by hash at all.
        var ring: HashRing<Int>?
        /// Asks in flight per routee, and the trackers per node.
        var inFlight: [ActorAddress: Int] = [:]
        var trackers: [ObjectIdentifier: TrackedReply] = [:]
        var next: UInt = 0
        var random = SplitMix64(seed: 0x05ca_0001)
    }

    private let state = Mutex(State())

    init(address: ActorAddress, settings: ClusterPoolSettings, system: ActorSystem) {
        self.address = address
        self.settings = settings
        self.system = system
        self.node = system.node
        // Before membership says otherwise (or without a cluster), this node
        // hosts routees, unless the pool wants a role it cannot know yet.
        if settings.role == nil {
            let me = Member(node: system.node, status: .up)
            state.withLock { s in
                s.hosts[me.uid] = me
                rebuild(&s)
            }
        }
    }

    // MARK: - Membership

    /// Follows a cluster event (called by the node's membership, in order).
    package func apply(_ event: ClusterEvent) {
        let lost: [TrackedReply] = state.withLock { s in
            switch event {
            case .memberUp(let m), .reachable(let m):
                guard m.status == .up, settings.role.map({ m.roles.contains($0) }) ?? true else { return [] }
                s.hosts[m.uid] = m
                rebuild(&s)
                return []
            case .unreachable(let m), .memberLeft(let m), .memberExited(let m), .memberDowned(let m),
                .memberRemoved(let m):
                guard m.uid != node.uid || event.isRemoval, s.hosts.removeValue(forKey: m.uid) != nil else {
                    return []
                }
                rebuild(&s)
                return s.trackers.values.filter { $0.routee.node.uid == m.uid }
            case .memberJoined, .leaderChanged:
                return []
            }
        }
        for tracker in lost { tracker.routeeLost(tracker.routee.node) }
    }

    /// The routees now, for tests and diagnostics.
    package var routees: [ActorAddress] { state.withLock { $0.routees.map(\.address) } }

    /// Asks this router has in flight, by routee (tests and diagnostics).
    var asksInFlight: [ActorAddress: Int] { state.withLock { $0.inFlight } }

    private func rebuild(_ s: inout State) {
        let hosts = s.hosts.values.sorted(by: Gossip.addressOrder)
        var out: [Routee] = []
        let limit = settings.max ?? Int.max
        // The first routee of every node, then the second of every node...
        for i in 0..<settings.perNode {
            for host in hosts where out.count < limit {
                let local = host.uid == node.uid
                let address = ActorAddress(node: local ? node : host.node, path: "\(self.address.path)/\(i)")
                let ref = system?.ref(for: address) ?? ActorRef(address: address, target: nil)
                out.append(Routee(address: address, ref: ref, local: local))
            }
        }
        // Local first: ties go to this node.
        s.routees = out.filter(\.local) + out.filter { !$0.local }
        s.ring = nil
    }

    /// The ring over `routees`, hashed by "host:port/path": the same names on
    /// every node.
    private static func ring(of routees: [Routee]) -> HashRing<Int> {
        HashRing(routees.enumerated().map { ($0.offset, "\($0.element.address.node)\($0.element.address.path)") })
    }

    // MARK: - Routing

    /// Sends a message again, avoiding the failed routee's node.
    typealias Retry = @Sendable (_ failed: ActorAddress, _ reply: PinnedReply) -> Void

    package func deliver<M: Message>(_ message: M, reply: (any ReplyTarget)?) {
        if case .broadcast = settings.routing {
            broadcast(reply) { target, r in target.deliver(message, reply: r) }
            return
        }
        let key: [UInt8]? = {
            guard case .consistentHash(let keyOf) = settings.routing else { return nil }
            return keyOf(message).map { Array($0.utf8) }
        }()
        var retry: Retry?
        if M.self is any IdempotentMessage.Type {
            retry = { [weak self] (failed: ActorAddress, reply: PinnedReply) in
                self?.send(excluding: failed, key: key, reply: reply, retry: nil) {
                    $0.deliver(message, reply: $1)
                }
            }
        }
        send(excluding: nil, key: key, reply: reply, retry: retry) { $0.deliver(message, reply: $1) }
    }

    package func deliverEncoded(manifest: RawSpan, payload: RawSpan, reply: (any ReplyTarget)?) {
        if case .broadcast = settings.routing {
            broadcast(reply) { $0.deliverEncoded(manifest: manifest, payload: payload, reply: $1) }
            return
        }
        let key: [UInt8]? = {
            if case .consistentHash = settings.routing { return payload.copiedBytes }
            return nil
        }()
        send(excluding: nil, key: key, reply: reply, retry: nil) {
            $0.deliverEncoded(manifest: manifest, payload: payload, reply: $1)
        }
    }

    /// Picks a routee (not on `excluding`'s node) and delivers through
    /// `deliver`, tracking an ask.
    private func send(
        excluding: ActorAddress?, key: [UInt8]?, reply: (any ReplyTarget)?, retry: Retry?,
        _ deliver: (any MessageTarget, (any ReplyTarget)?) -> Void
    ) {
        let picked: Routee? = state.withLock { s in
            // A local routee its supervision stopped takes no more messages.
            let live = s.routees.filter { !$0.stopped }
            let candidates = excluding.map { x in live.filter { $0.address.node.uid != x.node.uid } } ?? live
            return pick(&s, from: candidates, key: key, excluding: excluding)
        }
        guard let routee = picked, let target = routee.ref.target else {
            refuseMessage(
                reply, manifest: "message", to: address,
                .nodeUnreachable(excluding?.node ?? node, "the pool \(address.path) has no routee"),
                in: system)
            return
        }
        guard let reply else {
            deliver(target, nil)
            return
        }
        let tracker = TrackedReply(routee: routee.address, reply: .pinning(reply), pool: self, retry: retry)
        state.withLock { s in
            s.inFlight[routee.address, default: 0] += 1
            s.trackers[ObjectIdentifier(tracker)] = tracker
        }
        deliver(target, tracker)
    }

    private func pick(_ s: inout State, from routees: [Routee], key: [UInt8]?, excluding: ActorAddress?) -> Routee? {
        guard !routees.isEmpty else { return nil }
        switch settings.routing {
        case .roundRobin:
            s.next &+= 1
            return routees[Int(s.next % UInt(routees.count))]
        case .random:
            return routees[Int(s.random.next() % UInt64(routees.count))]
        case .consistentHash where excluding == nil && key != nil && routees.count == s.routees.count:
            // The ring indexes `s.routees`; with a routee left out it would
            // point past the candidates, so that case routes `leastBusy`.
            let ring = s.ring ?? Self.ring(of: s.routees)
            s.ring = ring
            guard let key, let i = ring.member(for: key), s.routees.indices.contains(i) else { return routees.first }
            return s.routees[i]
        case .leastBusy, .consistentHash, .broadcast:
            // A local routee's mailbox says how busy it is, whoever sent to
            // it; of a remote one this router knows its own asks in flight.
            let inFlight = s.inFlight
            let busy = { (r: Routee) -> Int in
                (r.ref.target as? ActorCell)?.load ?? inFlight[r.address] ?? 0
            }
            if let free = routees.first(where: { busy($0) == 0 }) { return free }
            return routees.min { busy($0) < busy($1) }
        }
    }

    /// Every routee gets the message. An ask is asked of the first routee
    /// (this node's first, by the pool's order) and told to the others, so
    /// it has exactly one outcome.
    private func broadcast(_ reply: (any ReplyTarget)?, _ deliver: (any MessageTarget, (any ReplyTarget)?) -> Void) {
        let all = state.withLock { $0.routees }.filter { !$0.stopped }
        guard let first = all.first else {
            refuseMessage(
                reply, manifest: "message", to: address,
                .nodeUnreachable(node, "the pool \(address.path) has no routee"), in: system)
            return
        }
        for routee in all.dropFirst() { if let target = routee.ref.target { deliver(target, nil) } }
        if let target = first.ref.target { deliver(target, reply) }
    }

    /// An ask routed by this pool completed (called once per tracker).
    func finished(_ tracker: TrackedReply) {
        state.withLock { s in
            s.trackers.removeValue(forKey: ObjectIdentifier(tracker))
            if let n = s.inFlight[tracker.routee] { s.inFlight[tracker.routee] = n > 1 ? n - 1 : nil }
        }
    }
}

extension ClusterEvent {
    fileprivate var isRemoval: Bool {
        switch self {
        case .memberRemoved, .memberDowned, .memberExited, .memberLeft: true
        default: false
        }
    }
}
