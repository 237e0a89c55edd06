import Foundation
import Logging
import PushKafka
import PushModel
import Synchronization

/// Reads what `pushhub.results` says of one send, from the topic's end: a debug send's results
/// and `pushhub send --wait`'s answer. Made before the send is published. Its reader is a
/// consumer group of its own, so every partition is read whichever ingress or command asks:
/// one per tail for a command, or a `ResultsWatcher` an ingress shares among its tails.
public final class SendResultsTail: Sendable {
    public let notificationId: String
    /// The send's result batches, read from the moment the tail is made.
    let batches: AsyncStream<ResultBatch>
    let isPositioned: @Sendable (Duration) async -> Bool
    let stop: @Sendable () async -> Void

    init(
        notificationId: String, batches: AsyncStream<ResultBatch>, positioned: @escaping @Sendable (Duration) async -> Bool,
        stop: @escaping @Sendable () async -> Void
    ) {
        self.notificationId = notificationId
        self.batches = batches
        isPositioned = positioned
        self.stop = stop
    }

    /// A tail with a reader of its own (a command's one send).
    public convenience init(servers: [String], topics: PushTopics, notificationId: String, logger: Logger) throws {
        let consumer = try ResultsWatcher.reader(servers: servers, topics: topics, group: "pushhub-tail-\(notificationId)", logger: logger)
        let (batches, continuation) = AsyncStream.makeStream(of: ResultBatch.self)
        // Reading is what gets the reader its partitions: it starts now.
        let reading = Task {
            for await record in consumer.records where record.keyString == notificationId {
                guard let batch = ResultsWatcher.batch(record, of: notificationId) else { continue }
                continuation.yield(batch)
            }
            continuation.finish()
        }
        self.init(
            notificationId: notificationId, batches: batches, positioned: { await consumer.positioned(within: $0) },
            stop: {
                reading.cancel()
                await reading.value
                await consumer.close()
            })
    }

    /// Whether the reader has its partitions, so nothing published from now on is missed.
    public func positioned(within timeout: Duration) async -> Bool {
        await isPositioned(timeout)
    }

    /// Hands each of the send's result batches to `take`, from `state`, until it says done
    /// or `timeout` passed; then closes the tail. Returns the state and whether it was done.
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

    /// Stops reading for this send (which ends `read`).
    public func close() async { await stop() }
}

/// One reader of `pushhub.results` an ingress shares among the sends whose results it waits
/// for (debug sends), in a consumer group of its own, from the topic's end: started by the
/// first tail, it routes each record to the tail of its notification id, and closes once no
/// tail was open for `idleAfter`. A debug send then pays for no group of its own (on Kafka,
/// a group's first join waits about 3 s for others).
public final class ResultsWatcher: Sendable {
    private struct State {
        var reader: KafkaConsumer?
        var reading: Task<Void, Never>?
        /// Each open tail by notification id, with its number.
        var tails: [String: (number: Int, continuation: AsyncStream<ResultBatch>.Continuation)] = [:]
        /// Counts tails: each one's number, and a closing check knows whether one came since.
        var generation = 0
    }

    private let state = Mutex(State())
    let servers: [String]
    let topics: PushTopics
    let logger: Logger
    let idleAfter: Duration
    /// The group, this process's own.
    let group = "pushhub-tail-\(RandomID.make())"

    public init(servers: [String], topics: PushTopics, idleAfter: Duration = .seconds(60), logger: Logger) {
        self.servers = servers
        self.topics = topics
        self.idleAfter = idleAfter
        self.logger = logger
    }

    /// A reader from the topic's end, quiet about its group, with one metrics series for all.
    static func reader(servers: [String], topics: PushTopics, group: String, logger: Logger) throws -> KafkaConsumer {
        var logger = logger
        logger.logLevel = max(logger.logLevel, .warning)
        var configuration = KafkaConsumerConfiguration(bootstrapServers: servers, groupID: group)
        configuration.offsetReset = .latest
        configuration.metricsGroup = "pushhub-tail"
        configuration.prefetchBytes = 1 << 20
        return try KafkaConsumer.make(configuration: configuration, topics: [topics.results], logger: logger)
    }

    static func batch(_ record: KafkaRecord, of id: String) -> ResultBatch? {
        guard let batch = try? WireCoding.decode(ResultBatch.self, from: record.value), batch.notificationId == id else { return nil }
        return batch
    }

    /// Whether the shared reader is open (it closes once idle).
    public var isReading: Bool { state.withLock { $0.reader != nil } }

    /// A tail of `notificationId`'s results; the shared reader starts with the first.
    public func tail(of notificationId: String) throws -> SendResultsTail {
        let (batches, continuation) = AsyncStream.makeStream(of: ResultBatch.self)
        let (reader, number) = try state.withLock { state -> (KafkaConsumer, Int) in
            state.tails[notificationId]?.continuation.finish()
            state.generation += 1
            state.tails[notificationId] = (state.generation, continuation)
            if let reader = state.reader { return (reader, state.generation) }
            let reader = try Self.reader(servers: servers, topics: topics, group: group, logger: logger)
            state.reader = reader
            state.reading = Task { [weak self] in
                for await record in reader.records { self?.route(record) }
            }
            return (reader, state.generation)
        }
        return SendResultsTail(
            notificationId: notificationId, batches: batches, positioned: { await reader.positioned(within: $0) },
            stop: { [weak self] in await self?.forget(notificationId, number: number, continuation: continuation) })
    }

    /// Hands a record to the tail of its notification id, if one is open.
    private func route(_ record: KafkaRecord) {
        guard let id = record.keyString, let continuation = state.withLock({ $0.tails[id]?.continuation }), let batch = Self.batch(record, of: id)
        else {
            return
        }
        continuation.yield(batch)
    }

    /// Closes a tail; the reader closes once no tail was open for `idleAfter`.
    private func forget(_ id: String, number: Int, continuation: AsyncStream<ResultBatch>.Continuation) async {
        continuation.finish()
        let generation = state.withLock { state -> Int? in
            // Only this tail (a later tail of the id may have taken its place).
            if state.tails[id]?.number == number { state.tails[id] = nil }
            return state.tails.isEmpty ? state.generation : nil
        }
        guard let generation else { return }
        // Checked later, without the tail waiting for it.
        Task { [weak self] in
            guard let self else { return }
            try? await Task.sleep(for: idleAfter)
            await closeIfIdle(since: generation)
        }
    }

    /// Closes the reader if no tail came since the one numbered `generation` closed.
    private func closeIfIdle(since generation: Int) async {
        let closing = state.withLock { state -> (KafkaConsumer, Task<Void, Never>?)? in
            guard state.tails.isEmpty, state.generation == generation, let reader = state.reader else { return nil }
            state.reader = nil
            defer { state.reading = nil }
            return (reader, state.reading)
        }
        guard let (reader, reading) = closing else { return }
        reading?.cancel()
        await reading?.value
        await reader.close()
    }
}
