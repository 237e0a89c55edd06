import Foundation
import PushKafka
import ServiceLifecycle
import ServiceLifecycleTestKit
import Synchronization
import Testing

@Suite("Processing records", .timeLimit(.minutes(2)))
struct ProcessEachTests {
    final class Observed: Sendable {
        let state = Mutex<(running: Int, most: Int, done: Set<Int>, failedOnce: Set<Int>)>((0, 0, [], []))
    }

    @Test("up to `maximum` records at a time, a failing one retried without holding the others, everything done committed at shutdown")
    func concurrently() async throws {
        let kafka = try KafkaFixture(partitions: 1)
        let producer = try kafka.producer()
        for result in await producer.sendAll(kafka.records(120)) { _ = try result.get() }
        let consumer = try kafka.consumer(group: "each")
        let observed = Observed()

        try await testGracefulShutdown { trigger in
            let running = Task { try await consumer.run() }
            let processing = Task {
                await consumer.processEach(maximum: 8, logger: testLogger) { record in
                    observed.state.withLock { $0.running += 1; $0.most = max($0.most, $0.running) }
                    defer { observed.state.withLock { $0.running -= 1 } }
                    try await Task.sleep(for: .milliseconds(20))
                    // Record 5 fails once; it is retried while later records go on.
                    let fails = observed.state.withLock { record.index == 5 && $0.failedOnce.insert(5).inserted }
                    if fails { throw CancellationError() }
                    let count = observed.state.withLock { $0.done.insert(record.index); return $0.done.count }
                    if count == 120 { trigger.triggerGracefulShutdown() }
                }
            }
            await processing.value
            try await running.value
        }
        let (most, done) = observed.state.withLock { ($0.most, $0.done) }
        #expect(most == 8, "at most 8 at a time, and more than one")
        #expect(done == Set(0..<120))

        // The group's committed offset is past every record: a new member starts with new ones.
        for result in await producer.sendAll(kafka.records(130).suffix(10)) { _ = try result.get() }
        let next = try kafka.consumer(group: "each")
        let rest = await take(10, from: next)
        await next.close()
        #expect(rest.map(\.index) == Array(120..<130))
    }
}
