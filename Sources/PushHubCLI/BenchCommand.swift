import ArgumentParser
import Foundation
import PushLoad

/// `pushhub bench`: measurements, not tests.
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench", abstract: "Benchmarks of PushHub's parts.", subcommands: [Kafka.self])

    struct Kafka: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Produce and consume records on the embedded cluster with PushHub's Kafka layer and with kcat, in one run.")

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
