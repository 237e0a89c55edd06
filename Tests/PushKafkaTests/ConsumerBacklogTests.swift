import Foundation
import PushKafka
import PushTestSupport
import Synchronization
import Testing

@Suite("ConsumerBacklog", .timeLimit(.minutes(1)))
struct ConsumerBacklogTests {
    /// A one-partition topic, a running producer of it, and a backlog of `group` on it with a
    /// 64 KiB bound, for `body`; the producer stops after.
    static func withBacklog(
        group: String, stalledAfter: Duration = .seconds(60), _ body: (KafkaFixture, KafkaProducer, ConsumerBacklog) async throws -> Void
    ) async throws {
        let fixture = try KafkaFixture(brokers: 1, partitions: 1)
        let producer = try fixture.producer()
        let running = Task { try await producer.run() }
        defer { running.cancel() }
        try await body(fixture, producer, try backlog(fixture, group: group, stalledAfter: stalledAfter))
    }

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
        try await Self.withBacklog(group: "slow") { fixture, producer, backlog in
            // Read once: an empty topic has room.
            #expect(
                await eventually {
                    _ = backlog.hasRoom(in: [fixture.topic])  // asking starts a reading
                    return backlog.backlog().count == 1
                }, "the partition was read")
            #expect(await backlog.hasRoom(in: [fixture.topic]), "an empty topic has room")

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
            #expect(await backlog.hasRoom(in: ["another.topic"]), "a topic not watched has room while a watched one is full")

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
    }

    @Test("a group that commits nothing while records wait is waited for only so long; then producers go on")
    func stalledGroup() async throws {
        try await Self.withBacklog(group: "nobody-reads", stalledAfter: .seconds(2)) { fixture, producer, backlog in
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
}
