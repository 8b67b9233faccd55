// swift-tools-version:6.0
import PackageDescription

// An application built on Oscar as a user's would be: a package of its own
// that depends on Oscar by path (from elsewhere: by its git URL).
let package = Package(
    name: "Inventory",
    dependencies: [
        .package(name: "Oscar", path: "../..")
    ],
    targets: [
        // The actors and messages, a library so that the node and the chaos
        // workload share them.
        .target(name: "InventoryActors", dependencies: [.product(name: "Oscar", package: "Oscar")]),
        .executableTarget(
            name: "inventory-node",
            dependencies: ["InventoryActors", .product(name: "Oscar", package: "Oscar")]),
        // The chaos workload and its checker, on Oscar's test kit; and the
        // node built for chaos runs (`oscar chaos --exec`). The production
        // node above links neither.
        .target(
            name: "InventoryChaos",
            dependencies: ["InventoryActors", .product(name: "OscarTestKit", package: "Oscar")]),
        .executableTarget(
            name: "inventory-chaos-node",
            dependencies: ["InventoryActors", "InventoryChaos", .product(name: "Oscar", package: "Oscar")]),
        // The checker can fail: histories with stock lost or created.
        .testTarget(
            name: "InventoryChaosTests",
            dependencies: ["InventoryChaos", .product(name: "OscarTestKit", package: "Oscar")]),
    ]
)
