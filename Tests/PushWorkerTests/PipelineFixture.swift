import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import PushDispatcher
import PushIngress
import PushKafka
import PushModel
import PushProviders
import PushSimulator
import PushStore
import PushWorker
import PushConfiguration

/// The whole pipeline in process: the simulator, an embedded Kafka cluster, a SQLite store,
/// the ingress router, the dispatcher, the outcome recorder and the four workers.
final class PipelineFixture: Sendable {
    static let fullKey = String(repeating: "f", count: 44)
    static let access: HTTPFields = [
        .authorization: SharedAccessSignature.token(
            resourceURI: "https://localhost/myhub", keyName: "DefaultFullSharedAccessSignature", key: fullKey, expiry: Date().addingTimeInterval(600)),
    ]

    let sim: SimulatorFixture
    let cluster: EmbeddedKafkaCluster
    let topics: PushTopics
    let store: SQLRegistrationStore
    let producer: KafkaProducer
    let hubs: HubsConfiguration
    let tasks: [Task<Void, Never>]

    init(faults: SimulatorFaults = SimulatorFaults(), workerSettings: @Sendable (inout WorkerSettings) -> Void = { _ in }, workers: [Platform] = Platform.allCases) async throws {
        sim = try await SimulatorFixture.start(faults: faults)
        cluster = try EmbeddedKafkaCluster.start(brokers: 1, logger: testLogger)
        topics = PushTopics(prefix: "w\(UUID().uuidString.prefix(8).lowercased()).")
        for topic in topics.all { try cluster.createTopic(topic, partitions: 2) }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-\(UUID().uuidString).sqlite").path
        store = try await SQLRegistrationStore.open(SQLiteDatabase(path: path))
        producer = try KafkaProducer.make(configuration: KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers), logger: testLogger)
        var hubs = sim.hubs
        hubs.hubs[0].sasRules = [.init(name: "DefaultFullSharedAccessSignature", key: Self.fullKey, rights: [.manage, .listen, .send])]
        hubs.appBackend = .init(hub: "myhub")
        self.hubs = hubs
        let dispatcher = Dispatcher(
            consumer: try Self.consumer(cluster, "dispatcher", [topics.requests]), producer: producer, store: store,
            settings: DispatcherSettings(topics: topics, hubs: ["myhub"]), logger: testLogger)
        let recorder = OutcomeRecorder(consumer: try Self.consumer(cluster, "outcomes", [topics.results]), store: store, producer: producer, topics: topics, logger: testLogger)
        var tasks: [Task<Void, Never>] = [Task { _ = try? await dispatcher.run() }, Task { _ = try? await recorder.run() }]
        for platform in workers {
            let worker = try Self.worker(platform, cluster: cluster, topics: topics, producer: producer, hubs: hubs, client: sim.client, adjust: workerSettings)
            tasks.append(Task { _ = try? await worker.run() })
        }
        self.tasks = tasks
    }

    static func consumer(_ cluster: EmbeddedKafkaCluster, _ group: String, _ names: [String]) throws -> KafkaConsumer {
        var configuration = KafkaConsumerConfiguration(bootstrapServers: cluster.bootstrapServers, groupID: group)
        configuration.sessionTimeout = .seconds(3)
        return try KafkaConsumer.make(configuration: configuration, topics: names, logger: testLogger)
    }

    static func worker(
        _ platform: Platform, cluster: EmbeddedKafkaCluster, topics: PushTopics, producer: KafkaProducer, hubs: HubsConfiguration,
        client: PNSHTTPClient, consumer: KafkaConsumer? = nil, adjust: (inout WorkerSettings) -> Void = { _ in }
    ) throws -> DeliveryWorker {
        var settings = WorkerSettings(platform: platform, topics: topics)
        settings.baseBackoff = .milliseconds(20)
        adjust(&settings)
        return DeliveryWorker(
            consumer: try consumer ?? Self.consumer(cluster, "\(platform.rawValue)-worker", [topics.deliveries(platform)]), producer: producer,
            provider: try ProviderFactory.make(platform, hubs: hubs, http: client), settings: settings, logger: testLogger)
    }

    func router() throws -> Router<IngressContext> {
        try buildIngressRouter(hubs: hubs, store: store, publisher: KafkaNotificationPublisher(producer: producer, topics: topics))
    }

    /// Polls `GET /myhub/messages/{id}` until it is Completed (or a minute passed); returns the XML.
    static func completed(_ client: some TestClientProtocol, _ notificationId: String) async throws -> String {
        var details = ""
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            details = String(buffer: try await client.execute(uri: "/myhub/messages/\(notificationId)", method: .get, headers: access).body)
            if details.contains("<State>Completed</State>") { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        return details
    }

    /// Sends through `POST /myhub/messages`; returns the tracking id.
    static func send(_ client: some TestClientProtocol, format: String, tags: String? = nil, body: String, headers extra: [String: String] = [:]) async throws -> String {
        var headers = access
        headers[HTTPField.Name("ServiceBusNotification-Format")!] = format
        if let tags { headers[HTTPField.Name("ServiceBusNotification-Tags")!] = tags }
        for (name, value) in extra { headers[HTTPField.Name(name)!] = value }
        headers[.contentType] = format == "windows" ? "application/xml" : "application/json"
        let response = try await client.execute(uri: "/myhub/messages", method: .post, headers: headers, body: ByteBuffer(string: body))
        guard response.status == .created, let id = response.headers[HTTPField.Name("TrackingId")!] else {
            throw PipelineError(description: "send refused: \(response.status) \(String(buffer: response.body))")
        }
        return id
    }

    /// Results on the results topic for `notificationId`, until `count` targets have one (or 60 s).
    func results(for notificationId: String, count: Int, group: String = "results-\(UUID().uuidString)") async throws -> [DeliveryResult] {
        let consumer = try Self.consumer(cluster, group, [topics.results])
        defer { Task { await consumer.close() } }
        var results: [DeliveryResult] = []
        let deadline = ContinuousClock.now + .seconds(60)
        let reader = Task {
            var collected: [DeliveryResult] = []
            for await record in consumer.records {
                if let batch = try? WireCoding.decode(ResultBatch.self, from: record.value), batch.notificationId == notificationId {
                    collected += batch.results ?? []
                    if Set(collected.compactMap(\.handle)).count >= count { break }
                }
            }
            return collected
        }
        let timeout = Task {
            try? await Task.sleep(until: deadline)
            reader.cancel()
        }
        results = await reader.value
        timeout.cancel()
        return results
    }

    func stop() async {
        tasks.forEach { $0.cancel() }
        await sim.stop()
    }
}

struct PipelineError: Error, CustomStringConvertible {
    var description: String
}
