import Distributed
import Foundation
import OscarBase
import OscarCBOR
import OscarCluster
import OscarMembership
import OscarRemote
import OscarRuntime
import Synchronization

/// A call to a virtual actor, sent to the node its identity is placed on.
struct VirtualCall: Message {
    package typealias Reply = DistributedOutcome<RawCBOR>
    package static var manifest: String { "oscar.distributed.virtual" }
    package var kind: String
    package var key: String
    package var call: DistributedCall
    /// Set when a node passed the call on because the key is placed
    /// elsewhere in its view: the next node takes it, whatever its view, so
    /// two nodes that disagree cannot pass a call back and forth.
    var forwarded: Bool?
}

extension ClusterSystem {
    /// Lets this node host virtual actors of type `A`, registered under
    /// `kind` (the same on every node). `make` activates one for a key.
    /// An activation unused for `idleTimeout` is deactivated.
    public func registerVirtual<A: DistributedActor>(
        _ type: A.Type, kind: String, idleTimeout: Duration = .seconds(60),
        _ make: @escaping @Sendable (ClusterSystem, String) -> A
    ) throws where A.ActorSystem == ClusterSystem {
        let host = VirtualHost(system: self, kind: kind, idleTimeout: idleTimeout) { system, key in
            system.named("\(VirtualHost.activationsPath)/\(kind)/\(key)") { make(system, key) }
        }
        try node.system.claim(host, at: ActorAddress(node: node.address, path: "\(VirtualHost.path)/\(kind)"))
        virtual.withLock { v in
            v.kinds[ObjectIdentifier(A.self)] = kind
            v.hosts.append(host)
        }
        startFollowingMembership()
        host.scheduleSweep()
    }

    /// The virtual actor of type `A` with identity `key`: a proxy. Each call
    /// goes to the node that `key` is placed on (consistent hashing over the
    /// up and reachable members), which activates the actor at its first
    /// call. While membership is stable there is at most one activation per
    /// identity; when the placement moves, the old one is deactivated.
    public func virtualActor<A: DistributedActor>(_ type: A.Type, id key: String) throws -> A
    where A.ActorSystem == ClusterSystem {
        guard let kind = virtual.withLock({ $0.kinds[ObjectIdentifier(A.self)] }) else {
            throw AskError.handlerFailed("\(A.self) is not registered as a virtual actor on this node")
        }
        return try A.resolve(
            id: ActorAddress(node: node.address, path: "\(VirtualHost.path)/\(kind)/\(key)"), using: self)
    }

    /// The node `key` of `kind` is placed on now, as this node sees it.
    public func placement(kind: String, key: String) -> NodeAddress {
        virtual.withLock { $0.ring.member(for: Array("\(kind)/\(key)".utf8)) } ?? node.address
    }

    /// Activations hosted here, by kind (tests and diagnostics).
    public func activations(kind: String) -> [String] {
        virtual.withLock { $0.hosts.first { $0.kind == kind } }?.keys ?? []
    }

    /// A virtual actor's ID is `/virtual/<kind>/<key>` on the caller's node.
    static func virtualTarget(_ id: ActorID) -> (kind: String, key: String)? {
        // Every remote call asks: answer the usual "no" without splitting.
        guard id.path.utf8.starts(with: VirtualHost.path.utf8) else { return nil }
        let parts = id.path.split(separator: "/", maxSplits: 2)
        guard parts.count == 3, "/" + parts[0] == VirtualHost.path else { return nil }
        return (String(parts[1]), String(parts[2]))
    }

    /// Sends a call to a virtual actor to the node its key is placed on.
    func virtualCall(
        kind: String, key: String, _ call: DistributedCall
    ) async throws(AskError) -> DistributedOutcome<RawCBOR> {
        let host = ActorAddress(node: placement(kind: kind, key: key), path: "\(VirtualHost.path)/\(kind)")
        return try await node.system.ref(for: host).ask(
            VirtualCall(kind: kind, key: key, call: call), timeout: settings.callTimeout)
    }

    /// Follows membership: the ring is rebuilt from the up and reachable
    /// members of this node's view after every change, in order, as the
    /// membership shell publishes them. (Refreshing from snapshots in tasks
    /// let an older snapshot land last and leave a stale ring; following
    /// events missed reachability changes that come without a new version.)
    private func startFollowingMembership() {
        let first = virtual.withLock { v in
            defer { v.following = true }
            return !v.following
        }
        guard first else { return }
        node.listenPlaceable { [weak self] members in self?.place(on: members) }
    }

    /// Rebuilds the ring and lets the hosts drop what moved.
    private func place(on members: [Member]) {
        let ring = HashRing(members.map { (member: $0.node, name: $0.node.description) })
        let hosts = virtual.withLock { v -> [VirtualHost] in
            v.ring = ring
            return v.hosts
        }
        for host in hosts { host.dropMisplaced() }
    }
}

/// What a `ClusterSystem` knows of virtual actors.
struct VirtualState: Sendable {
    var kinds: [ObjectIdentifier: String] = [:]
    package var hosts: [VirtualHost] = []
    var ring = HashRing<NodeAddress>([])
    var following = false
}

