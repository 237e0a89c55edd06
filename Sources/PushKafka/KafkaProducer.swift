import Foundation
import Logging
import ServiceLifecycle
import Synchronization

/// An idempotent producer (`acks=all`) whose sends return only once the broker has
/// acknowledged the record.
///
/// As a `Service` it runs until graceful shutdown, then flushes what is in flight.
public final class KafkaProducer: Service, Sendable {
    private let client: RDKafkaClient
    private let deliveries: DeliveryWaiters
    private let poller: PollLoop
    private let configuration: KafkaProducerConfiguration
    private let logger: Logger
    private let isShutDown = Atomic<Bool>(false)
    /// Where sticky records go, per topic.
    private let sticky: StickyPartitions

    private init(client: RDKafkaClient, deliveries: DeliveryWaiters, configuration: KafkaProducerConfiguration, logger: Logger) {
        self.client = client
        self.deliveries = deliveries
        self.configuration = configuration
        self.logger = logger
        self.poller = PollLoop(client: client, name: "pushhub.kafka.producer.poll")
        self.sticky = StickyPartitions(window: max(.milliseconds(2), configuration.linger * 2))
    }

    deinit {
        // A deinit cannot wait; the poll thread holds the client until it has left librdkafka.
        poller.requestStop()
    }

    public static func make(configuration: KafkaProducerConfiguration, logger: Logger) throws(KafkaError) -> KafkaProducer {
        let deliveries = DeliveryWaiters()
        let client = try RDKafkaClient.makeProducer(properties: configuration.properties, deliveries: deliveries, logger: logger)
        return KafkaProducer(client: client, deliveries: deliveries, configuration: configuration, logger: logger)
    }

    /// Produces one record and returns when the broker acknowledged it.
    /// - Throws: `KafkaError` with kind `.delivery` when it was not acknowledged in time.
    @discardableResult
    public func send(_ record: KafkaOutgoingRecord) async throws(KafkaError) -> KafkaDeliveryReport {
        try await sendAll([record])[0].get()
    }

    /// Produces many records at once and waits for all their delivery reports, one result
    /// per record in the same order. The high-throughput path: records are batched by
    /// librdkafka instead of waiting for each acknowledgement in turn.
    public func sendAll(_ records: [KafkaOutgoingRecord]) async -> [Result<KafkaDeliveryReport, KafkaError>] {
        let group = DeliveryGroup(count: records.count)
        for (index, record) in records.enumerated() {
            if let error = await enqueue(record, group: group, index: index) {
                group.complete(index, with: .failure(error))
            }
        }
        let results = await group.wait()
        KafkaMetrics.produced(records, results)
        return results
    }

    /// Learns `topics`' partitions and leaders now, so that the first record to each is not
    /// held while librdkafka learns them (about 0.3 s on the embedded cluster, for every
    /// topic's first record after a start). Best effort: when the brokers do not answer in
    /// time, each topic is learnt on its first record as before.
    public func prepare(topics: [String], timeout: Duration = .seconds(5)) async {
        let (code, partitions) = await client.learnTopics(topics, timeout: timeout)
        sticky.learn(partitions)
        if code != .noError {
            logger.warning("Kafka topics not learnt ahead of their first records", metadata: ["kafka.error": "\(code)"])
        }
    }

    /// Whether a broker answers within `timeout`.
    public func isReachable(timeout: Duration = .seconds(2)) async -> Bool {
        await client.isReachable(timeout: timeout)
    }

    /// Produces many records at once and returns when every one was acknowledged.
    /// - Throws: the first record's `KafkaError` that was not acknowledged.
    public func sendAllAcknowledged(_ records: [KafkaOutgoingRecord]) async throws(KafkaError) {
        for result in await sendAll(records) { _ = try result.get() }
    }

