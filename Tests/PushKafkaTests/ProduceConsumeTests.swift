import Foundation
import Logging
import PushKafka
import PushTestSupport
import Testing

@Suite("Producing and consuming on the embedded cluster", .timeLimit(.minutes(2)))
struct ProduceConsumeTests {
    @Test("10,000 keyed records: every one acknowledged, consumed exactly once, in order per partition")
    func tenThousandRecordsExactlyOnceInOrder() async throws {
        let kafka = try KafkaFixture(partitions: 4)
        let producer = try kafka.producer()
        let reports = await producer.sendAll(kafka.records(10_000))
        let acknowledged = try reports.map { try $0.get() }
        #expect(acknowledged.count == 10_000)
        #expect(Set(acknowledged.map { "\($0.partition):\($0.offset)" }).count == 10_000)

        let consumer = try kafka.consumer(group: "exactly-once")
        let consumed = await take(10_000, from: consumer) { consumer.markDone($0) }
        await consumer.close()
        var seen: [Int] = []
        var lastOffset: [Int32: Int64] = [:]
        var lastIndexPerKey: [Data: Int] = [:]
        var partitionOfKey: [Data: Int32] = [:]
        for record in consumed {
            #expect(record.offset > lastOffset[record.partition, default: -1], "offsets go forward in \(record.partition)")
            lastOffset[record.partition] = record.offset
            let key = try #require(record.key)
            #expect(record.index > lastIndexPerKey[key, default: -1], "records of one key keep their order")
            lastIndexPerKey[key] = record.index
            #expect(partitionOfKey[key, default: record.partition] == record.partition, "a key stays on one partition")
            partitionOfKey[key] = record.partition
            #expect(record.header("index") == Data("\(record.index)".utf8))
            seen.append(record.index)
        }
        #expect(seen.count == 10_000)
        #expect(Set(seen) == Set(0..<10_000))
        #expect(Set(lastOffset.keys).count == 4, "the keys spread over every partition")
    }

    @Test("a member that stops without marking records done leaves them to the next member")
    func unfinishedRecordsAreDeliveredAgain() async throws {
        let kafka = try KafkaFixture(partitions: 2)
        let producer = try kafka.producer()
        for result in await producer.sendAll(kafka.records(200)) { _ = try result.get() }

        // The first member finishes the first 50 records of each partition and no more.
        let first = try kafka.consumer(group: "redeliver")
        let handedOut = await take(200, from: first)
        try #require(handedOut.count == 200)
        var finished: Set<Int> = []
        for partition in Set(handedOut.map(\.partition)) {
            for record in handedOut.filter({ $0.partition == partition }).prefix(50) {
                finished.insert(record.index)
                first.markDone(record)
            }
        }
        await first.close()
        #expect(finished.count == 100)

        let second = try kafka.consumer(group: "redeliver")
        let again = await take(100, from: second) { second.markDone($0) }
        await second.close()
        #expect(Set(again.map(\.index)) == Set(0..<200).subtracting(finished), "exactly the unfinished records come again")
        #expect(again.count == 100)
    }

    @Test("records finished out of order never move the committed offset past an unfinished one")
    func outOfOrderCompletionDoesNotSkip() async throws {
        let kafka = try KafkaFixture(partitions: 1)
        let producer = try kafka.producer()
        for result in await producer.sendAll(kafka.records(10)) { _ = try result.get() }

        let first = try kafka.consumer(group: "out-of-order")
        let batch = await take(10, from: first)
        try #require(batch.count == 10)
        // Everything but record 3 is done.
        for record in batch where record.index != 3 { first.markDone(record) }
        try await first.commit()
        await first.close()

        let second = try kafka.consumer(group: "out-of-order")
        let again = await take(7, from: second, timeout: .seconds(10)).map(\.index)
        await second.close()
        #expect(again == Array(3..<10))
    }

