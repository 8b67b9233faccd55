import OscarBase
import OscarCBOR
import Synchronization

/// A node's actors and the loops they run on.
///
/// ```swift
/// let system = ActorSystem(settings: .init(name: "demo")) { actors in
///     actors.nodeSingleton("session") { SessionActor() }
///     actors.instance("auth", AuthActor(keys: keys))
///     actors.pool("api", size: 3) { APIActor() }
/// }
/// let reply = try await system.actor("session")!.ask(Login(user: "ada"))
/// system.shutdown()
/// ```
public final class ActorSystem: Sendable {
    public struct Settings: Sendable {
        /// A label for logs.
        public var name: String
        /// How many event loops (threads) run actors. Default: one per core.
        public var loopCount: Int
        /// Messages that may wait in one actor's mailbox before further ones
        /// are refused. Default 262,144.
        public var mailboxCapacity: Int
        /// This node's identity; a process that does not listen keeps port 0.
        public var node: NodeAddress
        /// After work, how long a loop polls before blocking: trades a core's
        /// idle time for latency. Default zero.
        public var spinBeforeBlock: Duration
        /// CPUs the loops are kept on: loop `i` on `loopCPUs[i % count]`.
        /// Empty (the default): the kernel places them. For several nodes
        /// on one machine, whose loops the kernel may put on one core
        /// while another idles (see docs/CONFIGURATION.md, `loop-cpus`).
        public var loopCPUs: [Int] = []

        /// One loop per online core.
        public static var defaultLoopCount: Int { EventLoopGroup.defaultLoopCount }

        public init(
            name: String = "oscar", loopCount: Int = Settings.defaultLoopCount,
            mailboxCapacity: Int = 262_144, node: NodeAddress = .local(), spinBeforeBlock: Duration = .zero
        ) {
            self.name = name
            self.loopCount = loopCount
            self.mailboxCapacity = mailboxCapacity
            self.node = node
            self.spinBeforeBlock = spinBeforeBlock
        }
    }

    public enum SpawnError: Error, Hashable, CustomStringConvertible {
        case nameTaken(String)
        case invalidName(String)
        case shutDown

        public var description: String {
            switch self {
            case .nameTaken(let path): "an actor named \(path) already exists"
            case .invalidName(let name): "'\(name)' is not a valid actor name (use letters, digits, - _ .)"
            case .shutDown: "the actor system is shut down"
            }
        }
    }

    public let settings: Settings
    public let services: ServiceLocator
    package let loops: EventLoopGroup
    public var node: NodeAddress { settings.node }

    private struct Registry {
        var refs: [String: ActorRef] = [:]
        var pools: [String: ActorPool] = [:]
        /// What layers above declared here (cluster pools, singletons), in
        /// declaration order; stopped with the system.
        var parts: [any SystemPart] = []
        var shutDown = false
    }

    private let registry = Mutex(Registry())
    /// Watches of actors on other nodes, by "host:port": (watched, watcher).
    private let remoteWatches = Mutex<[String: [(watched: ActorRef, watcher: ActorRef)]]>([:])
    /// The network side, when this system is a cluster node. A protocol the
    /// transport implements, so this layer never names the layer above it.
    private let transportSlot = Mutex<(any RemoteNetwork)?>(nil)
    /// Decodes messages from other nodes; refs inside them resolve here.
    package let decoder: CBORDecoder
    private let deadLetterCount = Atomic<Int>(0)
    /// Bumped whenever a name is added or removed (see `RegistryGeneration`).
    package let registryGeneration = RegistryGeneration()

    public init(
        settings: Settings = Settings(), services: ServiceLocator = ServiceLocator(),
        _ build: (inout ActorSystemBuilder) -> Void = { _ in }
    ) {
        self.settings = settings
        self.services = services
        self.loops = EventLoopGroup(
            loopCount: settings.loopCount, spinBeforeBlock: settings.spinBeforeBlock, cpus: settings.loopCPUs)
        let reference = SystemReference()
        var decoder = CBORDecoder()
        decoder.userInfo[.oscarActorSystem] = reference
        self.decoder = decoder
        reference.set(self)
        var builder = ActorSystemBuilder()
        build(&builder)
        for provider in builder.providers {
            do {
                switch provider {
                case .singleton(let name, let supervision, let make):
                    _ = try register(name, loop: loops.next(), supervision: supervision, make: make)
                case .instance(let name, let box):
                    let cell = try register(name, loop: loops.next(), make: { box.value })
                    cell.loop.execute { cell.startIfNeeded() }
                case .pool(let name, let size, let supervision, let make):
                    _ = try addPool(name, size: size, supervision: supervision, make: make)
                case .part(let add):
                    try add(self)
                }
            } catch {
                preconditionFailure("invalid actor declaration: \(error)")
            }
        }
    }

