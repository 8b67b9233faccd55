import Distributed
import Synchronization

/// Where calls to one local distributed actor arrive, in the node's
/// registry at the actor's path (so the transport and `ActorRef` reach it
/// like any actor). Each call starts on the actor's loop in arrival order.
/// Holds the actor only weakly, through the system's table.
final class DistributedTarget: Watchable, @unchecked Sendable {
    private weak var system: ClusterSystem?
    let path: String
    let loop: EventLoop
    /// Told `Terminated` when the actor deinitializes; nil once it has.
    private let watchers = Mutex<[ActorRef]?>([])

    func addWatcher(_ watcher: ActorRef) {
        let ended = watchers.withLock { w -> Bool in
            guard w != nil else { return true }
            if !w!.contains(watcher) { w!.append(watcher) }
            return false
        }
        if ended { watcher.tell(Terminated(actor: ActorRef(address: address, target: self))) }
    }

    func removeWatcher(_ watcher: ActorRef) { watchers.withLock { $0?.removeAll { $0 == watcher } } }

    /// The actor deinitialized: every watcher learns it, once.
    func terminated(_ id: ActorAddress) {
        let told = watchers.withLock { w in
            defer { w = nil }
            return w ?? []
        }
        for watcher in told { watcher.tell(Terminated(actor: ActorRef(address: id, target: self))) }
    }

    init(system: ClusterSystem, path: String, loop: EventLoop) {
        self.system = system
        self.path = path
        self.loop = loop
    }

    func deliver<M: Message>(_ message: M, reply: (any ReplyTarget)?) {
        guard let call = message as? DistributedCall ?? (message as? any CarriesDistributedCall)?.call else {
            return refuse(reply, M.manifest, .unhandled(manifest: M.manifest, address))
        }
        start(call, reply: reply)
    }

    func deliverEncoded(manifest: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer, reply: (any ReplyTarget)?) {
        let name = String(decoding: manifest, as: UTF8.self)
        guard name == DistributedCall.manifest else { return refuse(reply, name, .unhandled(manifest: name, address)) }
        guard let system else { return refuse(reply, name, .stopped(address)) }
        do {
            start(try system.node.system.decoder.decode(DistributedCall.self, from: payload), reply: reply)
        } catch {
            refuse(reply, name, .decodeFailed("a distributed call to \(address): \(error)"))
        }
    }

    private var address: ActorAddress {
        ActorAddress(node: system?.node.address ?? NodeAddress(host: "?", port: 0), path: path)
    }

    private func refuse(_ reply: (any ReplyTarget)?, _ manifest: String, _ error: AskError) {
        refuseMessage(reply, manifest: manifest, to: address, error, in: system?.node.system)
    }

    /// Starts the call on the actor's loop. Tasks that prefer one loop start
    /// in the order they were created, so calls start in arrival order.
    private func start(_ call: DistributedCall, reply: (any ReplyTarget)?) {
        guard let system, let actor = system.actor(at: path) else {
            return refuse(reply, DistributedCall.manifest, .actorNotFound(address))
        }
        var call = call
        if !call.target.hasPrefix("$s") {
            // Named by function (`oscar ask URI .greet ...`): find its symbol.
            do {
                call.target = try CallableFunctions.identifier(of: call.target, on: type(of: actor))
            } catch {
                return refuse(reply, DistributedCall.manifest, error)
            }
        }
        var decoder: ClusterInvocationDecoder
        do {
            decoder = try ClusterInvocationDecoder(call: call, decoder: system.node.system.decoder)
        } catch {
            return refuse(reply, DistributedCall.manifest, .decodeFailed("a distributed call to \(address): \(error)"))
        }
        let loop = self.loop
        let work = UncheckedSendable((actor, reply, system, decoder))
        Task(executorPreference: loop.taskExecutor) {
            var (actor, reply, system, decoder) = work.value
            reply?.arm(on: loop)
            do {
                try await TargetExecution.execute(
                    call.target, on: actor, system: system, decoder: &decoder,
                    handler: ClusterResultHandler(reply: reply))
            } catch {
                reply?.fail(.handlerFailed("\(call.target) on \(actor.id): \(error)"))
            }
        }
    }
}
