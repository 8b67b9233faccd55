/// Declares the actors a system starts with, in Oscar's three provider kinds.
///
/// Every kind but `instance` takes a `supervision` strategy: what the actor
/// does when a reaction throws (see `SupervisionStrategy`; default `.resume`).
/// An `instance` always resumes: there is no factory to make a fresh one.
public struct ActorSystemBuilder {
    enum Provider {
        case singleton(name: String, supervision: SupervisionStrategy, make: @Sendable () -> AnyReactorBox)
        case instance(name: String, box: UncheckedSendable<AnyReactorBox>)
        case pool(name: String, size: Int, supervision: SupervisionStrategy, make: @Sendable () -> AnyReactorBox)
        case clusterPool(
            name: String, settings: ClusterPoolSettings, supervision: SupervisionStrategy,
            make: @Sendable () -> AnyReactorBox)
        case clusterSingleton(name: String, supervision: SupervisionStrategy, make: @Sendable () -> AnyReactorBox)
    }

    var providers: [Provider] = []

    init() {}

    /// An actor created on first use: its factory runs, on its loop, when
    /// its first message arrives.
    public mutating func singleton<A: Reactor>(
        _ name: String, supervision: SupervisionStrategy = .default, _ make: @escaping @Sendable () -> A
    ) {
        providers.append(.singleton(name: name, supervision: supervision, make: { ReactorBox(make()) }))
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

    /// A pool whose routees live on many nodes: declare it with the same
    /// name and settings on every node. Its ref (`/user/<name>`, on any node)
    /// routes each message to a routee `/user/<name>/<i>` on some member;
    /// `make` creates a routee on the node that hosts it, at its first
    /// message. Outside a cluster it routes among this node's routees. A
    /// routee stopped by its supervision is no longer routed to.
    public mutating func clusterPool<A: Reactor>(
        _ name: String, _ settings: ClusterPoolSettings = ClusterPoolSettings(),
        supervision: SupervisionStrategy = .default, _ make: @escaping @Sendable () -> A
    ) {
        providers.append(
            .clusterPool(name: name, settings: settings, supervision: supervision, make: { ReactorBox(make()) }))
    }

    /// Oscar's singleton, cluster-wide: declare it on every node. At most
    /// one instance runs, on the oldest up member, and moves when that
    /// member leaves or is removed. Its ref (`/user/<name>`, on any node) is
    /// a proxy that finds the instance, holding messages (up to 1,000)
    /// during a hand-over. An instance stopped by its supervision stays
    /// stopped on this member (asks fail with `stopped`) until a hand-over.
    public mutating func clusterSingleton<A: Reactor>(
        _ name: String, supervision: SupervisionStrategy = .default, _ make: @escaping @Sendable () -> A
    ) {
        providers.append(.clusterSingleton(name: name, supervision: supervision, make: { ReactorBox(make()) }))
    }
}