    deinit {
        if EventLoop.current == nil {
            shutdown()
        } else {
            OscarLog.shared.error(
                "ActorSystem \(settings.name) released on a loop thread without shutdown(); its loops leak")
        }
    }

    // MARK: - Looking up and creating actors

    /// The actor (or pool) at `path`: `"echo"` means `/user/echo`.
    public func actor(_ path: String) -> ActorRef? {
        let full = Self.fullPath(path)
        return registry.withLock { $0.refs[full] }
    }

    /// Creates an actor now and starts it on a loop: round-robin, or the loop
    /// of `colocatedWith`, so that the two talk without a thread hop.
    /// `supervision` says what it does when a reaction throws (see
    /// `SupervisionStrategy`).
    @discardableResult
    public func spawn<A: Reactor>(
        _ name: String, colocatedWith neighbour: ActorRef? = nil, supervision: SupervisionStrategy = .default,
        _ make: @escaping @Sendable () -> A
    ) throws(SpawnError) -> ActorRef {
        let loop = (neighbour?.target as? ActorCell)?.loop ?? loops.next()
        let cell = try register(name, loop: loop, supervision: supervision, make: { ReactorBox(make()) })
        cell.loop.execute { cell.startIfNeeded() }
        return cell.ref
    }

    /// Creates an actor at a full path on a given loop (system actors).
    package func spawn<A: Reactor>(
        path: String, on loop: EventLoop, _ make: @escaping @Sendable () -> A
    ) throws(SpawnError)
        -> ActorRef
    {
        let cell = try register(path, loop: loop, make: { ReactorBox(make()) })
        cell.loop.execute { cell.startIfNeeded() }
        return cell.ref
    }

    /// Stops an actor, or every actor of a pool, after its current message.
    public func stop(_ ref: ActorRef) {
        switch ref.target {
        case let cell as ActorCell: cell.stop()
        case let pool as ActorPool:
            pool.stopAll()
            _ = registry.withLock { $0.refs.removeValue(forKey: pool.address.path) }
            registryGeneration.bump()
        default: break
        }
    }

    /// A ref for an address: the local actor, or (on a cluster node) a
    /// remote ref. A ref to nothing has no target: a tell to it is a dead
    /// letter, an ask fails with `actorNotFound`.
    public func ref(for address: ActorAddress) -> ActorRef {
        resolve(address) ?? ActorRef(address: address, target: nil)
    }

    /// Parses `oscar://host:port/path` and returns `ref(for:)`, or nil if the
    /// text is not such a URI.
    public func ref(_ uri: String) -> ActorRef? {
        ActorAddress(uri: uri).map(ref(for:))
    }

    /// Refs decoded from messages resolve through this.
    package func resolve(_ address: ActorAddress) -> ActorRef? {
        if node.hasEndpoint(of: address.node) {
            guard node.isNamed(by: address.node) else { return nil }  // an earlier incarnation
            return registry.withLock { $0.refs[address.path] }
        }
        return transportSlot.withLock { $0 }?.remoteRef(address)
    }

    /// The local actor or pool at a full path, for messages from the network.
    package func target(at path: String) -> (any MessageTarget)? {
        registry.withLock { $0.refs[path]?.target }
    }

    package func attach(_ network: any RemoteNetwork) { transportSlot.withLock { $0 = network } }

    // MARK: - Remote death watch

