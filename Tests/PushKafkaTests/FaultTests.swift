import Foundation
import Logging
import PushKafka
import PushTestSupport
import Testing

@Suite("Faults of the embedded cluster", .timeLimit(.minutes(2)))
struct FaultTests {
    @Test("a send to a broker that is down waits, and succeeds when the broker is back")
    func sendWaitsForBroker() async throws {
        let kafka = try KafkaFixture(brokers: 3, partitions: 1)
        try kafka.cluster.setPartitionLeader(topic: kafka.topic, partition: 0, broker: 1)
        let producer = try kafka.producer(deliveryTimeout: .seconds(60))
        let records = kafka.records(2)
        try await producer.send(records[0])

        try kafka.cluster.setBrokerDown(1)
        let sending = Task { try await producer.send(records[1]) }
        // The broker stays down for a while; the send must neither fail nor finish meanwhile.
        try await Task.sleep(for: .seconds(2))
        #expect(producer.inFlightCount == 1, "the record waits for its acknowledgement")
        try kafka.cluster.setBrokerUp(1)
        let report = try await sending.value
        #expect(report.partition == 0)
        #expect(report.offset == 1)

        let consumer = try kafka.consumer(group: "after-outage")
        let consumed = await take(2, from: consumer, timeout: .seconds(20))
        await consumer.close()
        #expect(consumed.map(\.index) == [0, 1], "both records are there, once each")
    }

    @Test("a send that cannot be acknowledged within the delivery time-out fails with a clear error")
    func sendFailsAfterTimeout() async throws {
        let kafka = try KafkaFixture(brokers: 3, partitions: 1)
        try kafka.cluster.setPartitionLeader(topic: kafka.topic, partition: 0, broker: 2)
        let producer = try kafka.producer(deliveryTimeout: .seconds(2))
        let records = kafka.records(2)
        try await producer.send(records[0])
        try kafka.cluster.setBrokerDown(2)

        let error = await #expect(throws: KafkaError.self) { try await producer.send(records[1]) }
        #expect(error?.kind == .delivery)
        #expect(error?.code == .messageTimedOut)
        #expect(error?.description.contains("was not acknowledged") == true)
        #expect(error?.description.contains(kafka.topic) == true)
    }

    @Test("injected Produce errors are retried; the idempotent producer writes each record once")
    func produceErrorsAreRetried() async throws {
        let kafka = try KafkaFixture(partitions: 1)
        let producer = try kafka.producer()
        try await producer.send(kafka.records(1)[0])
        try kafka.cluster.injectErrors([.notEnoughReplicas, .notEnoughReplicas, .requestTimedOut], on: .produce)
        for result in await producer.sendAll(Array(kafka.records(20).dropFirst())) { _ = try result.get() }

        let consumer = try kafka.consumer(group: "idempotent")
        let consumed = await take(21, from: consumer, timeout: .seconds(8))
        await consumer.close()
        #expect(consumed.map(\.index) == Array(0..<20), "twenty records, no duplicates")
    }

    @Test("injected Fetch errors do not lose or repeat records")
    func fetchErrorsRecover() async throws {
        let kafka = try KafkaFixture(partitions: 2)
        let producer = try kafka.producer()
        for result in await producer.sendAll(kafka.records(500)) { _ = try result.get() }
        try kafka.cluster.injectErrors([.notLeaderForPartition, .requestTimedOut, .leaderNotAvailable], on: .fetch)

        let consumer = try kafka.consumer(group: "fetch-faults")
        let consumed = await take(500, from: consumer) { consumer.markDone($0) }
        await consumer.close()
        #expect(consumed.count == 500)
        #expect(Set(consumed.map(\.index)) == Set(0..<500))
    }

    @Test("a failed OffsetCommit is reported, and the next commit stores the same position")
    func offsetCommitErrors() async throws {
        let kafka = try KafkaFixture(partitions: 1)
        let producer = try kafka.producer()
        for result in await producer.sendAll(kafka.records(10)) { _ = try result.get() }

        // Commits only when told to, so the injected error meets the explicit commit below.
        let first = try kafka.consumer(group: "commit-faults", commitInterval: .seconds(3600))
        let taken = await take(6, from: first) { first.markDone($0) }
        try #require(taken.count == 6)

        try kafka.cluster.injectErrors([.invalidCommitOffsetSize], on: .offsetCommit)
        let error = await #expect(throws: KafkaError.self) { try await first.commit() }
        #expect(error?.code == .invalidCommitOffsetSize)
        try await first.commit()
        await first.close()

        let second = try kafka.consumer(group: "commit-faults")
        let rest = await take(4, from: second)
        await second.close()
        #expect(rest.map(\.index) == [6, 7, 8, 9])
    }

    @Test("librdkafka's own logs reach swift-log")
    func librdkafkaLogsReachSwiftLog() async throws {
        let handler = CapturingLogHandler()
        let logger = Logger(label: "capture") { _ in handler }
        // Nothing listens on port 1 of loopback: librdkafka logs its failed connections.
        var configuration = KafkaProducerConfiguration(bootstrapServers: ["127.0.0.1:1"])
        configuration.deliveryTimeout = .seconds(1)
        let producer = try KafkaProducer.make(configuration: configuration, logger: logger)
        _ = await producer.sendAll([KafkaOutgoingRecord(topic: "nowhere", key: "k", value: Data("v".utf8))])
        let logged = await eventually(timeout: .seconds(10)) {
            handler.entries.contains { $0.message == "librdkafka" && $0.metadata["kafka.message"]?.contains("127.0.0.1:1") == true }
        }
        #expect(logged)
    }
}
