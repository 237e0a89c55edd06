import Foundation
import Logging
import PushKafka
import Testing

/// Logs only warnings and worse from tests, to stderr.
let testLogger: Logger = {
    var logger = Logger(label: "pushhub.tests") { StreamLogHandler.standardError(label: $0) }
    logger.logLevel = ProcessInfo.processInfo.environment["PUSHHUB_TEST_LOG"].flatMap(Logger.Level.init(rawValue:)) ?? .critical
    return logger
}()

/// An embedded cluster with a fresh topic for one test.
struct KafkaFixture {
    let cluster: EmbeddedKafkaCluster
    let topic: String

    init(brokers: Int = 3, partitions: Int = 4) throws {
        cluster = try EmbeddedKafkaCluster.start(brokers: brokers, logger: testLogger)
        topic = "test.\(UUID().uuidString.lowercased())"
        try cluster.createTopic(topic, partitions: partitions, replicationFactor: min(3, brokers))
    }

    func producer(deliveryTimeout: Duration = .seconds(30)) throws -> KafkaProducer {
        var configuration = KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers)
        configuration.deliveryTimeout = deliveryTimeout
        return try KafkaProducer.make(configuration: configuration, logger: testLogger)
    }

    /// A group member. The short session time-out matters: the embedded cluster makes a
    /// member that joins after another left wait up to the group's session time-out.
    func consumer(
        group: String, commitInterval: Duration = .milliseconds(200), fetchBytes: Int? = nil, fetchBatchSize: Int = 500,
        takesWhatIsThereUnderLoad: Bool = false
    ) throws -> KafkaConsumer {
        var configuration = KafkaConsumerConfiguration(bootstrapServers: cluster.bootstrapServers, groupID: group)
        configuration.fetchBytes = fetchBytes
        configuration.fetchBatchSize = fetchBatchSize
        configuration.takesWhatIsThereUnderLoad = takesWhatIsThereUnderLoad
        configuration.sessionTimeout = .seconds(3)
        configuration.commitInterval = commitInterval
        return try KafkaConsumer.make(configuration: configuration, topics: [topic], logger: testLogger)
    }

    /// `count` records with keys `key-(i % keys)` and values `i`, in order.
    func records(_ count: Int, keys: Int = 50, valueSize: Int = 0) -> [KafkaOutgoingRecord] {
        (0..<count).map { index in
            var value = Data("\(index)".utf8)
            if valueSize > value.count { value.append(Data(repeating: 0x20, count: valueSize - value.count)) }
            return KafkaOutgoingRecord(
                topic: topic, key: "key-\(index % keys)", value: value,
                headers: [KafkaHeader(key: "index", value: "\(index)")])
        }
    }
}

extension KafkaRecord {
    /// The index a fixture record carries in its value.
    var index: Int { Int(String(decoding: value.prefix { $0 != 0x20 }, as: UTF8.self))! }
}

/// Records collected by a consuming task.
actor Collected {
    private(set) var records: [KafkaRecord] = []
    func append(_ record: KafkaRecord) { records.append(record) }
    var count: Int { records.count }
}

/// Takes records from `consumer` until `count` were taken or `timeout` passed, calling
/// `handle` on each; returns them in the order taken.
func take(
    _ count: Int, from consumer: KafkaConsumer, timeout: Duration = .seconds(45),
    _ handle: @escaping @Sendable (KafkaRecord) -> Void = { _ in }
) async -> [KafkaRecord] {
    await withTaskGroup(of: [KafkaRecord]?.self) { group in
        group.addTask {
            var taken: [KafkaRecord] = []
            for await record in consumer.records {
                handle(record)
                taken.append(record)
                if taken.count == count { break }
            }
            return taken
        }
        group.addTask {
            try? await Task.sleep(for: timeout)
            return nil
        }
        // The consumer's sequence ends when its task is cancelled, so the first result wins.
        let first = await group.next()!
        group.cancelAll()
        let second = await group.next()!
        return first ?? second ?? []
    }
}

/// A log handler that keeps what it is given, to check what reaches swift-log.
final class CapturingLogHandler: LogHandler, @unchecked Sendable {
    // @unchecked: `entries` is guarded by `lock`; the LogHandler properties are set before use.
    struct Entry: Sendable {
        var level: Logger.Level
        var message: String
        var metadata: [String: String]
    }

    private let lock = NSLock()
    private var stored: [Entry] = []
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var flat: [String: String] = [:]
        for (key, value) in event.metadata ?? [:] { flat[key] = "\(value)" }
        lock.withLock { stored.append(Entry(level: event.level, message: "\(event.message)", metadata: flat)) }
    }

    var entries: [Entry] { lock.withLock { stored } }
}