    /// Remembers that `watcher` watches `watched`, an actor on another node,
    /// and (for its first watcher here) asks that node's death-watch actor
    /// to tell this node when it stops. Its node's removal ends it too.
    func watchRemote(_ watched: ActorRef, by watcher: ActorRef) {
        let key = "\(watched.address.node.host):\(watched.address.node.port)"
        let first = remoteWatches.withLock { w -> Bool in
            let entries = w[key] ?? []
            if entries.contains(where: { $0.watched == watched && $0.watcher == watcher }) { return false }
            w[key, default: []].append((watched, watcher))
            return !entries.contains { $0.watched.address.path == watched.address.path }
        }
        if first {
            let theirs = ActorAddress(node: watched.address.node, path: DeathWatch.path)
            ref(for: theirs).tell(
                DeathWatch.Watch(
                    path: watched.address.path, notify: ref(for: ActorAddress(node: node, path: DeathWatch.path))))
        }
    }

    /// An actor on another node stopped (its node's death-watch actor said
    /// so): each watcher here gets `Terminated`, once.
    func remoteActorStopped(_ stopped: ActorAddress) {
        let key = stopped.node.description
        let told = remoteWatches.withLock { w -> [(watched: ActorRef, watcher: ActorRef)] in
            let matching = (w[key] ?? []).filter {
                $0.watched.address.path == stopped.path
                    && ($0.watched.address.node.uid == 0 || $0.watched.address.node.uid == stopped.node.uid)
            }
            w[key]?.removeAll { entry in
                matching.contains { $0.watched == entry.watched && $0.watcher == entry.watcher }
            }
            return matching
        }
        for (watched, watcher) in told { watcher.tell(Terminated(actor: watched)) }
    }

    func unwatchRemote(_ watched: ActorRef, by watcher: ActorRef) {
        let key = "\(watched.address.node.host):\(watched.address.node.port)"
        remoteWatches.withLock { w in w[key]?.removeAll { $0.watched == watched && $0.watcher == watcher } }
    }

    /// The node left the cluster (removed or downed): every actor on it is
    /// gone, so every watcher of one of them gets `Terminated`.
    package func nodeRemoved(_ node: NodeAddress) {
        let key = "\(node.host):\(node.port)"
        let watches = remoteWatches.withLock { w in w.removeValue(forKey: key) ?? [] }
        for (watched, watcher) in watches where watched.address.node.uid == 0 || watched.address.node.uid == node.uid {
            watcher.tell(Terminated(actor: watched))
        }
    }

    package static func fullPath(_ name: String) -> String {
        name.hasPrefix("/") ? name : "/user/" + name
    }

    package static func isValid(_ name: String) -> Bool {
        !name.isEmpty
            && name.unicodeScalars.allSatisfy { c in
                (c.properties.isAlphabetic && c.isASCII) || ("0"..."9").contains(c) || "-_./".unicodeScalars.contains(c)
            }
    }

    package func register(
        _ name: String, loop: EventLoop, supervision: SupervisionStrategy = .default,
        make: @escaping @Sendable () -> AnyReactorBox
    ) throws(SpawnError) -> ActorCell {
        guard Self.isValid(name) else { throw .invalidName(name) }
        let path = Self.fullPath(name)
        let cell = ActorCell(
            address: ActorAddress(node: node, path: path), loop: loop, capacity: settings.mailboxCapacity,
            system: self, supervision: supervision, factory: make)
        try claim([cell.ref])
        return cell
    }

    /// Registers a target of another kind (a distributed actor) under its
    /// address's path.
    package func claim(_ target: any MessageTarget, at address: ActorAddress) throws(SpawnError) {
        try claim([ActorRef(address: address, target: target)])
    }

    /// Frees a path claimed with `claim(_:at:)`.
    package func release(_ path: String) {
        guard registry.withLock({ $0.refs.removeValue(forKey: path) }) != nil else { return }
        registryGeneration.bump()
    }

    /// Names `refs` in the registry, all or none (a name taken, or the
    /// system shut down, fails), lets `record` note their owner, and tells
    /// name caches to look again. The one place names are claimed.
    private func claim(_ refs: [ActorRef], record: (inout Registry) -> Void = { _ in }) throws(SpawnError) {
        try registry.withLock { r throws(SpawnError) in
            guard !r.shutDown else { throw .shutDown }
            if let taken = refs.first(where: { r.refs[$0.address.path] != nil }) {
                throw .nameTaken(taken.address.path)
            }
            for ref in refs { r.refs[ref.address.path] = ref }
            record(&r)
        }
        registryGeneration.bump()
    }

