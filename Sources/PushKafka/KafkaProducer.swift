import CRdKafka
import Foundation
import Logging
import PushModel
import ServiceLifecycle
import Synchronization

/// An idempotent producer (`acks=all`) whose sends return only once the broker has
/// acknowledged the record.
///
/// As a `Service` it runs until graceful shutdown, then flushes what is in flight.
public final class KafkaProducer: Service, Sendable {
    private let client: RDKafkaClient
    private let deliveries: DeliveryWaiters
    private let poller: EventPoller
    private let configuration: KafkaProducerConfiguration
    private let logger: Logger
    private let isShutDown = Atomic<Bool>(false)
    /// Set once shutdown stopped serving delivery reports, before it failed the waiters left.
    private let reportsStopped = Atomic<Bool>(false)
    /// Where sticky records go, per topic.
    private let sticky: StickyPartitions
    /// Topics learnt (ahead, or as their first record came) or being learnt, and those the
    /// brokers gave no partitions for, until when their records do not ask again.
    private let topicsLearnt = Mutex<[String: Learning]>([:])
    private enum Learning {
        case learnt
        case learning(LearningGate)
        case failed(retryAfter: ContinuousClock.Instant)
    }
    /// How long after a failed learning a topic's records go without asking again.
    static let learningRetry: Duration = .seconds(10)

    private init(client: RDKafkaClient, deliveries: DeliveryWaiters, configuration: KafkaProducerConfiguration, logger: Logger) {
        self.client = client
        self.deliveries = deliveries
        self.configuration = configuration
        self.logger = logger
        self.poller = EventPoller(client: client, sweep: configuration.pollSweep)
        self.sticky = StickyPartitions(window: max(.milliseconds(2), configuration.linger * 2))
    }

