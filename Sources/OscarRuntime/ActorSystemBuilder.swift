import OscarBase

/// Declares the actors a system starts with, in Oscar's three provider kinds.
///
/// Every kind but `instance` takes a `supervision` strategy: what the actor
/// does when a reaction throws (see `SupervisionStrategy`; default `.resume`).
/// An `instance` always resumes: there is no factory to make a fresh one.
public struct ActorSystemBuilder {
    package enum Provider {
        case singleton(name: String, supervision: SupervisionStrategy, make: @Sendable () -> AnyReactorBox)
        case instance(name: String, box: UncheckedSendable<AnyReactorBox>)
        case pool(name: String, size: Int, supervision: SupervisionStrategy, make: @Sendable () -> AnyReactorBox)
        /// A declaration of a layer above (a cluster pool, a cluster
        /// singleton), added once the system exists.
        case part(@Sendable (ActorSystem) throws(ActorSystem.SpawnError) -> Void)
    }

    package var providers: [Provider] = []

    package init() {}

    /// One actor on this node, created on first use: its factory runs, on
    /// its loop, when its first message arrives. Every node that declares it
    /// has its own; for one in the whole cluster, see `clusterSingleton`.
    public mutating func nodeSingleton<A: Reactor>(
        _ name: String, supervision: SupervisionStrategy = .default, _ make: @escaping @Sendable () -> A
    ) {
        providers.append(.singleton(name: name, supervision: supervision, make: { ReactorBox(make()) }))
    }

    /// The name before `nodeSingleton`, which says that it is one per node,
    /// not one in the cluster (`clusterSingleton`).
    @available(*, deprecated, renamed: "nodeSingleton")
    public mutating func singleton<A: Reactor>(
        _ name: String, supervision: SupervisionStrategy = .default, _ make: @escaping @Sendable () -> A
    ) {
        nodeSingleton(name, supervision: supervision, make)
    }

    /// An actor the caller has already built. It is handed over to the system,
    /// which touches it only on its loop from then on.
    public mutating func instance<A: Reactor>(_ name: String, _ actor: sending A) {
        providers.append(.instance(name: name, box: UncheckedSendable(ReactorBox(actor))))
    }

    /// A pool of up to `size` actors behind one ref, created as load needs them.
    /// A routee stopped by its supervision is replaced by a fresh one when the
    /// pool next needs it.
    public mutating func pool<A: Reactor>(
        _ name: String, size: Int, supervision: SupervisionStrategy = .default, _ make: @escaping @Sendable () -> A
    ) {
        providers.append(.pool(name: name, size: size, supervision: supervision, make: { ReactorBox(make()) }))
    }
}

/// Something a layer above the runtime declares in a system (a cluster pool,
/// a cluster singleton): the system keeps it and stops it at shutdown,
/// without knowing what it is.
package protocol SystemPart: AnyObject, Sendable {
    /// Called once, at shutdown, before the actors stop.
    func stop()
}
