import Distributed
import Foundation
import OscarBase
import OscarCBOR
import OscarCluster
import OscarMembership
import OscarRemote
import OscarRuntime
import Synchronization

/// Swift's `distributed actor`, served by an Oscar node: the same node,
/// transport, addressing and ask machinery as the message API.
///
/// ```swift
/// distributed actor Greeter {
///     typealias ActorSystem = ClusterSystem
///     nonisolated var unownedExecutor: UnownedSerialExecutor { actorSystem.executor(for: id) }
///     distributed func greet(_ name: String) -> String { "hello, \(name)" }
/// }
/// let system = ClusterSystem(node: node)
/// let greeter = system.named("greeter") { Greeter(actorSystem: system) }   // at /user/greeter
/// let remote = try Greeter.resolve(id: ActorAddress(uri: "oscar://10.0.0.2:7000/user/greeter")!, using: system)
/// try await remote.greet("Ada")
/// ```
///
/// - An actor's ID is an `ActorAddress`: its node and a path (`/user/<name>`
///   when named, `/distributed/<Type>-<n>` otherwise).
/// - A local actor runs on one of the node's loops (`executor(for:)`).
///   Calls from one caller to one actor start in the order they were sent:
///   each is started on the actor's loop, in arrival order; there is no
///   task per call on a shared pool.
/// - A call to another node is an ask: it fails with the same `AskError`s
///   (`nodeUnreachable` at once when the connection is lost, `timeout`, …).
///   An error the callee throws arrives as itself when its type is in
///   `Settings.decodableErrors` (as a local call would throw it), else as
///   `RemoteCallError`.
/// - Actors are held weakly: when one deinits, its ID is resigned and its
///   path freed. `shutdown()` shuts the node down.
public final class ClusterSystem: DistributedActorSystem, Sendable {
    public typealias ActorID = ActorAddress
    public typealias SerializationRequirement = any Codable
    public typealias InvocationEncoder = ClusterInvocationEncoder
    public typealias InvocationDecoder = ClusterInvocationDecoder
    public typealias ResultHandler = ClusterResultHandler

    public struct Settings: Sendable {
        /// How long a remote call waits for its outcome.
        public var callTimeout = Duration.seconds(5)
        /// Error types a caller decodes from a remote throw (by mangled name)
        /// and throws as themselves, as a local call does: others arrive as
        /// `RemoteCallError` (type name and message), so the network cannot
        /// make this node decode arbitrary types.
        public var decodableErrors: [any (Error & Codable & Sendable).Type] = []
        /// Whether calls to local distributed actors may take the direct
        /// path: the Swift runtime's executor with each function's
        /// signature read once, rather than on every call as the Distributed
        /// library does (about a tenth of a callee's time). It rests on
        /// runtime internals, so it is used only once a start-up check has
        /// run a known function through it correctly, and calls take the
        /// library's path otherwise. Off, those internals are never touched,
        /// and functions cannot be called by name (`oscar ask URI .greet`).
        public var fastCallPath = true
        /// For tests: the start-up check of the direct path fails, as it
        /// would on a runtime whose internals have moved.
        package var failsFastCallCheck = false
        public init() {}
    }

    public let node: ClusterNode
    package let settings: Settings
    /// Whether calls take the direct path; shared with each actor's target.
    package let callPath: CallPath
    /// `decodableErrors` by the name a thrower sends (`String(reflecting:)`).
    private let decodable: [String: any (Error & Codable & Sendable).Type]

    /// The local distributed actors, weakly, by path.
    private let actors = Mutex<[String: Entry]>([:])
    private let counter = Atomic<Int>(0)
    let watchCounter = Atomic<Int>(0)
    let virtual = Mutex(VirtualState())

    struct Entry {
        weak var actor: (any DistributedActor)?
    }

    /// The path the next actor created in `named` gets.
    @TaskLocal static var pendingName: String?

    public init(node: ClusterNode, settings: Settings = Settings()) {
        self.node = node
        self.settings = settings
        var decodable: [String: any (Error & Codable & Sendable).Type] = [:]
        for type in settings.decodableErrors { decodable[String(reflecting: type)] = type }
        self.decodable = decodable
        callPath = CallPath(enabled: settings.fastCallPath)
        node.system.services.register(Slot(self))
        callPath.start(for: self, failing: settings.failsFastCallCheck)
    }

