import Foundation
import PushKafka
import PushTestSupport
import ServiceLifecycle
import ServiceLifecycleTestKit
import Testing

@Suite("Graceful shutdown", .timeLimit(.minutes(2)))
struct GracefulShutdownTests {
    @Test("the producer flushes records in flight before it stops")
    func producerFlushes() async throws {
        let kafka = try KafkaFixture(partitions: 2)
        let producer = try kafka.producer()
        // Slow brokers keep the records in flight when the shutdown comes: slow enough that all
        // 1,000 are handed over before the first is acknowledged, even while the suite's other
        // tests hold both cores (at 300 ms, a `make test` once had the first acknowledged
        // before the last was handed over, and the count never read 1,000).
        for broker in 1...3 { try kafka.cluster.setBrokerLatency(Int32(broker), .seconds(2)) }

        try await testGracefulShutdown { trigger in
            let running = Task { try await producer.run() }
            let sending = Task { await producer.sendAll(kafka.records(1_000)) }
            #expect(await eventually { producer.inFlightCount == 1_000 })
            trigger.triggerGracefulShutdown()
            try await running.value
            let results = await sending.value
            #expect(results.allSatisfy { (try? $0.get()) != nil }, "every record was acknowledged before the producer stopped")
        }
        // After shutdown nothing more is taken.
        let late = await #expect(throws: KafkaError.self) { try await producer.send(kafka.records(1)[0]) }
        #expect(late?.kind == .shutDown)

        for broker in 1...3 { try kafka.cluster.setBrokerLatency(Int32(broker), .zero) }
        let consumer = try kafka.consumer(group: "flushed")
        let consumed = await take(1_000, from: consumer)
        await consumer.close()
        #expect(Set(consumed.map(\.index)) == Set(0..<1_000))
    }

    @Test("the consumer commits what is done, ends its records, and leaves the rest to the group")
    func consumerCommitsAndStops() async throws {
        let kafka = try KafkaFixture(partitions: 1)
        let producer = try kafka.producer()
        for result in await producer.sendAll(kafka.records(100)) { _ = try result.get() }
        let consumer = try kafka.consumer(group: "graceful")

        try await testGracefulShutdown { trigger in
            let running = Task { try await consumer.run() }
            let processing = Task {
                var done = 0
                for await record in consumer.records {
                    if done < 40 {
                        consumer.markDone(record)
                        done += 1
                        if done == 40 { trigger.triggerGracefulShutdown() }
                    }
                }
                return done
            }
            try await running.value
            // The sequence ended by itself when the consumer closed.
            #expect(await processing.value == 40)
        }

        let next = try kafka.consumer(group: "graceful")
        let rest = await take(60, from: next)
        await next.close()
        #expect(rest.map(\.index) == Array(40..<100))
    }
}
