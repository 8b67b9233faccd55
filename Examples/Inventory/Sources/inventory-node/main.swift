import InventoryActors
import Oscar

// The whole node: every setting from flags, OSCAR_* variables or a JSON
// file; SIGINT/SIGTERM leave the cluster gracefully. `--help` lists them.
await InventoryNode.runner(name: "inventory-node").main()