    @Test("two members split the partitions; one leaves mid-stream; together they see every record")
    func twoMembersOneLeaves() async throws {
        let kafka = try KafkaFixture(partitions: 6)
        let producer = try kafka.producer()
        let a = try kafka.consumer(group: "pair")
        let b = try kafka.consumer(group: "pair")
        let seenByA = Collected()
        let seenByB = Collected()

        let taskB = Task {
            for await record in b.records {
                await seenByB.append(record)
                b.markDone(record)
            }
        }
        // A takes 300 records, then leaves the group in the middle of the stream.
        let taskA = Task {
            for await record in a.records {
                await seenByA.append(record)
                a.markDone(record)
                if await seenByA.count == 300 { break }
            }
            await a.close()
        }
        // A rebalance on a loaded machine can take a while: the wait is for the outcome.
        let bothAssigned = await eventually(timeout: .seconds(60)) {
            !a.assignment.isEmpty && !b.assignment.isEmpty && a.assignment.count + b.assignment.count == 6
        }
        #expect(bothAssigned, "both members get partitions")
        #expect(Set(a.assignment).isDisjoint(with: Set(b.assignment)))

        for result in await producer.sendAll(kafka.records(3_000, keys: 600)) { _ = try result.get() }
        await taskA.value
        let allSeen = await eventually(timeout: .seconds(60)) {
            let indices = Set(await seenByA.records.map(\.index)).union(await seenByB.records.map(\.index))
            return indices.count == 3_000
        }
        taskB.cancel()
        await taskB.value
        await b.close()
        #expect(allSeen, "every record is seen by one member or the other")
        #expect(await seenByA.count == 300)
        #expect(await seenByB.count >= 2_700)
    }

    @Test("a producer told its topics learns their partitions as it starts, not on its first record to each")
    func topicsLearntAhead() async throws {
        let kafka = try KafkaFixture(partitions: 4)
        let other = "test.\(UUID().uuidString.lowercased())"
        try kafka.cluster.createTopic(other, partitions: 4, replicationFactor: 3)
        let handler = CapturingLogHandler()
        var configuration = KafkaProducerConfiguration(bootstrapServers: kafka.cluster.bootstrapServers)
        configuration.topics = [kafka.topic]
        // librdkafka logs "Topic … partition count changed from 0 to 4" when it learns one.
        configuration.additionalProperties = ["debug": "topic"]
        let producer = try KafkaProducer.make(configuration: configuration, logger: Logger(label: "capture") { _ in handler })
        func learnt(_ topic: String) -> Bool {
            handler.entries.contains { $0.metadata["kafka.message"].map { $0.contains(topic) && $0.contains("partition count changed") } ?? false }
        }
        let running = Task { try await producer.run() }
        // Generous: under the whole suite, many embedded clusters share the two cores.
        #expect(await eventually(timeout: .seconds(45)) { learnt(kafka.topic) }, "learnt as the producer starts")
        #expect(!learnt(other), "a topic it was not told of is not learnt before its first record")
        try await producer.send(KafkaOutgoingRecord(topic: other, key: "k", value: Data("v".utf8)))
        #expect(learnt(other))
        #expect(!handler.entries.contains { $0.level >= .warning && $0.message != "librdkafka" })
        running.cancel()
        await producer.shutdown()
    }
}

@Suite("Backpressure", .timeLimit(.minutes(2)))
struct BackpressureTests {
    @Test("a paused partition yields nothing until it is resumed; the others go on")
    func pauseAndResume() async throws {
        let kafka = try KafkaFixture(partitions: 2)
        let producer = try kafka.producer()
        let consumer = try kafka.consumer(group: "backpressure")
        let collected = Collected()
        let consuming = Task {
            for await record in consumer.records {
                await collected.append(record)
                consumer.markDone(record)
            }
        }
        #expect(await eventually { consumer.assignment.count == 2 })
        let paused = KafkaTopicPartition(topic: kafka.topic, partition: 0)
        try consumer.pause([paused])

        let records = kafka.records(20)
        let split = records.enumerated().map { index, record in
            var record = record
            record.partition = Int32(index % 2)
            return record
        }
        for result in await producer.sendAll(split) { _ = try result.get() }
        #expect(await eventually { await collected.count == 10 }, "partition 1's records arrive")
        // Give partition 0 every chance to deliver while paused: it must not.
        try await Task.sleep(for: .seconds(1))
        #expect(await collected.records.allSatisfy { $0.partition == 1 })

        try consumer.resume([paused])
        #expect(await eventually { await collected.count == 20 }, "partition 0's records arrive after resume")
        #expect(Set(await collected.records.map(\.index)) == Set(0..<20))
        consuming.cancel()
        await consuming.value
        await consumer.close()
    }
}