    /// How actors of the message API (a distributed pool's routees) find
    /// the system: weakly, so the node does not keep it alive.
    final class Slot: Sendable {
        private let weakSystem = Mutex<WeakSystem>(WeakSystem())
        struct WeakSystem { weak var system: ClusterSystem? }
        init(_ system: ClusterSystem) { weakSystem.withLock { $0.system = system } }
        package var system: ClusterSystem? { weakSystem.withLock { $0.system } }
    }

    /// Receptionist keys each local actor is checked in under, so that its
    /// check-ins end with it.
    private let checkIns = Mutex<[String: Set<String>]>([:])

    func noteCheckIn(path: String, key: String) { checkIns.withLock { _ = $0[path, default: []].insert(key) } }

    /// Shuts the node down (its connections, actors and loops) and lets go
    /// of the virtual activations hosted here (they refer back to this system).
    public func shutdown() {
        node.shutdown()
        for host in virtual.withLock({ v in
            defer { v.hosts.removeAll() }; return v.hosts
        }) { host.deactivateAll() }
    }

    /// Creates an actor at `/user/<name>` (so other nodes can find it by a
    /// path they know): `system.named("greeter") { Greeter(actorSystem: system) }`.
    public func named<A: DistributedActor>(_ name: String, _ make: () throws -> A) rethrows -> A
    where A.ActorSystem == ClusterSystem {
        try Self.$pendingName.withValue(name.hasPrefix("/") ? name : "/user/\(name)") { try make() }
    }

    /// The executor of the loop that runs the local actor `id`: return it
    /// from the actor's `unownedExecutor`.
    public func executor(for id: ActorID) -> UnownedSerialExecutor {
        loop(for: id.path).executor.asUnownedSerialExecutor()
    }

    /// The loop that runs the actor at `path`, chosen by a hash of the path
    /// (FNV-1a): the runtime asks for an actor's executor on every hop onto
    /// it, and this answer takes no lock and no table.
    package func loop(for path: String) -> EventLoop {
        let loops = node.system.loops.loops
        guard loops.count > 1 else { return loops[0] }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in path.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return loops[Int(hash % UInt64(loops.count))]
    }

    // MARK: - Identity

    public func assignID<Act>(_ actorType: Act.Type) -> ActorID where Act: DistributedActor, Act.ID == ActorID {
        let path = Self.pendingName ?? "/distributed/\(Act.self)-\(counter.wrappingAdd(1, ordering: .relaxed).newValue)"
        guard path != FastCallCheck.probePath else { return ActorAddress(node: node.address, path: path) }
        actors.withLock { $0[path] = Entry(actor: nil) }
        return ActorAddress(node: node.address, path: path)
    }

    public func actorReady<Act>(_ actor: Act) where Act: DistributedActor, Act.ID == ActorID {
        guard actor.id.path != FastCallCheck.probePath else { return }  // not reachable from outside
        actors.withLock { $0[actor.id.path] = Entry(actor: actor) }
        let target = DistributedTarget(system: self, actor: actor, path: actor.id.path, loop: loop(for: actor.id.path))
        do {
            try node.system.claim(target, at: actor.id)
        } catch {
            OscarLog.shared.error("distributed actor \(actor.id) cannot be reached: \(error)")
        }
    }

    public func resignID(_ id: ActorID) {
        guard id.path != FastCallCheck.probePath else { return }
        _ = actors.withLock { $0.removeValue(forKey: id.path) }
        let ref = node.system.ref(for: id)
        (ref.target as? DistributedTarget)?.terminated(id)
        node.system.release(id.path)
        for key in checkIns.withLock({ $0.removeValue(forKey: id.path) ?? [] }) {
            node.receptionist.deregister(ref, from: ReceptionistKey<DistributedCall>(key))
        }
    }

    public func resolve<Act>(id: ActorID, as actorType: Act.Type) throws -> Act?
    where Act: DistributedActor, Act.ID == ActorID {
        guard isLocal(id), Self.virtualTarget(id) == nil else { return nil }  // remote or virtual: a proxy
        guard let actor = actors.withLock({ $0[id.path]?.actor }) else {
            // Something of the message API (a distributed pool): calls go
            // to it as messages, through a proxy.
            if node.system.target(at: id.path) != nil { return nil }
            throw AskError.actorNotFound(id)
        }
        guard let typed = actor as? Act else {
            throw AskError.handlerFailed("\(id) is a \(type(of: actor)), not a \(Act.self)")
        }
        return typed
    }

