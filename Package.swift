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
        .testTarget(name: "OscarTests", dependencies: ["Oscar"]),
        .testTarget(name: "ClusterTests", dependencies: ["Oscar"]),
    ],
    swiftLanguageModes: [.v6]
)
