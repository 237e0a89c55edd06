import CRdKafka
import Foundation
import PushTestSupport
import Synchronization
import Testing

@testable import PushKafka

@Suite("Delivery reports served when librdkafka announces them", .timeLimit(.minutes(2)))
struct EventPollerTests {
    @Test("each acknowledgement is served as it comes, with the safety poll ten minutes away")
    func announcedReportsAreServed() async throws {
        let kafka = try KafkaFixture(brokers: 1, partitions: 2)
        var configuration = KafkaProducerConfiguration(bootstrapServers: kafka.cluster.bootstrapServers)
        configuration.pollSweep = .seconds(600)
        let producer = try KafkaProducer.make(configuration: configuration, logger: testLogger)
        // The first record may wait while the new cluster elects the partitions' leaders.
        try #require(try await Self.finishes(within: .seconds(60)) { _ = try await producer.send(kafka.records(1)[0]) })
        // Records one at a time, the queue empty between them, so that each report is a new
        // announcement; then several senders at once.
        for record in kafka.records(10) {
            try #require(try await Self.finishes(within: .seconds(5)) { _ = try await producer.send(record) })
            try await Task.sleep(for: .milliseconds(20))
        }
        let records = kafka.records(200)
        #expect(
            try await Self.finishes(within: .seconds(10)) {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for record in records { group.addTask { _ = try await producer.send(record) } }
                    try await group.waitForAll()
                }
            })
        await producer.shutdown()
    }

    @Test("the safety poll serves reports that were never announced")
    func sweepServesUnannounced() async throws {
        let kafka = try KafkaFixture(brokers: 1, partitions: 1)
        let (client, deliveries) = try Self.producerClient(on: kafka)
        let poller = EventPoller(client: client, sweep: .milliseconds(100))
        defer { poller.stop() }
        // The announcements off: only the sweep serves the queue now.
        let main = RDKafkaQueue(pointer: rd_kafka_queue_get_main(client.handle), client: client)
        rd_kafka_queue_cb_event_enable(main.pointer, nil, nil)
        // Leaders known first, as they are after a producer's first record.
        let (code, _) = await client.learnTopics([kafka.topic], timeout: .seconds(30))
        try #require(code == .noError)

        let group = DeliveryGroup(count: 3)
        for (index, record) in kafka.records(3).enumerated() {
            let id = deliveries.register(group, index: index)
            let code = client.produce(
                topic: record.topic, partition: 0, key: record.key, value: record.value, headers: record.headers, deliveryID: id)
            try #require(code == .noError)
        }
        try #require(
            try await Self.finishes(within: .seconds(10)) {
                for result in await group.wait() { _ = try result.get() }
            })
        #expect(deliveries.outstanding == 0)
    }

    @Test("a drain that keeps finding reports hands over to a drain queued after it, and every report is served")
    func drainsHandOver() async throws {
        let kafka = try KafkaFixture(brokers: 1, partitions: 4)
        let (client, deliveries) = try Self.producerClient(on: kafka)
        // Every poll that serves a report hands over; no sweep comes in the test's time.
        let poller = EventPoller(client: client, sweep: .seconds(600), pollsPerTurn: 1)
        defer { poller.stop() }
        let (code, _) = await client.learnTopics([kafka.topic], timeout: .seconds(30))
        try #require(code == .noError)
        for round in 0..<5 {
            let group = DeliveryGroup(count: 100)
            for (index, record) in kafka.records(100).enumerated() {
                let id = deliveries.register(group, index: index)
                let code = client.produce(
                    topic: record.topic, partition: Int32(index % 4), key: record.key, value: record.value, headers: record.headers,
                    deliveryID: id)
                try #require(code == .noError)
            }
            try #require(
                try await Self.finishes(within: .seconds(10)) {
                    for result in await group.wait() { _ = try result.get() }
                }, "round \(round)")
        }
        #expect(deliveries.outstanding == 0)
    }

    /// A producer's client on `kafka`'s cluster, with a 1 ms linger, and the waiters its
    /// delivery reports go to; no poller serves it until the test makes one.
    static func producerClient(on kafka: KafkaFixture) throws -> (RDKafkaClient, DeliveryWaiters) {
        let deliveries = DeliveryWaiters()
        var configuration = KafkaProducerConfiguration(bootstrapServers: kafka.cluster.bootstrapServers)
        configuration.linger = .milliseconds(1)
        return (try RDKafkaClient.makeProducer(properties: configuration.properties, deliveries: deliveries, logger: testLogger), deliveries)
    }

    /// Whether `body` ends within `limit` (rethrowing what it threw). It runs as a task of its
    /// own, left behind when it does not end: a report never served would otherwise hold the
    /// test, and the run, for ever.
    static func finishes(within limit: Duration, _ body: @escaping @Sendable () async throws -> Void) async throws -> Bool {
        let ended = Ended()
        let task = Task {
            defer { ended.flag.store(true, ordering: .releasing) }
            try await body()
        }
        guard await eventually(timeout: limit, { ended.flag.load(ordering: .acquiring) }) else { return false }
        try await task.value
        return true
    }

    final class Ended: Sendable {
        let flag = Atomic<Bool>(false)
    }
}
