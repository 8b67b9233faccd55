// swift-tools-version:6.0
import PackageDescription

// The layers, bottom to top (docs/ARCHITECTURE.md). SwiftPM refuses a cycle,
// and `internal` stops at a module, so a lower layer reaching up is a build
// error; what the layers share across a boundary is `package`, not `public`.
let package = Package(
    name: "Oscar",
    products: [
        // What an application depends on: one import, `import Oscar`.
        .library(name: "Oscar", targets: ["Oscar"]),
        // Chaos workloads, checkers, the simulator and the fault gate, for an
        // application's own tests and chaos runs. Not part of `Oscar`.
        .library(name: "OscarTestKit", targets: ["OscarTestKit"]),
        // The seed's reducer engine, on its own (the membership runs on it).
        .library(name: "CoreEngine", targets: ["CoreEngine"]),
        .executable(name: "oscar", targets: ["oscar"]),
    ],
    targets: [
        .systemLibrary(
            name: "CLibUV",
            pkgConfig: "libuv",
            providers: [.apt(["libuv1-dev"])]
        ),
        // OpenSSL 3 for the transport's TLS; only OscarRemote's TLS files use it.
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),
        .target(name: "CoreEngine"),
        .target(name: "OscarBase"),
        .target(name: "OscarCBOR", dependencies: ["OscarBase"]),
        .target(name: "OscarMembership", dependencies: ["OscarBase", "CoreEngine"]),
        .target(name: "OscarRuntime", dependencies: ["CLibUV", "OscarBase", "OscarCBOR"]),
        .target(name: "OscarRemote", dependencies: ["CLibUV", "COpenSSL", "OscarRuntime"]),
        .target(name: "OscarCluster", dependencies: ["OscarRemote", "OscarMembership"]),
        .target(name: "OscarDistributed", dependencies: ["OscarCluster"]),
        .target(name: "Oscar", dependencies: ["OscarCluster", "OscarDistributed"]),
        .target(name: "OscarTestKit", dependencies: ["Oscar"]),
        // The demo actors, the built-in chaos workload and the benchmarks:
        // the CLI's, never in an application's binary.
        .target(name: "OscarDemo", dependencies: ["Oscar", "OscarTestKit"]),
        .executableTarget(name: "oscar", dependencies: ["Oscar", "OscarTestKit", "OscarDemo"]),
        .testTarget(name: "CoreEngineTests", dependencies: ["CoreEngine"]),
        .target(name: "OscarTestSupport", path: "Tests/Support"),
        .testTarget(name: "OscarTests", dependencies: ["Oscar", "OscarTestKit", "OscarDemo", "OscarTestSupport"]),
        .testTarget(name: "ClusterTests", dependencies: ["Oscar", "OscarTestKit", "OscarDemo", "OscarTestSupport"]),
        // Drives the real `oscar` binary; depends on it so `swift test` builds it.
        .testTarget(
            name: "EndToEndTests", dependencies: ["oscar", "Oscar", "OscarTestKit", "OscarDemo", "OscarTestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
