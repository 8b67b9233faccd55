/// Declares the actors a system starts with, in Oscar's three provider kinds.
public struct ActorSystemBuilder {
    enum Provider {
        case singleton(name: String, make: @Sendable () -> AnyReactorBox)
        case instance(name: String, box: UncheckedSendable<AnyReactorBox>)
        case pool(name: String, size: Int, make: @Sendable () -> AnyReactorBox)
        case clusterPool(name: String, settings: ClusterPoolSettings, make: @Sendable () -> AnyReactorBox)
        case clusterSingleton(name: String, make: @Sendable () -> AnyReactorBox)
    }

    var providers: [Provider] = []

    init() {}

    /// An actor created on first use: its factory runs, on its loop, when
    /// its first message arrives.
    public mutating func singleton<A: Reactor>(_ name: String, _ make: @escaping @Sendable () -> A) {
        providers.append(.singleton(name: name, make: { ReactorBox(make()) }))
    }

    /// An actor the caller has already built. It is handed over to the system,
    /// which touches it only on its loop from then on.
    public mutating func instance<A: Reactor>(_ name: String, _ actor: sending A) {
        providers.append(.instance(name: name, box: UncheckedSendable(ReactorBox(actor))))
    }

    /// A pool of up to `size` actors behind one ref, created as load needs them.
    public mutating func pool<A: Reactor>(_ name: String, size: Int, _ make: @escaping @Sendable () -> A) {
        providers.append(.pool(name: name, size: size, make: { ReactorBox(make()) }))
    }

    /// A pool whose routees live on many nodes: declare it with the same
    /// name and settings on every node. Its ref (`/user/<name>`, on any node)
    /// routes each message to a routee `/user/<name>/<i>` on some member;
    /// `make` creates a routee on the node that hosts it, at its first
    /// message. Outside a cluster it routes among this node's routees.
    public mutating func clusterPool<A: Reactor>(
        _ name: String, _ settings: ClusterPoolSettings = ClusterPoolSettings(), _ make: @escaping @Sendable () -> A
    ) {
        providers.append(.clusterPool(name: name, settings: settings, make: { ReactorBox(make()) }))
    }

    /// Oscar's singleton, cluster-wide: declare it on every node. At most
    /// one instance runs, on the oldest up member, and moves when that
    /// member leaves or is removed. Its ref (`/user/<name>`, on any node) is
    /// a proxy that finds the instance, holding messages (up to 1,000)
    /// during a hand-over.
    public mutating func clusterSingleton<A: Reactor>(_ name: String, _ make: @escaping @Sendable () -> A) {
        providers.append(.clusterSingleton(name: name, make: { ReactorBox(make()) }))
    }
}
