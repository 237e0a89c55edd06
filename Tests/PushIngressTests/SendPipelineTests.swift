import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import PushDispatcher
import PushIngress
import PushKafka
import PushModel
import PushOps
import PushStore
import Testing

@Suite("Send pipeline: HTTP send → dispatcher → results → outcome", .timeLimit(.minutes(2)))
struct SendPipelineTests {
    @Test("a send to a user ends Completed; a dead handle is pruned once and the client's next PUT gets 410")
    func endToEnd() async throws {
        let logger = MessagingFixture.logger
        let cluster = try EmbeddedKafkaCluster.start(brokers: 1, logger: logger)
        let topics = PushTopics(prefix: "p\(UUID().uuidString.prefix(8).lowercased()).")
        for topic in topics.all { try cluster.createTopic(topic, partitions: 2) }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-\(UUID().uuidString).sqlite").path
        let store = try await SQLRegistrationStore.open(SQLiteDatabase(path: path))
        try await store.setUser(name: "alice", passwordHash: hashPassword("alice-secret"))
        let producer = try KafkaProducer.make(configuration: KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers), logger: logger)
        func consumer(_ group: String, _ names: [String]) throws -> KafkaConsumer {
            var configuration = KafkaConsumerConfiguration(bootstrapServers: cluster.bootstrapServers, groupID: group)
            configuration.sessionTimeout = .seconds(3)
            return try KafkaConsumer.make(configuration: configuration, topics: names, logger: logger)
        }
        // The ingress's and the dispatcher's parts as a process composes them (the ingress's HTTP
        // server on a free port; the test drives a router of its own).
        let wiring = KafkaWiring(
            servers: cluster.bootstrapServers, topics: topics, producer: producer, tuneConsumer: { $0.sessionTimeout = .seconds(3) })
        var ingress = IngressConfiguration(hubs: IngressFixture.hubs)
        ingress.port = 0
        let group = ProcessLifecycle.group(
            [.init(service: producer)]
                + (try makeIngressServices(configuration: ingress, store: store, kafka: wiring, logger: logger, onListening: { _ in }))
                + (try makeDispatcherServices(
                    kafka: wiring, store: store, settings: DispatcherSettings(topics: topics, hubs: ["myhub"]), group: "dispatcher", logger: logger
                ).services),
            signals: false, logger: logger)
        // Stands in for the APNs worker: every target's handle is dead, and each result batch
        // is published twice, as a worker that crashed after publishing would.
        let apnsDeliveries = try consumer("apns-worker", [topics.deliveries(.apns)])
        let tasks = [
            Task {
                do { try await group.run() } catch { Issue.record("the pipeline stopped: \(error)") }
            },
            Task {
                for await record in apnsDeliveries.records {
                    guard let batch = try? WireCoding.decode(DeliveryBatch.self, from: record.value) else { continue }
                    let results = ResultBatch(
                        notificationId: batch.notificationId, hub: batch.hub, platform: .apns,
                        results: batch.targets.map {
                            DeliveryResult(
                                registrationId: $0.registrationId, handle: $0.handle, outcome: .invalidHandle, pnsStatus: 410,
                                pnsReason: "Unregistered", attempts: 1, dwellMs: 3)
                        })
                    let value = try! WireCoding.encode(results)
                    for _ in 0..<2 {
                        _ = await producer.sendAll([KafkaOutgoingRecord(topic: topics.results, key: batch.notificationId, value: value)])
                    }
                    apnsDeliveries.markDone(record)
                }
            },
        ]
        defer { tasks.forEach { $0.cancel() } }

        let app = Application(
            router: try buildIngressRouter(
                hubs: IngressFixture.hubs, stores: IngressStores(store), publisher: KafkaNotificationPublisher(producer: producer, topics: topics)))
        let alice = basic("alice", "alice-secret")
        try await app.test(.router) { client in
            let created = try await client.execute(uri: "/api/register", method: .post, headers: alice)
            let registrationId = try JSONDecoder().decode(String.self, from: Data(buffer: created.body))
            let device = #"{"Platform":"apns","Handle":"dead-device-token","Tags":[]}"#
            #expect(
                try await client.execute(uri: "/api/register/\(registrationId)", method: .put, headers: alice, body: ByteBuffer(string: device))
                    .status == .ok)

            var headers = IngressFixture.fullAccess
            headers[HTTPField.Name("ServiceBusNotification-Format")!] = "apple"
            headers[HTTPField.Name("ServiceBusNotification-Tags")!] = "username:alice"
            headers[.contentType] = "application/json"
            let sent = try await client.execute(
                uri: "/myhub/messages", method: .post, headers: headers, body: ByteBuffer(string: #"{"aps":{"alert":"hi"}}"#))
            #expect(sent.status == .created)
            let notificationId = try #require(sent.headers[HTTPField.Name("TrackingId")!])

            let enqueued = try await client.execute(uri: "/myhub/messages/\(notificationId)", method: .get, headers: IngressFixture.fullAccess)
            #expect(enqueued.status == .ok)
            #expect(enqueued.text.contains("<NotificationId>\(notificationId)</NotificationId>"))

            var details = ""
            let deadline = ContinuousClock.now + .seconds(60)
            while ContinuousClock.now < deadline {
                details = try await client.execute(uri: "/myhub/messages/\(notificationId)", method: .get, headers: IngressFixture.fullAccess).text
                if details.contains("<State>Completed</State>") { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(details.contains("<State>Completed</State>"), "\(details)")
            #expect(
                details.contains("<ApnsOutcomeCounts><Outcome><Name>BadChannel</Name><Count>1</Count></Outcome></ApnsOutcomeCounts>"),
                "counted once: \(details)")
            #expect(details.contains("<EndTime>"))

            // The dead registration was pruned: the tutorial client's next PUT gets 410 and it registers again.
            let stale = try await client.execute(
                uri: "/api/register/\(registrationId)", method: .put, headers: alice, body: ByteBuffer(string: device))
            #expect(stale.status == .gone)
            let fresh = try JSONDecoder().decode(
                String.self, from: Data(buffer: try await client.execute(uri: "/api/register?handle=new-token", method: .post, headers: alice).body))
            #expect(
                try await client.execute(
                    uri: "/api/register/\(fresh)", method: .put, headers: alice,
                    body: ByteBuffer(string: #"{"Platform":"apns","Handle":"new-token"}"#)
                ).status == .ok)

            #expect(try await client.execute(uri: "/myhub/messages/no-such-id", method: .get, headers: IngressFixture.fullAccess).status == .notFound)
        }
    }
}
