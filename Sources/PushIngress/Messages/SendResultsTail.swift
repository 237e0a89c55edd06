import Foundation
import Logging
import PushKafka
import PushModel

/// Reads what `pushhub.results` says of one send, from the topic's end: a debug send's results
/// and `pushhub send --wait`'s answer. A consumer group of its own, so every partition is
/// read whichever ingress or command asks; made before the send is published.
public final class SendResultsTail: Sendable {
    let consumer: KafkaConsumer
    public let notificationId: String
    /// The send's result batches, read from the moment the tail is made (reading is what
    /// gets the reader its partitions).
    let batches: AsyncStream<ResultBatch>
    let reading: Task<Void, Never>

    public init(servers: [String], topics: PushTopics, notificationId: String, logger: Logger) throws {
        // Its group's comings and goings are not news.
        var logger = logger
        logger.logLevel = max(logger.logLevel, .warning)
        var configuration = KafkaConsumerConfiguration(bootstrapServers: servers, groupID: "pushhub-tail-\(notificationId)")
        configuration.offsetReset = .latest
        // One series for every tail, and a small read-ahead: it wants one send's few results.
        configuration.metricsGroup = "pushhub-tail"
        configuration.prefetchBytes = 1 << 20
        let consumer = try KafkaConsumer.make(configuration: configuration, topics: [topics.results], logger: logger)
        self.consumer = consumer
        self.notificationId = notificationId
        let (batches, continuation) = AsyncStream.makeStream(of: ResultBatch.self)
        self.batches = batches
        reading = Task {
            for await record in consumer.records where record.keyString == notificationId {
                guard let batch = try? WireCoding.decode(ResultBatch.self, from: record.value), batch.notificationId == notificationId else {
                    continue
                }
                continuation.yield(batch)
            }
            continuation.finish()
        }
    }

    /// Whether the reader has its partitions, so nothing published from now on is missed.
    public func positioned(within timeout: Duration) async -> Bool {
        await consumer.positioned(within: timeout)
    }

    /// Hands each of the send's result batches to `take`, from `state`, until it says done
    /// or `timeout` passed; then closes the reader. Returns the state and whether it was done.
    public func read<State: Sendable>(
        from state: State, within timeout: Duration, _ take: @escaping @Sendable (inout State, ResultBatch) -> Bool
    ) async -> (state: State, done: Bool) {
        let batches = self.batches
        let taking = Task {
            var state = state
            for await batch in batches {
                if take(&state, batch) { return (state, true) }
                if Task.isCancelled { break }
            }
            return (state, false)
        }
        let timer = Task {
            try await Task.sleep(for: timeout)
            await close()
        }
        let answer = await withTaskCancellationHandler {
            await taking.value
        } onCancel: {
            taking.cancel()
        }
        timer.cancel()
        await close()
        return answer
    }

    /// Stops reading and closes the reader (which ends `read`).
    public func close() async {
        reading.cancel()
        await reading.value
        await consumer.close()
    }
}
