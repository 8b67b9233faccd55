import OscarBase
import OscarRuntime

// Cluster pools and cluster singletons are declared with the local ones, in
// the same builder, but they live in this layer: the runtime keeps them as
// `SystemPart`s and never names them.

extension ActorSystemBuilder {
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
            .part { system throws(ActorSystem.SpawnError) in
                try system.addClusterPool(name, settings: settings, supervision: supervision) { ReactorBox(make()) }
            })
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
        providers.append(
            .part { system throws(ActorSystem.SpawnError) in
                try system.addClusterSingleton(name, supervision: supervision) { ReactorBox(make()) }
            })
    }
}

extension ActorSystem {
    /// The router at `/user/<name>` and this node's routees under it
    /// (created at their first message, so a node that never hosts them
    /// never builds them).
    fileprivate func addClusterPool(
        _ name: String, settings poolSettings: ClusterPoolSettings, supervision: SupervisionStrategy,
        make: @escaping @Sendable () -> AnyReactorBox
    ) throws(ActorSystem.SpawnError) {
        guard Self.isValid(name) else { throw .invalidName(name) }
        let path = Self.fullPath(name)
        let router = ClusterPoolRouter(
            address: ActorAddress(node: node, path: path), settings: poolSettings, system: self)
        try addPart(router, claiming: [ActorRef(address: router.address, target: router)])
        for i in 0..<poolSettings.perNode {
            _ = try register("\(path)/\(i)", loop: loops.next(), supervision: supervision, make: make)
        }
    }

    /// The proxy at `/user/<name>` and the host at `/user/<name>/instance`.
    fileprivate func addClusterSingleton(
        _ name: String, supervision: SupervisionStrategy, make: @escaping @Sendable () -> AnyReactorBox
    ) throws(ActorSystem.SpawnError) {
        guard Self.isValid(name), !name.hasPrefix("/") else { throw .invalidName(name) }
        let singleton = ClusterSingleton(name: name, system: self, supervision: supervision, make: make)
        try addPart(
            singleton,
            claiming: [
                ActorRef(address: singleton.proxyAddress, target: singleton.proxy),
                ActorRef(address: singleton.hostAddress, target: singleton.host),
            ])
    }

    /// The cluster pools declared here, for membership to drive.
    package var clusterPools: [ClusterPoolRouter] { parts(ClusterPoolRouter.self) }

    /// The cluster singletons declared here, for membership to drive.
    package var clusterSingletons: [ClusterSingleton] { parts(ClusterSingleton.self) }
}
