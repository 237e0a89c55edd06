import ArgumentParser
import Foundation
import PushEnvironment
import PushLoad
import PushStore

/// `pushhub bench`: measurements, not tests.
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench", abstract: "Benchmarks of PushHub's parts.",
        discussion:
            "Examples:\n  pushhub bench kafka --records 200000\n  pushhub bench store --registrations 1000000\n  make bench-apns    # the worker beside h2load, figures into docs/benchmarks.md",
        subcommands: [Kafka.self, Store.self, Import.self, Dispatch.self, Worker.self, PNSRequestCommand.self])

    struct Kafka: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Produce and consume records on the embedded cluster with PushHub's Kafka layer and with kcat, in one run.",
            discussion: "Examples:\n  pushhub bench kafka\n  pushhub bench kafka --records 500000 --record-size 1024 --kcat ''")

        @Option(help: "Records per run.")
        var records = 200_000

        @Option(help: "Bytes per record value.")
        var recordSize = 1024

        @Option(help: "Path of kcat; an empty value skips the reference runs.")
        var kcat = "/usr/bin/kcat"

        @Option(help: "Replace the Kafka section of this Markdown file (between the kafka-benchmark markers) with the figures.")
        var markdownFile: String?

        func run() async throws {
            var options = KafkaThroughputBenchmark.Options()
            options.records = records
            options.recordSize = recordSize
            options.kcat = kcat.isEmpty ? nil : kcat
            let figures = try await KafkaThroughputBenchmark(options: options, logger: makeLogger("pushhub.bench")).run()
            let table = BenchmarkReport.kafkaTable(figures, options: options)
            emit(table)
            if let markdownFile {
                try BenchmarkReport.replaceSection("kafka-benchmark", in: URL(fileURLWithPath: markdownFile), with: table)
            }
        }
    }
}

extension BenchCommand {
    struct Store: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Seed a registration store and page through tag expressions as the dispatcher does.",
            discussion: "Examples:\n  pushhub bench store --registrations 1000000\n  pushhub bench store --registrations 100000 --page-size 500")

        @Option(help: "Registrations to seed.")
        var registrations = 1_000_000

        @Option(help: "Registrations per page.")
        var pageSize = 1_000

        @Option(help: "The store: an SQLite path (default: a fresh temporary file) or postgres://….")
        var database: String?

        @Option(help: "Seconds of each installation-upsert phase after paging; 0 skips them.")
        var upsertSeconds = 10.0

        @Option(help: "A tag expression to page (repeatable); the default is the four of docs/benchmarks.md.")
        var expression: [String] = []

        @Flag(help: "The store already holds an earlier run's registrations (the same --registrations): page them without seeding.")
        var seeded = false

        @Option(help: "Installations to seed, then list with the installation queries; 0 skips them.")
        var installations = 0

        @Option(help: "Replace this section of the Markdown file (between its markers) with the figures.")
        var section = "store-paging-benchmark"

        @Option(help: "Replace the store section of this Markdown file with the figures.")
        var markdownFile: String?

        func run() async throws {
            let path = database ?? FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-bench-\(UUID().uuidString).sqlite").path
            var options = StorePagingBenchmark.Options(location: StoreLocation(path))
            options.registrations = registrations
            options.pageSize = pageSize
            options.upsertSeconds = upsertSeconds
            options.seeded = seeded
            if !expression.isEmpty { options.expressions = expression }
            options.installations = installations
            let (seedSeconds, figures, upserts, listings) = try await StorePagingBenchmark(options: options, logger: makeLogger("pushhub.bench")).run
            {
                emit($0)
            }
            let table = BenchmarkReport.storeTable(figures, upserts: upserts, listings: listings, seedSeconds: seedSeconds, options: options)
            emit(table)
            if let markdownFile {
                try BenchmarkReport.replaceSection(section, in: URL(fileURLWithPath: markdownFile), with: table)
            }
            if database == nil {
                for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
            }
        }
    }
}

extension BenchCommand {
    struct Dispatch: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Broadcast to N registrations through the dispatcher on the embedded cluster; time and memory.",
            discussion: "Examples:\n  pushhub bench dispatch --registrations 1000000\n  pushhub bench dispatch --registrations 100000")

        @Option(help: "Registrations in the audience.")
        var registrations = 1_000_000

        @Option(help: "Replace the dispatch section of this Markdown file with the figures.")
        var markdownFile: String?

        func run() async throws {
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-bench-\(UUID().uuidString).sqlite").path
            defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
            let figures = try await DispatchBenchmark(registrations: registrations, path: path, logger: makeLogger("pushhub.bench")).run { emit($0) }
            let table = BenchmarkReport.dispatchTable(figures)
            emit(table)
            if let markdownFile {
                try BenchmarkReport.replaceSection("dispatch-benchmark", in: URL(fileURLWithPath: markdownFile), with: table)
            }
        }
    }
}
