// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Oscar",
    products: [
        .library(name: "Oscar", targets: ["Oscar"]),
        .library(name: "CoreEngine", targets: ["CoreEngine"]),
        .executable(name: "oscar", targets: ["oscar"]),
    ],
    targets: [
        .systemLibrary(
            name: "CLibUV",
            pkgConfig: "libuv",
            providers: [.apt(["libuv1-dev"])]
        ),
        .target(name: "CoreEngine"),
        .target(name: "Oscar", dependencies: ["CLibUV", "CoreEngine"]),
        .executableTarget(name: "oscar", dependencies: ["Oscar"]),
        .testTarget(name: "CoreEngineTests", dependencies: ["CoreEngine"]),
        .target(name: "OscarTestSupport", path: "Tests/Support"),
        .testTarget(name: "OscarTests", dependencies: ["Oscar", "OscarTestSupport"]),
        .testTarget(name: "ClusterTests", dependencies: ["Oscar", "OscarTestSupport"]),
        // Drives the real `oscar` binary; depends on it so `swift test` builds it.
        .testTarget(name: "EndToEndTests", dependencies: ["oscar", "Oscar", "OscarTestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