    private func addPool(
        _ name: String, size: Int, supervision: SupervisionStrategy, make: @escaping @Sendable () -> AnyReactorBox
    ) throws(SpawnError) -> ActorPool {
        guard Self.isValid(name) else { throw .invalidName(name) }
        let path = Self.fullPath(name)
        let (node, capacity, loops) = (node, settings.mailboxCapacity, loops)
        let pool = ActorPool(address: ActorAddress(node: node, path: path), size: size) { [weak self] index in
            // A routee name is free: the pool's own path is registered first,
            // and a stopped routee frees its name before the pool replaces it.
            // When the system is going away (or shut down), the routee is an
            // unregistered cell; shutdown stops it with the pool.
            (try? self?.register("\(path)/\(index)", loop: loops.next(), supervision: supervision, make: make))
                ?? ActorCell(
                    address: ActorAddress(node: node, path: "\(path)/\(index)"), loop: loops.next(),
                    capacity: capacity, system: nil, supervision: supervision, factory: make)
        }
        try claim([ActorRef(address: pool.address, target: pool)]) { $0.pools[path] = pool }
        return pool
    }

    /// Claims `refs` for a part a layer above declares (a cluster pool's
    /// router, a singleton's proxy and host), and keeps the part so that
    /// shutdown stops it. The runtime knows parts only through `SystemPart`.
    package func addPart(_ part: any SystemPart, claiming refs: [ActorRef]) throws(SpawnError) {
        try claim(refs) { $0.parts.append(part) }
    }

    /// The parts of type `T` declared here, in declaration order.
    package func parts<T>(_ type: T.Type) -> [T] {
        registry.withLock { $0.parts.compactMap { $0 as? T } }
    }

    func unregister(_ cell: ActorCell) {
        registry.withLock { r in
            if let ref = r.refs[cell.address.path], ref.target === cell {
                r.refs.removeValue(forKey: cell.address.path)
            }
        }
        registryGeneration.bump()
    }

    // MARK: - Dead letters

    /// Messages that could not be delivered: to a stopped actor, a full
    /// mailbox, or an actor without a reaction for them.
    public var deadLetters: Int { deadLetterCount.load(ordering: .relaxed) }

    func deadLetter(_ manifest: String, to address: ActorAddress, reason: AskError) {
        let n = deadLetterCount.wrappingAdd(1, ordering: .relaxed).newValue
        // The first few, then one in ten thousand: a flood must not flood the log.
        if n <= 10 || n % 10_000 == 0 {
            OscarLog.shared.info("dead letter #\(n): \(manifest) to \(address): \(reason)")
        }
    }

    // MARK: - Shutdown

    /// Stops every actor (waiting asks fail with `stopped`), then every loop,
    /// freeing every handle and thread. Idempotent; must not be called from a
    /// loop thread.
    public func shutdown() {
        if let transport = transportSlot.withLock({ t -> (any RemoteNetwork)? in
            defer { t = nil }; return t
        }) {
            transport.shutdown()
        }
        let (refs, pools, parts) = registry.withLock { r -> ([ActorRef], [ActorPool], [any SystemPart]) in
            if r.shutDown { return ([], [], []) }
            r.shutDown = true
            defer {
                r.refs.removeAll()
                r.pools.removeAll()
                r.parts.removeAll()
            }
            return (Array(r.refs.values), Array(r.pools.values), r.parts)
        }
        for pool in pools { pool.stopAll() }
        for part in parts { part.stop() }
        for ref in refs { (ref.target as? ActorCell)?.stop() }
        loops.shutdown()
    }
}

/// A weak reference to a system, for the decoder's `userInfo`: a strong one
/// would make the system own itself.
final class SystemReference: Sendable {
    private let weakSystem = Mutex<WeakBox>(WeakBox())

    struct WeakBox {
        weak var system: ActorSystem?
    }

    package func set(_ system: ActorSystem) { weakSystem.withLock { $0.system = system } }
    package var system: ActorSystem? { weakSystem.withLock { $0.system } }
}

/// What an actor system needs from the network side: refs to actors on other
/// nodes, and a shutdown that closes every connection first.
package protocol RemoteNetwork: AnyObject, Sendable {
    func remoteRef(_ address: ActorAddress) -> ActorRef
    func shutdown()
}
