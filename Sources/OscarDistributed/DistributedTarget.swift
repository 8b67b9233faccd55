import Distributed
import OscarBase
import OscarCBOR
import OscarCluster
import OscarMembership
import OscarRemote
import OscarRuntime
import Synchronization

/// Where calls to one local distributed actor arrive, in the node's
/// registry at the actor's path (so the transport and `ActorRef` reach it
/// like any actor). Each call starts on the actor's loop in arrival order.
/// Holds the actor weakly, as the system's table does, so that a call finds
/// it without the table's lock.
final class DistributedTarget: Watchable, @unchecked Sendable {
    private weak var system: ClusterSystem?
    /// The actor's own references keep it, not this.
    private weak var actor: (any DistributedActor)?
    package let path: String
    package let loop: EventLoop
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

    init(system: ClusterSystem, actor: any DistributedActor, path: String, loop: EventLoop) {
        self.system = system
        self.actor = actor
        self.path = path
        self.loop = loop
        argumentDecoder = system.node.system.decoder.reusingOneDecoding()
        callPath = system.callPath
    }

    /// Whether calls take the direct path (the system's, checked per call:
    /// the start-up check may pass after the first calls).
    private let callPath: CallPath

    /// Decodes the arguments of the calls, on `loop`, with one reused
    /// decoding object.
    private let argumentDecoder: CBORDecoder

    func deliver<M: Message>(_ message: M, reply: (any ReplyTarget)?) {
        guard let call = message as? DistributedCall ?? (message as? any CarriesDistributedCall)?.call else {
            return refuse(reply, M.manifest, .unhandled(manifest: M.manifest, address))
        }
        start(call, reply: reply, last: nil)
    }

    func deliverEncoded(manifest: RawSpan, payload: RawSpan, reply: (any ReplyTarget)?) {
        // Compared as bytes: a manifest this long would be a heap string.
        guard manifest.isUTF8(of: DistributedCall.manifest) else {
            let name = manifest.utf8Text
            return refuse(reply, name, .unhandled(manifest: name, address))
        }
        do {
            let last = lastPlan.withLock { $0 }
            start(try DistributedCall(cbor: payload, knownTarget: last?.target), reply: reply, last: last)
        } catch {
            refuse(reply, DistributedCall.manifest, .decodeFailed("a distributed call to \(address): \(error)"))
        }
    }

    private var address: ActorAddress {
        ActorAddress(node: system?.node.address ?? NodeAddress(host: "?", port: 0), path: path)
    }

    private func refuse(_ reply: (any ReplyTarget)?, _ manifest: String, _ error: AskError) {
        refuseMessage(reply, manifest: manifest, to: address, error, in: system?.node.system)
    }

    /// The function the last call named and how it runs: calls to one
    /// actor mostly name one function, which then costs no lookup.
    private let lastPlan = Mutex<KnownPlan?>(nil)

    /// A plan with the function it is for, and whether it was made for the
    /// direct path (a plan made before the start-up check passed is not
    /// kept once it has).
    private typealias KnownPlan = (target: String, plan: TargetExecution.Plan, direct: Bool)

    /// How to run `target`; `last` is `lastPlan` as the caller already read it.
    private func plan(for target: String, last known: KnownPlan?) -> TargetExecution.Plan {
        let direct = callPath.isDirect
        if let known, known.target == target, known.direct == direct { return known.plan }
        return lastPlan.withLock { last in
            if let last, last.target == target, last.direct == direct { return last.plan }
            let plan = direct ? TargetExecution.plan(for: target) : TargetExecution.libraryPlan(for: target)
            last = (target, plan, direct)
            return plan
        }
    }

    /// `target` as a person reads it, from the table of callable functions
    /// when the direct path is on (the table is part of it).
    private func describe(_ target: String) -> String {
        callPath.enabled ? CallableFunctions.signature(of: target) : target
    }

    /// Starts the call on the actor's loop. Tasks that prefer one loop start
    /// in the order they were created, so calls start in arrival order.
    private func start(
        _ call: DistributedCall, reply: (any ReplyTarget)?, last: KnownPlan?
    ) {
        // A live actor keeps its system: no need to load that weak reference too.
        guard let actor else { return refuse(reply, DistributedCall.manifest, .actorNotFound(address)) }
        var call = call
        if !call.target.hasPrefix("$s") {
            // Named by function (`oscar ask URI .greet ...`): find its symbol.
            guard callPath.enabled else {
                return refuse(
                    reply, DistributedCall.manifest,
                    .handlerFailed("\(call.target): calling by name needs ClusterSystem.Settings.fastCallPath"))
            }
            do {
                call.target = try CallableFunctions.identifier(of: call.target, on: type(of: actor))
            } catch {
                return refuse(reply, DistributedCall.manifest, error)
            }
        }
        let target = call.target
        var decoder: ClusterInvocationDecoder
        do {
            decoder = try ClusterInvocationDecoder(call: call, decoder: argumentDecoder)
            decoder.describesTarget = callPath.enabled
        } catch {
            return refuse(reply, DistributedCall.manifest, .decodeFailed("a distributed call to \(address): \(error)"))
        }
        let plan = plan(for: target, last: last)
        // Checked before the function runs: the runtime reads only as many
        // arguments as there are parameters, and would ignore the rest.
        if let parameters = plan.parameterCount, parameters != decoder.count {
            return refuse(
                reply, DistributedCall.manifest,
                .decodeFailed(
                    "\(describe(target)) takes \(parameters) arguments; the call has \(decoder.count)"
                ))
        }
        let execution = CallExecution(
            target: target, plan: plan, actor: actor, decoder: decoder, reply: reply, loop: loop)
        // The task captures one object: its context is that object, not a box.
        Task(executorPreference: loop.taskExecutor) { await execution.run() }
    }
}

/// One call on its way to its actor: what its task needs, in one object.
private final class CallExecution: @unchecked Sendable {
    let target: String
    let plan: TargetExecution.Plan
    let actor: any DistributedActor
    /// Only this call's task touches it, one access at a time: not checked
    /// for exclusivity at run time (the check showed in profiles of W3).
    @exclusivity(unchecked) var decoder: ClusterInvocationDecoder
    let reply: (any ReplyTarget)?
    let loop: EventLoop

    init(
        target: String, plan: TargetExecution.Plan, actor: any DistributedActor, decoder: ClusterInvocationDecoder,
        reply: (any ReplyTarget)?, loop: EventLoop
    ) {
        self.target = target
        self.plan = plan
        self.actor = actor
        self.decoder = decoder
        self.reply = reply
        self.loop = loop
    }

    func run() async {
        reply?.arm(on: loop)
        do {
            try await TargetExecution.execute(
                target, plan, on: actor, decoder: &decoder, handler: ClusterResultHandler(reply: reply))
        } catch let notStarted as CallNotStarted {
            reply?.fail(notStarted.failure)
        } catch {
            reply?.fail(.handlerFailed("\(target) on \(actor.id): \(error)"))
        }
    }
}
