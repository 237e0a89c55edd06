import Foundation
import PushKafka
import Synchronization
import Testing

@Suite("ConsumerBacklog", .timeLimit(.minutes(1)))
struct ConsumerBacklogTests {
    static func backlog(_ fixture: KafkaFixture, group: String, stalledAfter: Duration = .seconds(60)) throws -> ConsumerBacklog {
        var settings = ConsumerBacklog.Settings()
        settings.boundPerPartition = 64 << 10
        settings.refreshInterval = .milliseconds(50)
        settings.stalledAfter = stalledAfter
        return try ConsumerBacklog(
            servers: fixture.cluster.bootstrapServers, watches: [ConsumerBacklog.Watch(topic: fixture.topic, group: group)], settings: settings,
            logger: testLogger)
    }

    @Test("records a group has not committed fill a partition; its commits make room, and a waiting producer goes on")
    func fillsAndDrains() async throws {
        let fixture = try KafkaFixture(brokers: 1, partitions: 1)
        let producer = try fixture.producer()
        let running = Task { try await producer.run() }
        defer { running.cancel() }
        let backlog = try Self.backlog(fixture, group: "slow")
        #expect(await backlog.hasRoom(in: [fixture.topic]), "an empty topic has room")
        #expect(await backlog.hasRoom(in: ["another.topic"]), "a topic not watched always has room")

        // 40 records of 1 KiB produced through the backlog: counted at their size (40 KiB, under 64).
        let own = fixture.records(40, valueSize: 1024)
        let reservation = try await backlog.reserve(own)
        backlog.produced(reservation, records: own, results: await producer.sendAll(own))
        try await Task.sleep(for: .milliseconds(100))
        #expect(await backlog.hasRoom(in: [fixture.topic]))
        // 20 more from another producer count 4 KiB each: 40 + 80 KiB passes the bound.
        for result in await producer.sendAll(fixture.records(20, valueSize: 1024)) { _ = try result.get() }
        #expect(await eventually { await !backlog.hasRoom(in: [fixture.topic]) }, "others' records fill the partition")
        let bytes = try #require(backlog.backlog().first?.value)
        #expect(bytes == 40 * 1024 + 20 * 4096, "its own at their size, others' at 4 KiB")

        // A producer waits until the group reads and commits.
        let next = fixture.records(1, valueSize: 1024)
        let admittedYet = Atomic(false)
        let waiting = Task {
            let reservation = try await backlog.reserve(next)
            admittedYet.store(true, ordering: .relaxed)
            return reservation
        }
        try await Task.sleep(for: .milliseconds(300))
        let admittedEarly = admittedYet.load(ordering: .relaxed)
        #expect(!admittedEarly, "the producer waits while the partition is full")
        let consumer = try fixture.consumer(group: "slow")
        var read = 0
        for await record in consumer.records {
            consumer.markDone(record)
            read += 1
            if read == 60 { break }
        }
        try await consumer.commit()
        let admitted = try await waiting.value
        backlog.produced(admitted, records: next, results: await producer.sendAll(next))
        #expect(await eventually { await backlog.hasRoom(in: [fixture.topic]) })
        #expect(backlog.backlog().values.max() ?? 0 <= 2 * 1024, "only the last record is left")
        await consumer.close()
    }

    @Test("a group that commits nothing while records wait is waited for only so long; then producers go on")
    func stalledGroup() async throws {
        let fixture = try KafkaFixture(brokers: 1, partitions: 1)
        let producer = try fixture.producer()
        let running = Task { try await producer.run() }
        defer { running.cancel() }
        let backlog = try Self.backlog(fixture, group: "nobody-reads", stalledAfter: .seconds(2))
        for result in await producer.sendAll(fixture.records(40, valueSize: 1024)) { _ = try result.get() }
        #expect(await eventually { !backlog.hasRoom(in: [fixture.topic]) }, "the partition is full for the group")
        let started = ContinuousClock.now
        let next = fixture.records(1, valueSize: 1024)
        let reservation = try await backlog.reserve(next)
        backlog.produced(reservation, records: next, results: await producer.sendAll(next))
        let waited = ContinuousClock.now - started
        #expect(waited > .milliseconds(500), "it waited first: \(waited)")
        #expect(waited < .seconds(15), "then went on: \(waited)")
    }
}
