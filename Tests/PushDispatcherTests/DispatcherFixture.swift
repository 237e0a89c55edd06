import Foundation
import Logging
import PushDispatcher
import PushKafka
import PushModel
import PushOps
import PushStore
import ServiceLifecycle
import Testing

let quietLogger = Logger(label: "pushhub.tests") { _ in SwiftLogNoOpLogHandler() }

/// A running dispatcher on an embedded cluster and a seeded SQLite store, and a collector of
/// everything it produces.
final class DispatcherFixture: Sendable {
    let cluster: EmbeddedKafkaCluster
    let topics = PushTopics(prefix: "d\(UUID().uuidString.prefix(8).lowercased()).")
    let store: any RegistrationStore
    let producer: KafkaProducer
    let collected = Produced()
    private let group: ServiceGroup
    private let tasks: [Task<Void, Never>]

    /// `wrap` puts something between the dispatcher and the SQLite store (a store that refuses).
    /// `settings` changes the dispatcher's settings; `partitions` is every topic's.
    init(
        wrap: (any RegistrationStore) -> any RegistrationStore = { $0 }, budget: RetryBudget = RetryBudget(), partitions: Int = 3,
        settings change: (inout DispatcherSettings) -> Void = { _ in }
    ) async throws {
        cluster = try EmbeddedKafkaCluster.start(brokers: 1, logger: quietLogger)
        for topic in topics.all { try cluster.createTopic(topic, partitions: partitions) }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-\(UUID().uuidString).sqlite").path
        let sqlite = try await SQLRegistrationStore.open(SQLiteDatabase(path: path))
        store = wrap(sqlite)
        producer = try KafkaProducer.make(configuration: KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers), logger: quietLogger)
        var settings = DispatcherSettings(topics: topics, hubs: ["myhub"])
        settings.retryBudget = budget
        change(&settings)
        // As a process composes it: the dispatcher's part from its builder, the producer before it.
        let wiring = KafkaWiring(
            servers: cluster.bootstrapServers, topics: topics, producer: producer, tuneConsumer: { $0.sessionTimeout = .seconds(3) })
        let services = try makeDispatcherServices(
            kafka: wiring, store: store, ledger: sqlite, settings: settings, group: "dispatcher", logger: quietLogger
        ).services
        let group = ProcessLifecycle.group([.init(service: producer)] + services, signals: false, logger: quietLogger)
        self.group = group
        let reader = try Self.consumer(
            cluster, group: "collector", topics: Platform.allCases.map(topics.deliveries) + [topics.results, topics.deadLetter])
        let collected = self.collected
        tasks = [
            Task {
                do { try await group.run() } catch { Issue.record("the dispatcher stopped: \(error)") }
            },
            Task {
                for await record in reader.records { await collected.add(record) }
            },
        ]
    }

    deinit { tasks.forEach { $0.cancel() } }

    static func consumer(_ cluster: EmbeddedKafkaCluster, group: String, topics: [String]) throws -> KafkaConsumer {
        var configuration = KafkaConsumerConfiguration(bootstrapServers: cluster.bootstrapServers, groupID: group)
        configuration.sessionTimeout = .seconds(3)
        return try KafkaConsumer.make(configuration: configuration, topics: topics, logger: quietLogger)
    }

    /// Produces a SendRequest as the ingress or another service would.
    func send(_ request: SendRequest, headers: [KafkaHeader] = []) async throws {
        try await producer.send(
            KafkaOutgoingRecord(topic: topics.requests, key: request.notificationId, value: WireCoding.encode(request), headers: headers))
    }

    func sendRaw(key: String, _ text: String, partition: Int32? = nil) async throws {
        try await producer.send(KafkaOutgoingRecord(topic: topics.requests, partition: partition, key: Data(key.utf8), value: Data(text.utf8)))
    }

    /// The dispatch summary of a notification, once it arrived (then every batch is there too).
    func summary(_ notificationId: String, timeout: Duration = .seconds(30)) async -> ResultBatch? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let summary = await collected.results.first(where: {
                $0.notificationId == notificationId && ($0.dispatched != nil || $0.results?.first?.outcome == .rejected)
            }) {
                return summary
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }

    /// The dead-letter record with `key`, once it arrived.
    func deadLetter(_ key: String, timeout: Duration = .seconds(30)) async -> KafkaRecord? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let record = await collected.deadLetters.first(where: { $0.keyString == key }) { return record }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }

    func batches(_ notificationId: String) async -> [DeliveryBatch] {
        await collected.batches.filter { $0.notificationId == notificationId }
    }

    static func request(_ audience: Audience, format: NotificationFormat = .apple, body: String = #"{"aps":{"alert":"hi"}}"#) -> SendRequest {
        SendRequest(notificationId: UUID().uuidString.lowercased(), hub: "myhub", audience: audience, format: format, body: body, enqueuedAt: Date())
    }
}

actor Produced {
    var batches: [DeliveryBatch] = []
    var batchTopics: [String] = []
    /// Bytes of every delivery record so far.
    var deliveryBytes = 0
    var results: [ResultBatch] = []
    var deadLetters: [KafkaRecord] = []
    /// Each delivery and result record's headers, by notification id, in order.
    var headers: [String: [(topic: String, headers: [KafkaHeader])]] = [:]

    func add(_ record: KafkaRecord) {
        if let key = record.key.map({ String(decoding: $0, as: UTF8.self) }) {
            headers[String(key.split(separator: ":").first ?? ""), default: []].append((record.topic, record.headers))
        }
        if record.topic.hasSuffix("deadletter") {
            deadLetters.append(record)
        } else if record.topic.hasSuffix("results") {
            if let result = try? WireCoding.decode(ResultBatch.self, from: record.value) { results.append(result) }
        } else if let batch = try? WireCoding.decode(DeliveryBatch.self, from: record.value) {
            deliveryBytes += record.value.count
            batches.append(batch)
            batchTopics.append(record.topic)
        }
    }
}
