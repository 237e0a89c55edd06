// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "pushhub",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "pushhub", targets: ["PushHubCLI"]),
        .executable(name: "pushhub-ingress", targets: ["PushIngressMain"]),
        .executable(name: "pushhub-dispatcher", targets: ["PushDispatcherMain"]),
        .executable(name: "pushhub-apns-worker", targets: ["PushAPNsWorkerMain"]),
        .executable(name: "pushhub-fcm-worker", targets: ["PushFCMWorkerMain"]),
        .executable(name: "pushhub-wns-worker", targets: ["PushWNSWorkerMain"]),
        .executable(name: "pushhub-webpush-worker", targets: ["PushWebPushWorkerMain"]),
        .executable(name: "pushhub-hms-worker", targets: ["PushHMSWorkerMain"]),
        .executable(name: "pushhub-adm-worker", targets: ["PushADMWorkerMain"]),
        .executable(name: "pushhub-xiaomi-worker", targets: ["PushXiaomiWorkerMain"]),
        .executable(name: "pushhub-baidu-worker", targets: ["PushBaiduWorkerMain"]),
        .executable(name: "pushhub-fuzz", targets: ["PushFuzz"]),
        .executable(name: "pushhub-allocations", targets: ["PushAllocationsMain"]),
        .library(name: "PushKafka", targets: ["PushKafka"]),
        .library(name: "PushModel", targets: ["PushModel"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-auth", from: "2.5.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.7.4"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache", from: "2.1.1"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        // Only the OTLP/HTTP exporter: no gRPC in the build.
        .package(url: "https://github.com/swift-otel/swift-otel", from: "1.6.0", traits: ["OTLPHTTP"]),
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
                "PushMetrics",
                "PushModel",
                .product(name: "Instrumentation", package: "swift-distributed-tracing"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // SQLite from Debian's libsqlite3-dev.
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        // A VFS that hands a transaction's log frames to the kernel together (CSQLiteWAL.c).
        .target(name: "CSQLiteWAL", dependencies: ["CSQLite"]),
        // Prometheus metrics: counters, gauges, histograms, the text format.
        .target(name: "PushMetrics", dependencies: ["PushModel"]),
        // /health/live, /health/ready and /metrics for every process.
        .target(
            name: "PushOps",
            dependencies: [
                "PushMetrics",
                "PushModel",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // Hub domain and wire types; no I/O.
        .target(name: "PushModel"),
        // `pushhub.yaml`: hubs, SAS keys, PNS credentials, recovery; loading and validation.
        .target(
            name: "PushConfiguration",
            dependencies: [
                "PushModel",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Yams", package: "Yams"),
            ]
        ),
        // The fuzz targets' harness (PushFuzzing) and libFuzzer's executable (PushFuzz, built by `make fuzz`).
        .target(name: "PushFuzzing", dependencies: ["PushModel"]),
        .executableTarget(name: "PushFuzz", dependencies: ["PushFuzzing"]),
        // The registration store: protocol, SQLite and PostgreSQL.
        .target(
            name: "PushStore",
            dependencies: [
                "CSQLite",
                "CSQLiteWAL",
                "PushModel",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ]
        ),
        // The ingress process as a library: hub API, app-backend API, auth, configuration.
        .target(
            name: "PushIngress",
            dependencies: [
                "PushConfiguration",
                "PushDispatcher",
                "PushKafka",
                "PushMetrics",
                "PushOps",
                "PushModel",
                "PushProviders",
                "PushStore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdBcrypt", package: "hummingbird-auth"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        // The dispatcher process as a library: SendRequests to DeliveryBatches.
        .target(
            name: "PushDispatcher",
            dependencies: [
                "PushKafka",
                "PushMetrics",
                "PushModel",
                "PushStore",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        // The environment variables PushHub's executables read, in one place.
        .target(
            name: "PushEnvironment",
            dependencies: [
                "PushKafka",
                "PushModel",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "OTel", package: "swift-otel"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The PNS clients: APNs, FCM, WNS, Web Push (encryption and VAPID), over HTTP/2 and HTTP/1.1.
        .target(
            name: "PushProviders",
            dependencies: [
                "PushConfiguration",
                "PushModel",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The worker engine shared by the four worker executables.
        .target(
            name: "PushWorker",
            dependencies: [
                "PushConfiguration",
                "PushMetrics",
                "PushOps",
                "PushEnvironment",
                "PushKafka",
                "PushModel",
                "PushProviders",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        // `pushhub sim`: APNs, FCM, WNS and Web Push simulators.
        .target(
            name: "PushSimulator",
            dependencies: [
                "PushConfiguration",
                "PushOps",
                "PushModel",
                "PushProviders",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(name: "PushAPNsWorkerMain", dependencies: ["PushWorker", "PushModel"]),
        .executableTarget(name: "PushFCMWorkerMain", dependencies: ["PushWorker", "PushModel"]),
        .executableTarget(name: "PushWNSWorkerMain", dependencies: ["PushWorker", "PushModel"]),
        .executableTarget(name: "PushHMSWorkerMain", dependencies: ["PushWorker", "PushModel"]),
        .executableTarget(name: "PushADMWorkerMain", dependencies: ["PushWorker", "PushModel"]),
        .executableTarget(name: "PushXiaomiWorkerMain", dependencies: ["PushWorker", "PushModel"]),
        .executableTarget(name: "PushBaiduWorkerMain", dependencies: ["PushWorker", "PushModel"]),
        .executableTarget(name: "PushWebPushWorkerMain", dependencies: ["PushWorker", "PushModel"]),
        // The allocation regression guard: a worker's path with malloc counted (CMallocCount
        // defines malloc for this one executable).
        .target(name: "CMallocCount"),
        .executableTarget(
            name: "PushAllocationsMain",
            dependencies: [
                "CMallocCount", "PushConfiguration", "PushEnvironment", "PushLoad", "PushModel", "PushProviders", "PushWorker",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]),
        // Load generation (`pushhub load`) and benchmarks.
        .target(
            name: "PushLoad",
            dependencies: [
                "PushDispatcher",
                "PushOps",
                "PushIngress",
                "PushKafka",
                "PushModel",
                "PushProviders",
                "PushSimulator",
                "PushStore",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        .executableTarget(
            name: "PushIngressMain",
            dependencies: [
                "PushConfiguration",
                "PushEnvironment",
                "PushIngress",
                "PushKafka",
                "PushOps",
                "PushStore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "PushDispatcherMain",
            dependencies: [
                "PushConfiguration",
                "PushDispatcher",
                "PushOps",
                "PushEnvironment",
                "PushKafka",
                "PushStore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "PushHubCLI",
            dependencies: [
                "PushConfiguration",
                "PushEnvironment",
                "PushOps",
                "PushKafka",
                "PushLoad",
                "PushIngress",
                "PushStore",
                "PushModel",
                "PushSimulator",
                "PushDispatcher",
                "PushWorker",
                "PushProviders",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // posix_spawn's Linux extensions, for starting test children without Foundation's Process.
        .systemLibrary(name: "CSpawn"),
        // Helpers shared by the test targets.
        .target(name: "PushTestSupport", dependencies: ["CSpawn", "PushModel", "PushStore"]),
        .testTarget(
            name: "PushKafkaTests",
            dependencies: [
                "PushKafka",
                "PushTestSupport",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "PushHubCLITests",
            dependencies: [
                "PushHubCLI", "PushIngressMain", "PushDispatcherMain", "PushAPNsWorkerMain", "PushKafka", "PushIngress", "PushLoad", "PushModel",
                "PushTestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "PushLoadTests",
            dependencies: ["PushLoad", "PushIngress", "PushModel"]
        ),
        .testTarget(
            name: "PushSimulatorTests",
            dependencies: [
                "PushSimulator", "PushConfiguration",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "PushStoreTests",
            dependencies: ["PushStore", "PushModel", .product(name: "Logging", package: "swift-log")]
        ),
        .testTarget(
            name: "PushIngressTests",
            dependencies: [
                "PushConfiguration", "PushIngress", "PushStore", "PushModel", "PushKafka", "PushDispatcher", "PushOps", "PushMetrics",
                "PushTestSupport",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .testTarget(
            name: "PushDispatcherTests",
            dependencies: [
                "PushDispatcher", "PushKafka", "PushModel", "PushOps", "PushStore", "PushTestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "PushProvidersTests",
            dependencies: [
                "PushProviders", "PushConfiguration", "PushModel", "PushTestSupport", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"), .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"), .product(name: "NIOHPACK", package: "swift-nio-http2"),
            ]
        ),
        .testTarget(
            name: "PushWorkerTests",
            dependencies: [
                "PushWorker", "PushMetrics", "PushSimulator", "PushProviders", "PushDispatcher", "PushIngress", "PushKafka", "PushModel", "PushOps",
                "PushStore",
                "PushConfiguration",
                "PushTestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "PushOpsTests",
            dependencies: [
                "PushOps", "PushMetrics", "PushEnvironment", .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "PushModelTests",
            dependencies: ["PushModel", "PushFuzzing", "PushTestSupport"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
