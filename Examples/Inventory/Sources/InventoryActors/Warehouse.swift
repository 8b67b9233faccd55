import Distributed
import Oscar

/// A distributed actor each node hosts at `/user/warehouse`: call it from
/// another node through `ClusterSystem.resolve`, or from the terminal:
/// `oscar ask oscar://127.0.0.1:7000/user/warehouse .describe '[]'`.
public distributed actor Warehouse {
    public typealias ActorSystem = ClusterSystem
    public nonisolated var unownedExecutor: UnownedSerialExecutor { actorSystem.executor(for: id) }

    private let name: String

    public init(name: String, actorSystem: ClusterSystem) {
        self.name = name
        self.actorSystem = actorSystem
    }

    /// Which warehouse this is, and on which node.
    public distributed func describe() -> String { "warehouse \(name) on \(actorSystem.node.address)" }

    /// How many units of `count` fit in `boxes` boxes of `perBox`.
    public distributed func boxes(for count: Int, perBox: Int) throws -> Int {
        guard perBox > 0, count >= 0 else { throw InventoryError.negativeCount(min(count, perBox)) }
        return (count + perBox - 1) / perBox
    }
}

/// The node's whole declaration, shared by `inventory-node` and
/// `inventory-chaos-node`.
public enum InventoryNode {
    /// The node's runner: its actors, the warehouse once it has started,
    /// and a banner saying what it hosts.
    public static func runner(name: String) -> ClusterNode.Runner {
        var runner = ClusterNode.Runner(name: name, actors: declare) { node in hostWarehouse(on: node) }
        runner.banner = [
            "actors: /user/inventory (AddStock, GetStock, RemoveStock), /user/pricing (Quote: a pool across the "
                + "cluster), /user/ledger (Record, GetLedger: a cluster singleton), /user/warehouse (distributed: "
                + ".describe, .boxes)"
        ]
        return runner
    }

    public static func declare(_ actors: inout ActorSystemBuilder) {
        actors.instance("inventory", Inventory())
        actors.clusterPool("pricing", ClusterPoolSettings(perNode: 2)) { Pricer() }
        actors.clusterSingleton("ledger") { Ledger() }
    }

    /// Hosts the distributed warehouse on a started node.
    public static func hostWarehouse(on node: ClusterNode) {
        let system = ClusterSystem(node: node)
        let warehouse = system.named("warehouse") { Warehouse(name: "main", actorSystem: system) }
        node.retain(system)
        node.retain(warehouse)
    }
}