    deinit {
        // The poller holds the client while its event callback is on: it is turned off here.
        poller.stop()
        // This is usually the client's last reference (a drain still queued holds another):
        // `rd_kafka_destroy` joins librdkafka's threads, which is not work for one of Swift's
        // pool threads.
        BlockingCalls.release(client)
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

    /// Learns `topics`' partitions and leaders now, in one metadata request, so that the
    /// first record to each is not held while librdkafka learns them (about 0.3 s on the
    /// embedded cluster, for every topic's first record after a start), and its sticky records
    /// share a partition. Best effort: a topic the brokers gave no partitions for in time is
    /// asked for again when a record comes for it, at most every `learningRetry`.
    public func prepare(topics: [String], timeout: Duration = .seconds(5)) async {
        await topicsLearnt.withLock { learn(topics, timeout: timeout, in: &$0) }.task.value
    }

    /// Begins learning `topics` (their records meanwhile wait at the gate) and returns the
    /// learning; called with `topicsLearnt` locked, which the learning takes to record how it
    /// ended, so that ending always comes after this beginning. It records it only for the
    /// topics still waiting at its own gate: a later learning of one (a `prepare` while a
    /// record's learning is under way) is not overwritten by an earlier one's end.
    private func learn(_ topics: [String], timeout: Duration, in learnt: inout [String: Learning]) -> (
        gate: LearningGate, task: Task<Void, Never>
    ) {
        let gate = LearningGate()
        for topic in topics { learnt[topic] = .learning(gate) }
        let wait = configuration.learningWait
        let closing = Task {
            try? await Task.sleep(for: wait)
            gate.open()
        }
        let task = Task { [self] in
            let (code, partitions) = await client.learnTopics(topics, timeout: timeout)
            let retryAfter = ContinuousClock.now + Self.learningRetry
            topicsLearnt.withLock { learnt in
                // Under the lock, so that a record that finds the topic learnt finds its partitions.
                let ended = topics.filter { topic in
                    guard case .learning(let current) = learnt[topic], current === gate else { return false }
                    learnt[topic] = partitions[topic] == nil ? .failed(retryAfter: retryAfter) : .learnt
                    return true
                }
                sticky.learn(partitions.filter { ended.contains($0.key) })
            }
            closing.cancel()
            gate.open()
            guard !isShutDown.load(ordering: .relaxed) else { return }
            if code != .noError {
                logger.warning("Kafka topics not learnt", metadata: ["kafka.error": "\(code)", "kafka.topics": "\(topics)"])
            } else if let missing = topics.first(where: { partitions[$0] == nil }) {
                logger.debug("the brokers gave no partitions for a Kafka topic", metadata: ["kafka.topic": "\(missing)"])
            }
        }
        return (gate, task)
    }

    /// Learns a topic the producer was not told of when its first record comes, by a metadata
    /// request of its own, and holds that record and any other for the topic until it is
    /// learnt, and at most `learningWait` from when the learning began. Left to librdkafka,
    /// the record would wait longer, and go by key; once learnt, the topic's records go at
    /// once, and sticky ones share a partition. A topic the brokers gave no partitions for
    /// (they did not answer, or answered with an error for it) has its records go without
    /// waiting, and is asked for again by a record after `learningRetry`.
    ///
    /// A producer learns ahead only the topics it is told of: librdkafka's broker thread goes
    /// through every partition it knows, with a lock each, at every turn of its loop (about
    /// 1.5 turns a record at 800 single-user sends a second), so partitions of topics a
    /// process never writes cost it on every record it does write.
    private func learnOnFirstRecord(_ topic: String) async {
        let gate = topicsLearnt.withLock { learnt -> LearningGate? in
            switch learnt[topic] {
            case .learnt: return nil
            case .learning(let gate): return gate
            case .failed(let retryAfter) where ContinuousClock.now < retryAfter: return nil
            case .failed, nil: return learn([topic], timeout: configuration.firstRecordLearning, in: &learnt).gate
            }
        }
        await gate?.wait()
    }

    /// Whether `topic` is being learnt.
    func isLearning(_ topic: String) -> Bool {
        topicsLearnt.withLock { if case .learning = $0[topic] { true } else { false } }
    }

    /// Whether `topic`'s partitions were learnt (ahead, or after its first record).
    func hasLearnt(_ topic: String) -> Bool {
        topicsLearnt.withLock { if case .learnt = $0[topic] { true } else { false } }
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
        // Once a record, before the shut-down check: one held at the gate as shutdown began
        // is refused.
        if !isShutDown.load(ordering: .relaxed) { await learnOnFirstRecord(record.topic) }
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
            if code == .noError {
                // A shutdown that stopped serving reports while this record was handed over may
                // have failed every waiter already, and nothing serves reports after it: the
                // record fails unless its report came. (One handed over while shutdown still
                // flushes is served as usual.)
                if reportsStopped.load(ordering: .acquiring), deliveries.cancel(id) {
                    return KafkaError(kind: .shutDown, context: "the producer shut down as the record for \(record.topic) was handed over")
                }
                return nil
            }
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
        poller.stop()
        reportsStopped.store(true, ordering: .releasing)
        deliveries.failAll(with: KafkaError(kind: .shutDown, context: "the producer shut down before the record was acknowledged"))
    }

    public func run() async throws {
        if !configuration.topics.isEmpty { await prepare(topics: configuration.topics) }
        try? await gracefulShutdown()
        await shutdown()
    }
}

/// Where the records of a topic being learnt wait: it opens when the learning ended, or when
/// they have waited long enough, whichever is first, and lets every waiter go at once.
final class LearningGate: Sendable {
    private struct State {
        var isOpen = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())

