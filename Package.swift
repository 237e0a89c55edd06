// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "pushhub",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "pushhub", targets: ["PushHubCLI"]),
        .library(name: "PushKafka", targets: ["PushKafka"]),
        .library(name: "PushModel", targets: ["PushModel"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
    ],
    targets: [
        // librdkafka from Debian's librdkafka-dev, found through pkg-config.
        .systemLibrary(
            name: "CRdKafka",
            pkgConfig: "rdkafka",
            providers: [.apt(["librdkafka-dev"])]
        ),
        // The only code that calls rd_kafka_*.
        .target(
            name: "PushKafka",
            dependencies: [
                "CRdKafka",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // Hub domain and wire types; no I/O.
        .target(name: "PushModel"),
        // Load generation and benchmarks.
        .target(
            name: "PushLoad",
            dependencies: [
                "PushKafka",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "PushHubCLI",
            dependencies: [
                "PushKafka",
                "PushLoad",
                "PushModel",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "PushKafkaTests",
            dependencies: [
                "PushKafka",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "PushHubCLITests",
            dependencies: ["PushHubCLI", "PushKafka"]
        ),
        .testTarget(
            name: "PushModelTests",
            dependencies: ["PushModel"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