    /// Hands one record to librdkafka, waiting while its local queue is full.
    private func enqueue(_ record: KafkaOutgoingRecord, group: DeliveryGroup, index: Int) async -> KafkaError? {
        let deadline = ContinuousClock.now + configuration.deliveryTimeout
        while true {
            if isShutDown.load(ordering: .relaxed) {
                return KafkaError(kind: .shutDown, context: "the producer is shut down; record for \(record.topic) not sent")
            }
            let id = deliveries.register(group, index: index)
            let partition = record.partition ?? sticky.partition(for: record)
            var code = client.produce(
                topic: record.topic, partition: partition, key: record.key, value: record.value, headers: record.headers, deliveryID: id)
            if code == .unknownPartition, record.partition == nil, partition != nil {
                // The topic has fewer partitions than were learnt (made again smaller): by key.
                sticky.forget(record.topic)
                code = client.produce(
                    topic: record.topic, partition: nil, key: record.key, value: record.value, headers: record.headers, deliveryID: id)
            }
            if code == .noError { return nil }
            // Not taken: no report will come for this id.
            let removed = deliveries.cancel(id)
            precondition(removed, "a record librdkafka refused has no delivery report")
            guard code == .queueFull, ContinuousClock.now < deadline else {
                return KafkaError(kind: .delivery, code: code, context: "could not produce to \(record.topic)")
            }
            try? await Task.sleep(for: .milliseconds(2))
        }
    }

    /// Records handed to librdkafka whose delivery report has not arrived yet.
    public var inFlightCount: Int { deliveries.outstanding }

    /// Waits until every record handed over so far is acknowledged or failed.
    public func flush(timeout: Duration) async throws(KafkaError) {
        let code = await client.flush(timeout: timeout)
        if code != .noError {
            throw KafkaError(kind: .delivery, code: code, context: "flush did not finish within \(timeout)")
        }
    }

    /// Stops taking records, flushes what is in flight (up to the delivery time-out), and
    /// fails whatever could still not be delivered. Idempotent.
    public func shutdown() async {
        guard !isShutDown.exchange(true, ordering: .relaxed) else { return }
        do {
            try await flush(timeout: configuration.deliveryTimeout)
        } catch {
            logger.error("Kafka producer shut down with undelivered records", metadata: ["kafka.error": "\(error)"])
        }
        client.purgeQueuedAndInFlight()
        // Serve the delivery reports the purge produced, then fail anything left.
        client.poll(timeoutMilliseconds: 0)
        await poller.stop()
        deliveries.failAll(with: KafkaError(kind: .shutDown, context: "the producer shut down before the record was acknowledged"))
    }

    public func run() async throws {
        if !configuration.topics.isEmpty { await prepare(topics: configuration.topics) }
        try? await gracefulShutdown()
        await shutdown()
    }
}

/// A dedicated thread serving a handle's callbacks with `poll`. The thread holds the client
/// until it exits, so the handle outlives the loop even when its owner goes first.
final class PollLoop: Sendable {
    /// Whether the thread has exited, and the callers of `stop` waiting for it to.
    private struct ExitState {
        var done = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let stopped = Atomic<Bool>(false)
    private let exitState = Mutex(ExitState())

    init(client: RDKafkaClient, name: String) {
        let thread = Thread { [self] in
            while !self.stopped.load(ordering: .relaxed) {
                client.poll(timeoutMilliseconds: 100)
            }
            let waiters = self.exitState.withLock { state -> [CheckedContinuation<Void, Never>] in
                state.done = true
                let waiters = state.waiters
                state.waiters = []
                return waiters
            }
            for waiter in waiters { waiter.resume() }
        }
        thread.name = name
        thread.start()
    }

    /// Tells the thread to stop and returns once it has left librdkafka. Suspends instead of
    /// blocking, so the cooperative pool keeps its thread. Idempotent.
    func stop() async {
        requestStop()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            // The thread may exit before this runs: `done` tells, under the same lock it is set with.
            let exited = exitState.withLock { state -> Bool in
                if state.done { return true }
                state.waiters.append(continuation)
                return false
            }
            if exited { continuation.resume() }
        }
    }

    /// Tells the thread to stop after its current poll, without waiting (for `deinit`).
    func requestStop() {
        stopped.store(true, ordering: .relaxed)
    }
}
