import CoreEngine
import OscarBase
import OscarCBOR
import OscarMembership
import OscarRemote
import OscarRuntime
import Synchronization

/// Oscar's singleton provider, cluster-wide: at most one instance in the
/// cluster, on the oldest up member, moved when that member leaves or is
/// removed.
///
/// Every node that declares it (`ActorSystemBuilder.clusterSingleton`) has:
/// - a proxy at `/user/<name>`, which sends each message to the instance
///   path on the member it believes oldest, and holds messages (bounded)
///   while it knows of none;
/// - a host at `/user/<name>/instance`, active on the oldest member only.
///   An inactive host holds messages (bounded) until it becomes active, or
///   passes them to the successor when it handed over.
///
/// "Never twice": `SingletonPlacement` decides from this node's whole view
/// after every change, and a member starts the instance only once every
/// older member is gone.
package final class ClusterSingleton: SystemPart, @unchecked Sendable {
    package let name: String
    /// Weak, and checked at each use: the system owns the singleton, and a
    /// system that deinitialises without `shutdown()` may still deliver to
    /// it from a loop while it goes.
    private weak let system: ActorSystem?
    /// This node (the system's, kept so that addresses never need the system).
    private let node: NodeAddress
    private let supervision: SupervisionStrategy
    private let make: @Sendable () -> AnyReactorBox
    /// Messages held while no instance can take them. Default 1,000.
    static let bufferLimit = 1_000

    private struct State {
        /// This node's view after the last change: current members, every status.
        var view: [Member] = []
        var active: ActorCell?
        var held: [Held] = []
        var proxyHeld: [Held] = []
        var clusterAware = false
        /// The system is shutting down: no instance starts again here. A
        /// view published while the node stops (its connections closing)
        /// could otherwise start a fresh instance beside the one stopping.
        var retired = false
    }

    /// A message held for later: replayed through `deliver`.
    struct Held {
        var replay: @Sendable (any MessageTarget) -> Void
        package var refuse: @Sendable (AskError) -> Void
        /// Starts an ask's timeout while the message waits here.
        package var arm: @Sendable (EventLoop) -> Void
    }

    private let state = Mutex(State())
    /// Told when this node's instance starts (true) or is told to stop
    /// (false): a chaos run records both, to check "never twice".
    private let observers = Mutex<[@Sendable (String, Bool) -> Void]>([])

    package func observe(_ body: @escaping @Sendable (_ name: String, _ started: Bool) -> Void) {
        observers.withLock { $0.append(body) }
    }

    private func tellObservers(started: Bool) {
        for observer in observers.withLock({ $0 }) { observer(name, started) }
    }
    package private(set) lazy var host = Entry(singleton: self, address: hostAddress, role: .host)
    private(set) lazy var proxy = Entry(singleton: self, address: proxyAddress, role: .proxy)

    var hostAddress: ActorAddress { ActorAddress(node: node, path: "/user/\(name)/instance") }
    var proxyAddress: ActorAddress { ActorAddress(node: node, path: "/user/\(name)") }

    init(
        name: String, system: ActorSystem, supervision: SupervisionStrategy = .default,
        make: @escaping @Sendable () -> AnyReactorBox
    ) {
        self.name = name
        self.system = system
        self.node = system.node
        self.supervision = supervision
        self.make = make
    }

    /// A cluster node says so before membership starts: from then on only
    /// membership decides where the instance runs. Outside a cluster the
    /// local system is the whole world, and the instance starts at the
    /// first message.
    func joinCluster() { state.withLock { $0.clusterAware = true } }

    /// Whether this node runs the instance now.
    package var isHosting: Bool { state.withLock { $0.active != nil } }

    // MARK: - Membership

    /// Follows this node's view: stops the instance once this node is no
    /// longer up (leaving, downed, removed) or, against the rule, finds an
    /// older member present; starts it once the rule allows.
    package func apply(view: [Member]) {
        let me = node.uid
        let (mayHost, mustStop) = state.withLock { s in
            s.clusterAware = true
            s.view = view
            let mayHost = SingletonPlacement.mayHost(me, in: view)
            return (mayHost, s.active != nil && !mayHost)
        }
        if mustStop {
            if view.contains(where: { $0.uid == me && $0.status == .up }) {
                OscarLog.shared.error("cluster singleton \(name): an older member is in the view; this instance stops")
            }
            deactivate()
        } else if mayHost {
            activateIfOldest()
        }
        flushProxy()
    }

    private func activateIfOldest() {
        guard let system else { return }
        let (cell, held): (ActorCell?, [Held]) = state.withLock { s in
            guard s.active == nil, !s.retired else { return (nil, []) }
            let me = node.uid
            if s.clusterAware, !SingletonPlacement.mayHost(me, in: s.view) { return (nil, []) }
            let cell = ActorCell(
                address: hostAddress, loop: system.loops.next(), capacity: system.settings.mailboxCapacity,
                system: system, supervision: supervision, factory: make)
            s.active = cell
            defer { s.held.removeAll() }
            return (cell, s.held)
        }
        guard let cell else { return }
        OscarLog.shared.info("cluster singleton \(name) starts on this node")
        tellObservers(started: true)
        cell.loop.execute { cell.startIfNeeded() }
        for h in held { h.replay(cell) }
    }

    private func deactivate() {
        guard
            let cell = state.withLock({ s -> ActorCell? in
                defer { s.active = nil }; return s.active
            })
        else { return }
        OscarLog.shared.info("cluster singleton \(name) stops on this node: handing over")
        cell.stop()
        tellObservers(started: false)
    }

    /// Where the proxy sends now: the oldest up member's host, if known.
    private func currentHost() -> ActorAddress? {
        state.withLock { s in
            guard s.clusterAware else { return hostAddress }
            return SingletonPlacement.host(in: s.view).map { m in
                ActorAddress(node: m.uid == node.uid ? node : m.node, path: "/user/\(name)/instance")
            }
        }
    }

    private func flushProxy() {
        guard let system, let host = currentHost(), let target = system.ref(for: host).target else { return }
        let held = state.withLock { s in
            defer { s.proxyHeld.removeAll() }
            return s.proxyHeld
        }
        for h in held { h.replay(target) }
    }

    // MARK: - Delivery

    /// Holds a message in `buffer`, or refuses it when the buffer is full.
    private func hold(_ h: Held, inProxy: Bool) {
        guard let system else { return h.refuse(.stopped(inProxy ? proxyAddress : hostAddress)) }
        // A timeout is armed on a loop's own thread; the sender may be on
        // another loop or on none (a task on the global executor).
        let loop = system.loops.next()
        if loop.inEventLoop {
            h.arm(loop)
        } else {
            _ = loop.execute { h.arm(loop) }
        }
        let full = state.withLock { s -> Bool in
            if inProxy {
                guard s.proxyHeld.count < Self.bufferLimit else { return true }
                s.proxyHeld.append(h)
            } else {
                guard s.held.count < Self.bufferLimit else { return true }
                s.held.append(h)
            }
            return false
        }
        if full { h.refuse(.mailboxFull(inProxy ? proxyAddress : hostAddress)) }
    }

    fileprivate func proxyDeliver(_ h: Held) {
        if !state.withLock({ $0.clusterAware }) { activateIfOldest() }
        guard let host = currentHost(), let target = system?.ref(for: host).target else {
            hold(h, inProxy: true)
            return
        }
        h.replay(target)
    }

    fileprivate func hostDeliver(_ h: Held) {
        if let cell = state.withLock({ $0.active }) {
            h.replay(cell)
            return
        }
        // Handed over (or not yet started): pass it to the member now
        // oldest when that is another one, else hold it.
        if let host = currentHost(), host.node.uid != node.uid, let target = system?.ref(for: host).target {
            h.replay(target)
            return
        }
        hold(h, inProxy: false)
    }

    /// The proxy's and the host's message targets (`role` says which): they
    /// wrap each message so it can wait and be delivered later.
    package final class Entry: MessageTarget, @unchecked Sendable {
        package enum Role { case proxy, host }
        /// Weak: the system owns the singleton, which owns this target.
        package weak var singleton: ClusterSingleton?
        package let address: ActorAddress
        let role: Role

        package init(singleton: ClusterSingleton, address: ActorAddress, role: Role) {
            self.singleton = singleton
            self.address = address
            self.role = role
        }

        package func deliver<M: Message>(_ message: M, reply: (any ReplyTarget)?) {
            guard let singleton else { return reply?.fail(.stopped(address)) ?? () }
            route(Held.typed(message, reply, address: address, system: singleton.system), in: singleton)
        }

        package func deliverEncoded(manifest: RawSpan, payload: RawSpan, reply: (any ReplyTarget)?) {
            guard let singleton else { return reply?.fail(.stopped(address)) ?? () }
            route(
                Held.encoded(
                    manifest.copiedBytes, payload.copiedBytes, reply, address: address, system: singleton.system),
                in: singleton)
        }

        private func route(_ held: Held, in singleton: ClusterSingleton) {
            switch role {
            case .proxy: singleton.proxyDeliver(held)
            case .host: singleton.hostDeliver(held)
            }
        }
    }

    package func stop() {
        state.withLock { $0.retired = true }
        deactivate()
    }
}

extension ClusterSingleton.Held {
    package static func typed<M: Message>(
        _ message: M, _ reply: (any ReplyTarget)?, address: ActorAddress, system: ActorSystem?
    ) -> Self {
        let reply = reply.map(PinnedReply.pinning)
        return Self(
            replay: { $0.deliver(message, reply: reply) },
            refuse: { [weak system] error in refuseMessage(reply, manifest: M.manifest, to: address, error, in: system)
            },
            arm: { reply?.arm(on: $0) })
    }

    package static func encoded(
        _ manifest: [UInt8], _ payload: [UInt8], _ reply: (any ReplyTarget)?, address: ActorAddress,
        system: ActorSystem?
    ) -> Self {
        let reply = reply.map(PinnedReply.pinning)
        return Self(
            replay: { target in
                target.deliverEncoded(manifest: manifest.span.bytes, payload: payload.span.bytes, reply: reply)
            },
            refuse: { [weak system] error in
                refuseMessage(
                    reply, manifest: String(decoding: manifest, as: UTF8.self), to: address, error, in: system)
            },
            arm: { reply?.arm(on: $0) })
    }
}