    func open() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            guard !state.isOpen else { return [] }
            state.isOpen = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func wait() async {
        if state.withLock({ $0.isOpen }) { return }
        await withCheckedContinuation { continuation in
            let isOpen = state.withLock { state -> Bool in
                if !state.isOpen { state.waiters.append(continuation) }
                return state.isOpen
            }
            if isOpen { continuation.resume() }
        }
    }
}

/// Serves a handle's main queue (delivery reports, errors) when librdkafka says it holds
/// something, on Dispatch's global queue (whose threads Swift's pool shares on Linux), with no
/// thread of its own waiting in `rd_kafka_poll`.
///
/// librdkafka calls `wake` from the thread that puts an event on the empty queue (a broker's,
/// as it reads an acknowledgement); `wake` only schedules a drain, which polls without
/// waiting until the queue is empty. A thread blocked in `rd_kafka_poll` was woken for every
/// event instead, and then woke the pool for the waiters: at 2,000 single-user sends a second
/// the ingress's poll thread was woken 720 times a second. A slow safety poll (`sweep`) serves
/// anything an event did not announce.
///
/// It serves the handle's main queue, which must not be forwarded elsewhere (as
/// `rd_kafka_poll_set_consumer` does): only a queue's final destination announces. `stop` must
/// never be called from `wake`, which runs under the queue's lock.
final class EventPoller: @unchecked Sendable {
    // @unchecked: a Dispatch timer source is thread-safe; every property is set once.
    private let client: RDKafkaClient
    /// The handle's main queue, held for its length and its event callback.
    private let queue: RDKafkaQueue
    /// Whether a drain is scheduled or running: events in the meantime schedule no other.
    private let scheduled = Atomic<Bool>(false)
    private let stopped = Atomic<Bool>(false)
    private let timer: any DispatchSourceTimer

    /// `sweep`: how often the queue is served whether or not an event was announced.
    /// `pollsPerTurn`: polls that served reports a drain makes before it queues itself again.
    init(client: RDKafkaClient, sweep: Duration = .milliseconds(500), pollsPerTurn: Int = 16) {
        self.client = client
        self.pollsPerTurn = max(1, pollsPerTurn)
        queue = RDKafkaQueue(pointer: rd_kafka_queue_get_main(client.handle), client: client)
        timer = DispatchSource.makeTimerSource(queue: .global())
        // Retained for the callback until `stop` turns it off (under the queue's lock, so no
        // call is running or can start after).
        rd_kafka_queue_cb_event_enable(queue.pointer, eventCallback, Unmanaged.passRetained(self).toOpaque())
        timer.setEventHandler { [weak self] in
            guard let self, rd_kafka_queue_length(self.queue.pointer) > 0 else { return }
            self.wake()
        }
        let milliseconds = Int(sweep.wholeMilliseconds)
        timer.schedule(
            deadline: .now() + .milliseconds(milliseconds), repeating: .milliseconds(milliseconds), leeway: .milliseconds(max(1, milliseconds / 10)))
        timer.resume()
        // Events queued before the callback was set announced nothing.
        wake()
    }

    /// Schedules a drain unless one is scheduled or running. Called by librdkafka with the
    /// queue locked: it must not call librdkafka, nor wait.
    func wake() {
        guard !stopped.load(ordering: .relaxed), !scheduled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        DispatchQueue.global().async { self.drain() }
    }

    /// Polls until the queue is empty. An event queued after the last poll but before the flag
    /// was lowered found it raised and scheduled nothing, so the queue is looked at once more.
    /// While reports keep coming it hands over after `pollsPerTurn` polls that served some,
    /// queueing itself again, so it never holds one of the pool's threads for as long as a
    /// broadcast's acknowledgements last.
    private func drain() {
        repeat {
            var polls = 0
            while client.poll(timeoutMilliseconds: 0) > 0 {
                polls += 1
                if polls == pollsPerTurn, !stopped.load(ordering: .relaxed) {
                    // Still scheduled: the next turn goes behind the jobs waiting now.
                    DispatchQueue.global().async { self.drain() }
                    return
                }
            }
            scheduled.store(false, ordering: .sequentiallyConsistent)
        } while !stopped.load(ordering: .relaxed) && rd_kafka_queue_length(queue.pointer) > 0
            && !scheduled.exchange(true, ordering: .acquiringAndReleasing)
    }

    /// Polls that served reports one drain makes before it queues itself again.
    private let pollsPerTurn: Int

    /// Stops serving the queue: no callback runs after it returns, and a drain under way ends
    /// with its poll. Idempotent.
    func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        rd_kafka_queue_cb_event_enable(queue.pointer, nil, nil)
        timer.cancel()
        Unmanaged.passUnretained(self).release()
    }
}

/// librdkafka's call when an event lands on a handle's empty main queue.
private let eventCallback: @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?) -> Void = { _, opaque in
    guard let opaque else { return }
    Unmanaged<EventPoller>.fromOpaque(opaque).takeUnretainedValue().wake()
}
