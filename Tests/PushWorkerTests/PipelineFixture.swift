import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import PushConfiguration
import PushDispatcher
import PushIngress
import PushKafka
import PushModel
import PushOps
import PushProviders
import PushSimulator
import PushStore
import PushWorker
import ServiceLifecycle
import Testing

/// The whole pipeline in process: the simulator, an embedded Kafka cluster, a SQLite store,
/// the ingress router, the dispatcher, the outcome recorder and the four workers.
final class PipelineFixture: Sendable {
    static let fullKey = String(repeating: "f", count: 44)
    static let access: HTTPFields = [
        .authorization: SharedAccessSignature.token(
            resourceURI: "https://localhost/myhub", keyName: "DefaultFullSharedAccessSignature", key: fullKey, expiry: Date().addingTimeInterval(600))
    ]

    let sim: SimulatorFixture
    let cluster: EmbeddedKafkaCluster
    let topics: PushTopics
    let store: SQLRegistrationStore
    let producer: KafkaProducer
    let hubs: HubsConfiguration
    let group: ServiceGroup
    let running: Task<Void, Never>

    /// Composed as a process would be, from the builders: the producer, the ingress's part (its
    /// HTTP server on a free port; tests drive a router of their own), the dispatcher's, and
    /// each worker's. A part that fails records an issue in the test at once.
    init(
        faults: SimulatorFaults = SimulatorFaults(), workerSettings: @escaping @Sendable (inout WorkerSettings) -> Void = { _ in },
        workers: [Platform] = [.apns, .fcm, .wns, .webpush]
    ) async throws {
        sim = try await SimulatorFixture.start(faults: faults)
        cluster = try EmbeddedKafkaCluster.start(brokers: 1, logger: testLogger)
        topics = PushTopics(prefix: "w\(UUID().uuidString.prefix(8).lowercased()).")
        for topic in topics.all { try cluster.createTopic(topic, partitions: 2) }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-\(UUID().uuidString).sqlite").path
        store = try await SQLRegistrationStore.open(SQLiteDatabase(path: path))
        let wiring = Self.wiring(cluster, topics)
        producer = wiring.producer
        var hubs = sim.hubs
        hubs.hubs[0].sasRules = [.init(name: "DefaultFullSharedAccessSignature", key: Self.fullKey, rights: [.manage, .listen, .send])]
        hubs.appBackend = .init(hub: "myhub")
        self.hubs = hubs
        var ingress = IngressConfiguration(hubs: hubs)
        ingress.port = 0
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [.init(service: producer)]
        services += try makeIngressServices(configuration: ingress, store: store, kafka: wiring, logger: testLogger, onListening: { _ in })
        services += try makeDispatcherServices(
            kafka: wiring, store: store, settings: DispatcherSettings(topics: topics, hubs: ["myhub"]), group: "dispatcher", logger: testLogger
        ).services
        for platform in workers {
            services += try makeWorkerServices(
                settings: Self.settings(platform, topics, workerSettings), hubs: hubs, kafka: wiring, http: sim.client,
                group: "\(platform.rawValue)-worker", logger: testLogger
            ).services
        }
        (group, running) = Self.run(services)
    }

    /// A KafkaWiring on `cluster` with its own producer; consumers leave and join quickly.
    static func wiring(_ cluster: EmbeddedKafkaCluster, _ topics: PushTopics, producer: KafkaProducer? = nil) -> KafkaWiring {
        KafkaWiring(
            servers: cluster.bootstrapServers, topics: topics,
            producer: producer
                ?? (try! KafkaProducer.make(configuration: KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers), logger: testLogger)),
            tuneConsumer: { $0.sessionTimeout = .seconds(3) })
    }

    static func settings(_ platform: Platform, _ topics: PushTopics, _ adjust: (inout WorkerSettings) -> Void) -> WorkerSettings {
        var settings = WorkerSettings(platform: platform, topics: topics)
        settings.baseBackoff = .milliseconds(20)
        adjust(&settings)
        return settings
    }

    /// Runs `services` in a group of their own; a failure is recorded in the running test.
    static func run(_ services: [ServiceGroupConfiguration.ServiceConfiguration]) -> (ServiceGroup, Task<Void, Never>) {
        let group = ProcessLifecycle.group(services, signals: false, logger: testLogger)
        let running = Task {
            do { try await group.run() } catch { Issue.record("the pipeline stopped: \(error)") }
        }
        return (group, running)
    }

    /// One more worker for `platform`, as another process's part, with its own producer and
    /// HTTP client when given; it runs until its group is shut down or its task cancelled.
    func startWorker(
        _ platform: Platform, producer: KafkaProducer? = nil, client: PNSHTTPClient? = nil,
        adjust: @escaping @Sendable (inout WorkerSettings) -> Void = { _ in }
    ) throws -> (ServiceGroup, Task<Void, Never>) {
        let services = try makeWorkerServices(
            settings: Self.settings(platform, topics, adjust), hubs: hubs, kafka: Self.wiring(cluster, topics, producer: producer ?? self.producer),
            http: client ?? sim.client, group: "\(platform.rawValue)-worker", logger: testLogger
        ).services
        return Self.run(services)
    }

    /// Runs `body` beside one more worker for `platform` (`startWorker`'s), which is shut down
    /// gracefully once `body` ends, whether it returned or threw.
    func withWorker<T: Sendable>(_ platform: Platform, _ body: () async throws -> T) async throws -> T {
        let (group, running) = try startWorker(platform)
        let result: Result<T, any Error>
        do { result = .success(try await body()) } catch { result = .failure(error) }
        await group.triggerGracefulShutdown()
        await running.value
        return try result.get()
    }

    static func consumer(_ cluster: EmbeddedKafkaCluster, _ group: String, _ names: [String]) throws -> KafkaConsumer {
        var configuration = KafkaConsumerConfiguration(bootstrapServers: cluster.bootstrapServers, groupID: group)
        configuration.sessionTimeout = .seconds(3)
        return try KafkaConsumer.make(configuration: configuration, topics: names, logger: testLogger)
    }

    func router() throws -> Router<IngressContext> {
        try buildIngressRouter(hubs: hubs, stores: IngressStores(store), publisher: KafkaNotificationPublisher(producer: producer, topics: topics))
    }

    /// Polls `GET /myhub/messages/{id}` until it is Completed (or a minute passed); returns the XML.
    static func completed(_ client: some TestClientProtocol, _ notificationId: String) async throws -> String {
        var details = ""
        // A full `make test` on two cores has taken more than a minute to finish a send whose
        // workers had just started (a template send's WNS push, in a test that took 200 s).
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            details = String(buffer: try await client.execute(uri: "/myhub/messages/\(notificationId)", method: .get, headers: access).body)
            if details.contains("<State>Completed</State>") { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        return details
    }

    /// Sends through `POST /myhub/messages`; returns the tracking id.
    static func send(_ client: some TestClientProtocol, format: String, tags: String? = nil, body: String, headers extra: [String: String] = [:])
        async throws -> String
    {
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
        await group.triggerGracefulShutdown()
        await running.value
        await sim.stop()
    }
}

struct PipelineError: Error, CustomStringConvertible {
    var description: String
}
