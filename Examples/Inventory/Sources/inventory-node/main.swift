import InventoryActors
import Oscar

// The whole node: every setting from flags, OSCAR_* variables or a JSON
// file; SIGINT/SIGTERM leave the cluster gracefully. `--help` lists them.
var runner = ClusterNode.Runner(name: "inventory-node", actors: InventoryNode.declare) { node in
    InventoryNode.hostWarehouse(on: node)
}
runner.banner = [
    "actors: /user/inventory (AddStock, GetStock, RemoveStock), /user/pricing (Quote: a pool across the cluster), "
        + "/user/ledger (Record, GetLedger: a cluster singleton), /user/warehouse (distributed: .describe, .boxes)"
]
await runner.main()
