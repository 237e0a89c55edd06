import Foundation
import Logging
import PushKafka
import PushModel

/// Produces and consumes fixed-size records on the embedded cluster with PushHub's Kafka
/// layer and with kcat (the same librdkafka, driven from C) in the same run, so the two
/// can be compared on one machine at one moment.
public struct KafkaThroughputBenchmark: Sendable {
    public struct Options: Sendable {
        public var records = 200_000
        public var recordSize = 1024
        public var brokers = 3
        /// `nil`: enough partitions that none holds more than 3 MiB. The embedded cluster keeps
        /// at most 5 MiB per partition and drops older records, as retention would.
        public var partitions: Int?
        /// Records handed to the producer per `sendAll` call, and calls in flight at once.
        public var chunkSize = 10_000
        public var chunksInFlight = 4
        /// kcat's path; `nil` skips the reference runs.
        public var kcat: String? = "/usr/bin/kcat"

        public init() {}

        public var partitionCount: Int {
            partitions ?? max(6, records * recordSize / (3 << 20) + 1)
        }
    }

    /// One measured run.
    public struct Figure: Sendable {
        public var name: String
        public var records: Int
        public var seconds: Double
        public var recordsPerSecond: Double { Double(records) / seconds }
        public var megabytesPerSecond: Double
    }

    public let options: Options
    let logger: Logger

    public init(options: Options, logger: Logger) {
        self.options = options
        self.logger = logger
    }

    public func run() async throws -> [Figure] {
        let cluster = try EmbeddedKafkaCluster.start(brokers: options.brokers, logger: logger)
        defer { cluster.shutdown() }
        let ours = "bench.pushhub"
        let reference = "bench.kcat"
        for topic in [ours, reference] {
            try cluster.createTopic(topic, partitions: options.partitionCount, replicationFactor: min(3, options.brokers))
        }
        let servers = cluster.bootstrapServers
        var figures: [Figure] = []
        figures.append(try await produceWithPushHub(servers: servers, topic: ours))
        if let kcat = options.kcat {
            figures.append(try produceWithKcat(kcat, servers: servers, topic: reference))
        }
        figures.append(try await consumeWithPushHub(servers: servers, topic: ours))
        if let kcat = options.kcat {
            figures.append(try consumeWithKcat(kcat, servers: servers, topic: reference))
        }
        return figures
    }

    private func megabytes(_ records: Int) -> Double { Double(records * options.recordSize) / 1_048_576 }

    private func produceWithPushHub(servers: [String], topic: String) async throws -> Figure {
        // Timed from the producer's creation: kcat's time includes its start and connection too.
        let start = ContinuousClock.now
        let producer = try KafkaProducer.make(configuration: KafkaProducerConfiguration(bootstrapServers: servers), logger: logger)
        let padding = Data(repeating: UInt8(ascii: "x"), count: options.recordSize)
        // The first record waits for metadata and the idempotent producer id.
        try await producer.send(KafkaOutgoingRecord(topic: topic, key: "first", value: padding))
        let chunkSize = options.chunkSize
        let chunks = stride(from: 1, to: options.records, by: chunkSize).map { $0..<min($0 + chunkSize, options.records) }
        let failures = try await withThrowingTaskGroup(of: Int.self) { group in
            var failed = 0
            var next = chunks.makeIterator()
            func addChunk() -> Bool {
                guard let range = next.next() else { return false }
                group.addTask {
                    let records = range.map { index in
                        KafkaOutgoingRecord(topic: topic, key: "key-\(index % 1000)", value: padding)
                    }
                    return await producer.sendAll(records).filter { (try? $0.get()) == nil }.count
                }
                return true
            }
            for _ in 0..<options.chunksInFlight where !addChunk() { break }
            while let chunkFailures = try await group.next() {
                failed += chunkFailures
                _ = addChunk()
            }
            return failed
        }
        let seconds = (ContinuousClock.now - start).seconds
        await producer.shutdown()
        guard failures == 0 else { throw BenchmarkError(message: "\(failures) records were not acknowledged") }
        return Figure(
            name: "produce, PushHub KafkaProducer (acks=all, idempotent)", records: options.records, seconds: seconds,
            megabytesPerSecond: megabytes(options.records) / seconds)
    }

    private func produceWithKcat(_ kcat: String, servers: [String], topic: String) throws -> Figure {
        // kcat reads `key:value` lines; each line makes one record of the same size as ours.
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-bench-\(UUID().uuidString).txt")
        defer { try? FileManager.default.removeItem(at: file) }
        var text = Data()
        text.reserveCapacity(options.records * (options.recordSize + 12))
        let padding = Data(repeating: UInt8(ascii: "x"), count: options.recordSize)
        for index in 0..<options.records {
            text.append(Data("key-\(index % 1000):".utf8))
            text.append(padding)
            text.append(0x0A)
        }
        try text.write(to: file)
        let seconds = try runTimed(
            kcat,
            [
                "-P", "-b", servers.joined(separator: ","), "-t", topic, "-K", ":", "-l", file.path,
                "-X", "enable.idempotence=true", "-X", "acks=all", "-X", "linger.ms=5",
            ])
        return Figure(
            name: "produce, kcat -P (acks=all, idempotent)", records: options.records, seconds: seconds,
            megabytesPerSecond: megabytes(options.records) / seconds)
    }

    private func consumeWithPushHub(servers: [String], topic: String) async throws -> Figure {
        var configuration = KafkaConsumerConfiguration(bootstrapServers: servers, groupID: "bench-\(UUID().uuidString)")
        configuration.sessionTimeout = .seconds(3)
        let consumer = try KafkaConsumer.make(configuration: configuration, topics: [topic], logger: logger)
        // A shortfall ends the run with an error instead of waiting for ever.
        let watchdog = Task {
            try await Task.sleep(for: .seconds(120))
            await consumer.close()
        }
        defer { watchdog.cancel() }
        // Counted from the first record, so the group join is not part of the figure.
        var start: ContinuousClock.Instant?
        var count = 0
        let total = options.records
        for await record in consumer.records {
            if start == nil { start = .now }
            consumer.markDone(record)
            count += 1
            if count == total { break }
        }
        let seconds = (ContinuousClock.now - (start ?? .now)).seconds
        await consumer.close()
        guard count == total else { throw BenchmarkError(message: "consumed \(count) of \(total) records") }
        return Figure(
            name: "consume, PushHub KafkaConsumer (group, offsets stored per record)", records: total, seconds: seconds,
            megabytesPerSecond: megabytes(total) / seconds)
    }

    private func consumeWithKcat(_ kcat: String, servers: [String], topic: String) throws -> Figure {
        let seconds = try runTimed(
            kcat,
            [
                "-C", "-b", servers.joined(separator: ","), "-t", topic, "-o", "beginning", "-e", "-q",
                "-c", String(options.records), "-f", "%o\\n",
            ])
        return Figure(
            name: "consume, kcat -C (no group)", records: options.records, seconds: seconds, megabytesPerSecond: megabytes(options.records) / seconds)
    }

    /// Runs a command to its end with its output discarded; returns the seconds it took.
    private func runTimed(_ executable: String, _ arguments: [String]) throws -> Double {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        let start = ContinuousClock.now
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw BenchmarkError(message: "\(executable) \(arguments.joined(separator: " ")) exited with \(process.terminationStatus)")
        }
        return (ContinuousClock.now - start).seconds
    }
}

public struct BenchmarkError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