    /// The distributed actors hosted here (for tests: the table empties as
    /// they deinit).
    public var localActorCount: Int { actors.withLock { $0.values.filter { $0.actor != nil }.count } }

    func isLocal(_ id: ActorID) -> Bool {
        node.address.isNamed(by: id.node)
    }

    // MARK: - Calls

    public func makeInvocationEncoder() -> InvocationEncoder { InvocationEncoder() }

    public func remoteCall<Act, Err, Res>(
        on actor: Act, target: RemoteCallTarget, invocation: inout InvocationEncoder, throwing: Err.Type,
        returning: Res.Type
    ) async throws -> Res where Act: DistributedActor, Act.ID == ActorID, Err: Error, Res: Codable {
        switch try await call(actor.id, invocation.call(to: target.identifier), returning: Res.self) {
        case .value(let value): return value
        case .void:
            throw AskError.decodeFailed("\(target.identifier) returned nothing where \(Res.self) was expected")
        case .error(let type, let message, let value):
            throw remoteError(type, message, value)
        }
    }

    public func remoteCallVoid<Act, Err>(
        on actor: Act, target: RemoteCallTarget, invocation: inout InvocationEncoder, throwing: Err.Type
    ) async throws where Act: DistributedActor, Act.ID == ActorID, Err: Error {
        let outcome = try await call(actor.id, invocation.call(to: target.identifier), returning: Done.self)
        if case .error(let type, let message, let value) = outcome {
            throw remoteError(type, message, value)
        }
    }

    /// Sends `call` to the actor `id` and awaits its outcome, with the
    /// result decoded as `Res`.
    ///
    /// - To another node (the usual case): as a `TypedCall`, whose reply is
    ///   decoded straight into `Res` on arrival.
    /// - Through the message API on this node (a distributed pool) or to a
    ///   virtual actor: as the encoded form those pass on, decoded here.
    private func call<Res: Codable>(
        _ id: ActorID, _ call: DistributedCall, returning: Res.Type
    ) async throws(AskError) -> DistributedOutcome<Res> {
        let encoded: DistributedOutcome<RawCBOR>
        if let (kind, key) = Self.virtualTarget(id) {
            encoded = try await virtualCall(kind: kind, key: key, call)
        } else {
            let ref = self.ref(for: id)
            if ref.target?.isRemote == true {
                return try await ref.ask(TypedCall<Res>(call), timeout: settings.callTimeout)
            }
            encoded = try await ref.ask(call, timeout: settings.callTimeout)
        }
        switch encoded {
        case .value(let raw):
            do {
                return .value(try node.system.decoder.decode(Res.self, from: raw.bytes))
            } catch {
                throw .decodeFailed("the result of \(call.target) as \(Res.self): \(error)")
            }
        case .void: return .void
        case .error(let type, let message, let value): return .error(type: type, message: message, value: value)
        }
    }

    /// Refs to the actors on other nodes that this system called lately,
    /// so that a call resolves no address. A ref to another node stays
    /// valid (its node's association lives as long as the transport); the
    /// cache is emptied when it reaches `remoteRefLimit`.
    /// The last of them is checked first: a proxy passes the same ID each
    /// call, which compares equal at once, where the table hashes it.
    private let remoteRefs = Mutex<(last: ActorRef?, all: [ActorID: ActorRef])>((nil, [:]))
    private static let remoteRefLimit = 1024

    private func ref(for id: ActorID) -> ActorRef {
        let known = remoteRefs.withLock { refs -> ActorRef? in
            if let last = refs.last, last.address == id { return last }
            guard let found = refs.all[id] else { return nil }
            refs.last = found
            return found
        }
        if let known { return known }
        let ref = node.system.ref(for: id)
        if ref.target?.isRemote == true {
            remoteRefs.withLock { refs in
                if refs.all.count >= Self.remoteRefLimit { refs.all.removeAll() }
                refs.all[id] = ref
                refs.last = ref
            }
        }
        return ref
    }

    /// What a remote throw becomes for the caller: the callee's own error
    /// value when its type is in `decodableErrors`, so a local and a remote
    /// call throw the same type; else a `RemoteCallError` with the type's
    /// name and the error's description.
    private func remoteError(_ type: String, _ message: String, _ raw: RawCBOR?) -> any Error {
        if let raw, let decodable = decodable[type],
            let value = try? node.system.decoder.decode(decodable, from: raw.bytes)
        {
            return value
        }
        return RemoteCallError(typeName: type, message: message)
    }
}
