import Distributed
import Foundation
import OscarBase
import OscarCBOR
import OscarCluster
import OscarMembership
import OscarRemote
import OscarRuntime
import Synchronization

/// A receptionist key for distributed actors of one type:
/// `DistributedKey<Greeter>("greeters")`.
public struct DistributedKey<A: DistributedActor>: Sendable, Hashable where A.ActorSystem == ClusterSystem {
    public let id: String
    public init(_ id: String) { self.id = id }

    /// The message-API key it is listed under: calls are `DistributedCall` messages.
    var receptionistKey: ReceptionistKey<DistributedCall> { ReceptionistKey("distributed:\(id)") }
}

extension ClusterSystem {
    /// Checks `actor` in with the cluster-wide receptionist under `key`. It
    /// is checked out again when it deinitializes.
    public func checkIn<A: DistributedActor>(_ actor: A, as key: DistributedKey<A>)
    where A.ActorSystem == ClusterSystem {
        node.receptionist.register(node.system.ref(for: actor.id), as: key.receptionistKey)
        noteCheckIn(path: actor.id.path, key: key.receptionistKey.id)
    }

    /// The actors checked in under `key` on any node, as this node knows them.
    public func lookup<A: DistributedActor>(_ key: DistributedKey<A>) -> [A] where A.ActorSystem == ClusterSystem {
        node.receptionist.lookup(key.receptionistKey).compactMap { try? A.resolve(id: $0.address, using: self) }
    }

    /// The listing of `key`: now, then after every change.
    public func listing<A: DistributedActor>(_ key: DistributedKey<A>) -> AsyncStream<[A]>
    where A.ActorSystem == ClusterSystem {
        let refs = node.receptionist.listing(key.receptionistKey)
        return AsyncStream { continuation in
            let task = Task {
                for await listing in refs {
                    continuation.yield(listing.compactMap { try? A.resolve(id: $0.address, using: self) })
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}

extension ActorSystemBuilder {
    /// A cluster pool whose routees are distributed actors: declare it with
    /// the same name on every node, and give each node a `ClusterSystem`.
    /// Calls through the pool's ID (`/user/<name>`, resolved on any node)
    /// are routed like messages; `make` creates a routee on the node that
    /// hosts it, at its first call.
    public mutating func distributedPool<A: DistributedActor>(
        _ name: String, _ settings: ClusterPoolSettings = ClusterPoolSettings(),
        _ make: @escaping @Sendable (ClusterSystem) -> A
    ) where A.ActorSystem == ClusterSystem {
        clusterPool(name, settings) { DistributedRoutee(make: make) }
    }
}

/// A pool routee that hosts one distributed actor, at `<routee path>/actor`,
/// and hands it the calls the pool routes here. It keeps the actor alive
/// while it runs.
final class DistributedRoutee<A: DistributedActor>: Reactor where A.ActorSystem == ClusterSystem {
    private let make: @Sendable (ClusterSystem) -> A
    private var actor: A?
    private var target: ActorRef?
    private var timeout = Duration.seconds(5)

    init(make: @escaping @Sendable (ClusterSystem) -> A) { self.make = make }

    package func started(_ context: ActorContext) {
        guard let system = context.services.service(ClusterSystem.Slot.self)?.system else {
            return OscarLog.shared.error(
                "\(context.ref.address): a distributed pool needs a ClusterSystem on this node")
        }
        let actor = system.named("\(context.ref.address.path)/actor") { make(system) }
        self.actor = actor
        target = context.system?.ref(for: actor.id)
        timeout = system.settings.callTimeout
    }

    package static func reactions(_ r: inout Reactions<DistributedRoutee<A>>) {
        r.on(
            DistributedCall.self,
            future: { me, call in
                guard let target = me.target else { throw AskError.handlerFailed("this routee has no actor") }
                return try await target.ask(call, timeout: me.timeout)
            })
    }
}

extension ClusterSystem {
    /// Returns once the actor `id` has terminated: deinitialized (an actor
    /// on this node), or its node removed from the cluster (an actor on
    /// another node). Uses the message API's death watch.
    public func terminated(_ id: ActorID) async {
        let target = node.system.ref(for: id)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let once = OnceContinuation(continuation)
            let path = "/system/distributed-watch-\(watchCounter.wrappingAdd(1, ordering: .relaxed).newValue)"
            do {
                _ = try node.system.spawn(path: path, on: node.system.loops.next()) {
                    TerminationWaiter(watched: target, done: once)
                }
            } catch {
                once.resume()  // the node is shutting down: everything here has ended
            }
        }
    }
}

/// Resumes a continuation at most once, from any thread.
final class OnceContinuation: Sendable {
    private let continuation: Mutex<CheckedContinuation<Void, Never>?>
    init(_ continuation: CheckedContinuation<Void, Never>) { self.continuation = Mutex(continuation) }
    package func resume() {
        continuation.withLock { c in
            defer { c = nil }; return c
        }?.resume()
    }
}

/// Watches one actor and resumes its waiter when it terminates; then stops.
final class TerminationWaiter: Reactor {
    let watched: ActorRef
    package let done: OnceContinuation
    init(watched: ActorRef, done: OnceContinuation) {
        self.watched = watched
        self.done = done
    }
    private var context: ActorContext?
    package func started(_ context: ActorContext) {
        self.context = context
        context.watch(watched)
    }
    package func stopped() { done.resume() }
    package static func reactions(_ r: inout Reactions<TerminationWaiter>) {
        r.on(
            Terminated.self,
            do: { me, _ in
                me.done.resume()
                me.context?.stop()
            })
    }
}

extension ActorRef {
    /// Calls the distributed function `function` of the distributed actor
    /// at this ref, by name (`greet`, or a signature prefix such as
    /// `add(Swift.Int` for an overload), with arguments as CBOR values: what
    /// `oscar ask URI .greet '["Ada"]'` does. Returns the result as a CBOR
    /// value (`null` for a function that returns nothing). Generic functions
    /// cannot be called this way. An error the function throws comes back as
    /// `RemoteCallError`.
    package func call(
        _ function: String, arguments: [CBORValue], timeout: Duration = .seconds(5)
    ) async throws
        -> CBORValue
    {
        let call = DistributedCall(target: function, arguments: RawCBOR(bytes: CBORValue.array(arguments).cbor))
        switch try await ask(call, timeout: timeout) {
        case .value(let raw): return try CBORValue(cbor: raw.bytes)
        case .void: return .null
        case .error(let type, let message, _): throw RemoteCallError(typeName: type, message: message)
        }
    }
}