/// Hosts the activations of one kind of virtual actor on this node, at
/// `/virtual/<kind>`: activates on the first call for a key, holds the
/// activation (the system's table is weak), and deactivates it when idle
/// or when its key is placed elsewhere.
final class VirtualHost: MessageTarget, @unchecked Sendable {
    package static let path = "/virtual"
    static let activationsPath = "/virtual-activations"

    package let kind: String
    private weak var system: ClusterSystem?
    private let idleTimeout: Duration
    private let activate: @Sendable (ClusterSystem, String) -> any DistributedActor
    private let live = Mutex<[String: (actor: any DistributedActor, lastUsed: UInt64)]>([:])

    init(
        system: ClusterSystem, kind: String, idleTimeout: Duration,
        activate: @escaping @Sendable (ClusterSystem, String) -> any DistributedActor
    ) {
        self.system = system
        self.kind = kind
        self.idleTimeout = idleTimeout
        self.activate = activate
    }

    package var keys: [String] { live.withLock { Array($0.keys).sorted() } }

    func deliver<M: Message>(_ message: M, reply: (any ReplyTarget)?) {
        guard let call = message as? VirtualCall else {
            return refuseMessage(
                reply, manifest: M.manifest, to: address, .unhandled(manifest: M.manifest, address), in: nil)
        }
        route(call, reply: reply)
    }

    func deliverEncoded(manifest: RawSpan, payload: RawSpan, reply: (any ReplyTarget)?) {
        let name = manifest.utf8Text
        guard name == VirtualCall.manifest, let system,
            let call = try? system.node.system.decoder.decode(VirtualCall.self, from: payload)
        else {
            return refuseMessage(reply, manifest: name, to: address, .decodeFailed("not a virtual call"), in: nil)
        }
        route(call, reply: reply)
    }

    private var address: ActorAddress {
        ActorAddress(node: system?.node.address ?? NodeAddress(host: "?", port: 0), path: "\(Self.path)/\(kind)")
    }

    /// Hands the call to the key's activation, activating it first if needed.
    /// A call for a key this node's view places elsewhere (the caller's view
    /// is behind or ahead) is passed on once to that node: activating here
    /// would leave a second activation that no membership event removes.
    private func route(_ call: VirtualCall, reply: (any ReplyTarget)?) {
        guard let system else {
            return refuseMessage(reply, manifest: VirtualCall.manifest, to: address, .stopped(address), in: nil)
        }
        let placed = system.placement(kind: kind, key: call.key)
        if call.forwarded != true, placed.description != system.node.address.description {
            var passed = call
            passed.forwarded = true
            let there = ActorAddress(node: placed, path: "\(Self.path)/\(kind)")
            if let target = system.node.system.ref(for: there).target {
                return target.deliver(passed, reply: reply)
            }
        }
        let now = MonotonicTime.now()
        live.withLock { live in
            if live[call.key] != nil {
                live[call.key]!.lastUsed = now
            } else {
                live[call.key] = (activate(system, call.key), now)
            }
        }
        let activation = ActorAddress(node: system.node.address, path: "\(Self.activationsPath)/\(kind)/\(call.key)")
        system.node.system.ref(for: activation).target?.deliver(call.call, reply: reply)
        if placed.description != system.node.address.description { recheckPlacement(system) }
    }

    /// A forwarded call activated a key this node's view places elsewhere:
    /// two views disagreed for a moment. Look again a second later, when
    /// they agree, so the activation does not outlive the disagreement (no
    /// membership event may come to remove it).
    private func recheckPlacement(_ system: ClusterSystem) {
        let loop = system.node.system.loops.next()
        _ = loop.execute { [weak self, weak loop] in
            _ = loop?.scheduleTimer(after: .seconds(1)) { [weak self] in self?.dropMisplaced() }
        }
    }

    /// Lets go of every activation (the system is shutting down).
    func deactivateAll() { live.withLock { $0.removeAll() } }

    /// Deactivates the activations whose key is now placed on another node.
    func dropMisplaced() {
        guard let system else { return }
        let me = system.node.address.description
        let dropped = live.withLock { live -> [any DistributedActor] in
            let moved = live.keys.filter { system.placement(kind: kind, key: $0).description != me }
            return moved.compactMap { live.removeValue(forKey: $0)?.actor }
        }
        if !dropped.isEmpty {
            OscarLog.shared.info("virtual \(kind): \(dropped.count) activations moved to other nodes")
        }
    }

    /// Every half idle timeout, deactivates what was idle for a whole one.
    /// The timer lives in the loop, so it holds the loop and this host only
    /// weakly: no cycle outlives a shutdown.
    func scheduleSweep() {
        guard let system else { return }
        let loop = system.node.system.loops.next()
        _ = loop.execute { [weak self, weak loop] in
            guard let loop else { return }
            self?.armSweep(on: loop)
        }
    }

    /// On `loop`'s thread.
    private func armSweep(on loop: EventLoop) {
        loop.scheduleTimer(after: idleTimeout / 2) { [weak self, weak loop] in
            guard let self, let loop else { return }
            self.sweep()
            self.armSweep(on: loop)
        }
    }

    private func sweep() {
        let cutoff = MonotonicTime.now() &- UInt64(idleTimeout.nanoseconds)
        live.withLock { live in
            for (key, entry) in live where entry.lastUsed < cutoff { live[key] = nil }
        }
        dropMisplaced()
    }
}
