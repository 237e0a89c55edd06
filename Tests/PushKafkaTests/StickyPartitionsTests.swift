import Foundation
import PushTestSupport
import Testing

@testable import PushKafka

@Suite("Sticky partitions", .timeLimit(.minutes(2)))
struct StickyPartitionsTests {
    @Test("one partition for a window or a number of records, then the next, round the topic; unknown topics by key")
    func rotation() throws {
        let sticky = StickyPartitions(window: .milliseconds(10), recordsPerPartition: 3)
        let start = ContinuousClock.now
        #expect(sticky.partition(of: "t", now: start) == nil, "a topic not learnt goes by key")
        sticky.learn(["t": 4, "empty": 0])
        #expect(sticky.partition(of: "empty", now: start) == nil)
        let first = try #require(sticky.partition(of: "t", now: start))
        #expect((0..<4).contains(first))
        // Three records to a partition, then the next.
        #expect(sticky.partition(of: "t", now: start) == first)
        #expect(sticky.partition(of: "t", now: start) == first)
        let second = sticky.partition(of: "t", now: start)
        #expect(second == (first + 1) % 4)
        // The window passed: the next, with one record taken.
        let third = sticky.partition(of: "t", now: start + .milliseconds(30))
        #expect(third == (first + 2) % 4)
        // Round every partition and back.
        var seen: Set<Int32> = []
        for step in 1...8 { seen.insert(sticky.partition(of: "t", now: start + .milliseconds(30 + 20 * step))!) }
        #expect(seen == [0, 1, 2, 3])
        // Learning the same count again changes nothing; a different count starts again.
        let before = sticky.partition(of: "t", now: start + .milliseconds(500))
        sticky.learn(["t": 4])
        #expect(sticky.partition(of: "t", now: start + .milliseconds(500)) == before)
        sticky.learn(["t": 2])
        #expect((0..<2).contains(sticky.partition(of: "t", now: start + .milliseconds(500))!))
        sticky.forget("t")
        #expect(sticky.partition(of: "t", now: start + .milliseconds(500)) == nil)

        // Which records are sticky: only those marked, without a partition, and small.
        sticky.learn(["t": 4])
        let small = KafkaOutgoingRecord(topic: "t", key: "k", value: Data(count: 10), sticky: true)
        #expect(sticky.partition(for: small) != nil)
        #expect(sticky.partition(for: KafkaOutgoingRecord(topic: "t", key: "k", value: Data(count: 10))) == nil)
        #expect(sticky.partition(for: KafkaOutgoingRecord(topic: "t", partition: 2, key: nil, value: Data(count: 10), sticky: true)) == nil)
        #expect(
            sticky.partition(for: KafkaOutgoingRecord(topic: "t", key: "k", value: Data(count: StickyPartitions.largestRecord + 1), sticky: true))
                == nil)
    }

    @Test(
        "sticky records produced together share a partition and keep their keys, on a topic learnt ahead or on its first record; keyed records go by key"
    )
    func producedTogether() async throws {
        let kafka = try KafkaFixture(partitions: 4)
        let other = "test.\(UUID().uuidString.lowercased())"
        try kafka.cluster.createTopic(other, partitions: 4, replicationFactor: 3)
        let producer = try kafka.producer()
        await producer.prepare(topics: [kafka.topic])

        // 100 sticky records with 50 keys, handed over together: at most the window's turn
        // (a stall past 10 ms on a busy machine) moves them on, never over every partition.
        let sticky = kafka.records(100).map { record -> KafkaOutgoingRecord in
            var record = record
            record.sticky = true
            return record
        }
        let reports = try await producer.sendAll(sticky).map { try $0.get() }
        let partitions = Set(reports.map(\.partition))
        #expect(partitions.count <= 2, "one partition, or two when the window turned: \(partitions)")
        // After the window, the next partition.
        try await Task.sleep(for: .milliseconds(50))
        var late = sticky[0]
        late.value = Data("100".utf8)
        let next = try await producer.send(late).partition
        #expect(!partitions.contains(next) || partitions.count == 2)

        // Keyed records of the same keys: each key on its own partition, spread over all four.
        let keyed = try await producer.sendAll(kafka.records(100)).map { try $0.get() }
        #expect(Set(keyed.map(\.partition)).count == 4)
        // A topic the producer was not told of is learnt when its first record comes: the
        // sticky records after it share a partition too.
        var first = KafkaOutgoingRecord(topic: other, key: "first", value: Data("first".utf8))
        first.sticky = true
        #expect(!producer.hasLearnt(other))
        try await producer.send(first)
        #expect(await eventually(timeout: .seconds(30)) { producer.hasLearnt(other) })
        let unlearnt = kafka.records(100).map { record -> KafkaOutgoingRecord in
            var record = record
            record.topic = other
            record.sticky = true
            return record
        }
        let together = try await producer.sendAll(unlearnt).map { try $0.get() }
        #expect(Set(together.map(\.partition)).count <= 2, "learnt after its first record: \(Set(together.map(\.partition)))")

        // Sticky records too large to gain from sharing a record batch go by key.
        let large = kafka.records(40, keys: 40, valueSize: StickyPartitions.largestRecord + 1).map { record -> KafkaOutgoingRecord in
            var record = record
            record.sticky = true
            return record
        }
        let byKey = try await producer.sendAll(large).map { try $0.get() }
        #expect(Set(byKey.map(\.partition)).count == 4)

        // Consumed with their keys and values as produced.
        let consumer = try kafka.consumer(group: "sticky")
        let consumed = await take(241, from: consumer) { consumer.markDone($0) }
        await consumer.close()
        #expect(consumed.count == 241)
        #expect(Set(consumed.filter { $0.index < 100 }.map(\.key)) == Set((0..<50).map { Data("key-\($0)".utf8) }))
    }

    @Test("the records of a topic being learnt wait at one gate, until it opens a set time after the learning began, not that time each")
    func learningWaitIsBounded() async throws {
        let kafka = try KafkaFixture(brokers: 1, partitions: 4)
        let other = "test.\(UUID().uuidString.lowercased())"
        try kafka.cluster.createTopic(other, partitions: 4, replicationFactor: 1)
        var configuration = KafkaProducerConfiguration(bootstrapServers: kafka.cluster.bootstrapServers)
        configuration.deliveryTimeout = .seconds(4)
        configuration.learningWait = .seconds(2)
        configuration.firstRecordLearning = .seconds(10)
        let producer = try KafkaProducer.make(configuration: configuration, logger: testLogger)
        // No broker answers: the learning lasts its whole time, 10 s.
        try kafka.cluster.setBrokerDown(1)
        let records = (0..<20).map { KafkaOutgoingRecord(topic: other, key: "k\($0)", value: Data("v".utf8)) }
        let sending = Task { await producer.sendAll(records) }
        try await Task.sleep(for: .milliseconds(500))
        #expect(producer.inFlightCount == 0, "held at the gate, which opens 2 s after the learning began")
        #expect(producer.isLearning(other))
        let handedOver = await eventually(timeout: .seconds(6)) { producer.inFlightCount == 20 }
        let stillLearning = producer.isLearning(other)
        #expect(handedOver, "every record handed over once the gate opened: \(producer.inFlightCount)")
        #expect(stillLearning, "while the learning was still under way")
        let results = await sending.value
        #expect(results.allSatisfy { if case .failure = $0 { true } else { false } }, "no broker took them")
        await producer.shutdown()
    }
}
