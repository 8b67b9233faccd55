import InventoryActors
import InventoryChaos
import Oscar
import OscarTestKit

// The same node, able to take part in `oscar chaos --exec`: it runs the
// inventory's chaos workload and, asked with --chaos-check, its checker.
var runner = InventoryNode.runner(name: "inventory-chaos-node")
runner.chaos(InventoryChaos.operations)
await runner.main()
