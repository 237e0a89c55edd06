import CRdKafka
import Dispatch
import Foundation
import Logging
import ServiceLifecycle
import Synchronization

/// A consumer-group member that stores a record's offset only when the caller marks it done.
///
/// Stored offsets are committed periodically, on partition revoke and on close, so a
/// rebalance or restart repeats unfinished records and never skips one. Iterate `records`
/// from one task. As a `Service` it runs until graceful shutdown, then closes: records handed
/// out but not marked done by then are left for the next owner of their partition.
public final class KafkaConsumer: Service, Sendable {
    private let client: RDKafkaClient
    /// librdkafka's consumer queue.
    private let queue: RDKafkaQueue
    private let lagState = Mutex<(last: ContinuousClock.Instant, next: [KafkaTopicPartition: Int64])>((.now, [:]))
    /// How many records the next fetch takes: `fetchBatchSize`, or fewer when the records
    /// of the last fetch were so large that that many would pass `fetchBytes`.
    private let fetchCapacity = Mutex<Int?>(nil)
    /// Whether records come in faster than they are taken (`fetchBatch`).
    private let underLoad = Atomic<Bool>(false)
    /// Whether polls take what is there (`takesWhatIsThereUnderLoad`), for tests.
    var isUnderLoad: Bool { underLoad.load(ordering: .relaxed) }
    /// Under load: when the current interval began, and the records polls took in it. An
    /// interval ends at the first poll 100 ms or more after it began.
    private let loadInterval = Mutex<(start: ContinuousClock.Instant, taken: Int)>((.now, 0))
    private let state: ConsumerState
    /// Every blocking call on the handle (fetch, close) runs here, one at a time.
    private let fetchQueue = DispatchQueue(label: "pushhub.kafka.consumer.fetch")
    let configuration: KafkaConsumerConfiguration
    private let logger: Logger

    private init(client: RDKafkaClient, queue: RDKafkaQueue, state: ConsumerState, configuration: KafkaConsumerConfiguration, logger: Logger) {
        self.client = client
        self.queue = queue
        self.state = state
        self.configuration = configuration
        self.logger = logger
    }

    /// Creates a member of `configuration.groupID` subscribed to `topics`.
    public static func make(
        configuration: KafkaConsumerConfiguration, topics: [String], logger: Logger
    ) throws(KafkaError) -> KafkaConsumer {
        let callbacks = ClientCallbacks(logger: logger)
        let client = try RDKafkaClient.make(
            type: RD_KAFKA_CONSUMER, properties: configuration.properties, callbacks: callbacks, configure: RDKafkaClient.routeRebalances)
        let state = ConsumerState()
        callbacks.rebalance.withLock { handler in
            handler = { event in state.rebalance(event, logger: logger) }
        }
        try client.subscribe(topics)
        let queue = try client.consumerQueue()
        return KafkaConsumer(client: client, queue: queue, state: state, configuration: configuration, logger: logger)
    }

    /// The records of the assigned partitions, in offset order per partition. Ends when the
    /// consumer is closed or the iterating task is cancelled.
    public var records: Records { Records(consumer: self) }

    public struct Records: AsyncSequence, Sendable {
        public typealias Element = KafkaRecord
        let consumer: KafkaConsumer

        public func makeAsyncIterator() -> Iterator { Iterator(consumer: consumer) }

        public struct Iterator: AsyncIteratorProtocol {
            let consumer: KafkaConsumer
            public mutating func next() async -> KafkaRecord? { await consumer.next() }
        }
    }

    /// The records in groups: each group is at most `maximum` records of one poll, in offset
    /// order per partition, handed out together. Ends as `records` does.
    public func recordGroups(maximum: Int) -> RecordGroups { RecordGroups(consumer: self, maximum: max(1, maximum)) }

    public struct RecordGroups: AsyncSequence, Sendable {
        public typealias Element = [KafkaRecord]
        let consumer: KafkaConsumer
        let maximum: Int

        public func makeAsyncIterator() -> Iterator { Iterator(consumer: consumer, maximum: maximum) }

        public struct Iterator: AsyncIteratorProtocol {
            let consumer: KafkaConsumer
            let maximum: Int
            public mutating func next() async -> [KafkaRecord]? { await consumer.nextGroup(maximum: maximum) }
        }
    }

    private func nextGroup(maximum: Int) async -> [KafkaRecord]? {
        while true {
            let taken = state.machine.withLock { machine -> [KafkaRecord]? in
                var group: [KafkaRecord] = []
                while group.count < maximum {
                    switch machine.handOut() {
                    case .record(let record): group.append(record)
                    case .empty: return group
                    case .closed: return group.isEmpty ? nil : group
                    }
                }
                return group
            }
            guard let taken else { return nil }
            if !taken.isEmpty { return taken }
            if Task.isCancelled { return nil }
            let batch = await BlockingCalls.run(on: fetchQueue) { [self] in fetchBatch() }
            state.machine.withLock { $0.fetched(batch.records, generation: batch.generation) }
        }
    }

    private func next() async -> KafkaRecord? {
        while true {
            switch state.machine.withLock({ $0.handOut() }) {
            case .record(let record): return record
            case .closed: return nil
            case .empty: break
            }
            if Task.isCancelled { return nil }
            let batch = await BlockingCalls.run(on: fetchQueue) { [self] in fetchBatch() }
            state.machine.withLock { $0.fetched(batch.records, generation: batch.generation) }
        }
    }

    /// Counts what was read and, at most once a second, sets the lag of the partitions read.
    private func observe(_ records: [KafkaRecord]) {
        KafkaMetrics.consumed(records, group: configuration.metricsGroup ?? configuration.groupID)
        let due = lagState.withLock { state -> [KafkaTopicPartition: Int64]? in
            for record in records { state.next[record.topicPartition] = record.offset + 1 }
            guard ContinuousClock.now - state.last >= .seconds(1) else { return nil }
            state.last = .now
            return state.next
        }
        if let due { KafkaMetrics.lag(client: client, group: configuration.metricsGroup ?? configuration.groupID, positions: due) }
    }

    /// Whether a broker answers within `timeout`.
    public func isReachable(timeout: Duration = .seconds(2)) async -> Bool {
        await client.isReachable(timeout: timeout)
    }

    /// One poll of librdkafka's queue (≤ 100 ms); serves rebalances as a side effect.
    ///
    /// librdkafka's batch poll returns once it holds the whole batch it was asked for, or after
    /// its time. Under light load that gathers what comes in 100 ms into one group, which the
    /// workers work as one run. Under load it stalled a worker's intake: it waited up to 60 ms
    /// for a whole fetch while the records it could have worked were there, and its PNS
    /// connections emptied. So with `takesWhatIsThereUnderLoad`, after a poll that came back
    /// full, polls take what is there without waiting; when nothing is, they wait for the
    /// first record and take what came with it. It ends when a wait brings one record or none,
    /// or when the polls of an interval of 100 ms or more took less than half a batch
    /// (`leavesLoad`): records come slower than gathering them would take in, and a poll that
    /// takes a few at a time costs more than one that gathers. (With the first rule alone, a worker took records a few at a
    /// time for as long as they kept coming: after a broadcast, the APNs worker met 1,200
    /// single-user sends a second that way, at 47 CPU-µs a push against 32. Ending it on any
    /// poll of less than a quarter of a batch cost `make bench-apns` a tenth of its rate.)
    private func fetchBatch() -> (generation: UInt64, records: [KafkaRecord]) {
        guard !state.machine.withLock({ $0.isClosed }) else { return (0, []) }
        // With a byte budget, the first poll takes one record: its size is not known yet, and
        // librdkafka's batch poll waits for a whole batch (500, maybe 30 MB of broadcast
        // batches) or its 100 ms, so a worker's first batch waited the 100 ms.
        let capacity = fetchCapacity.withLock { $0 } ?? (configuration.fetchBytes == nil ? configuration.fetchBatchSize : 1)
        var batch: (generation: UInt64, records: [KafkaRecord])
        if configuration.takesWhatIsThereUnderLoad, underLoad.load(ordering: .relaxed) {
            batch = poll(waiting: 0, capacity: capacity)
            if batch.records.isEmpty {
                batch = poll(waiting: 100, capacity: 1)
                if !batch.records.isEmpty, capacity > 1 {
                    let rest = poll(waiting: 0, capacity: capacity - 1)
                    if rest.generation == batch.generation {
                        batch.records += rest.records
                    } else {
                        // A rebalance between the two polls: the first record is from before it.
                        batch = rest
                    }
                }
                if batch.records.count <= 1 { underLoad.store(false, ordering: .relaxed) }
            }
            let now = ContinuousClock.now
            let leaves = loadInterval.withLock { interval in
                interval.taken += batch.records.count
                guard now - interval.start >= .milliseconds(100) else { return false }
                defer { interval = (now, 0) }
                return Self.leavesLoad(taken: interval.taken, capacity: capacity)
            }
            if leaves { underLoad.store(false, ordering: .relaxed) }
        } else {
            batch = poll(waiting: 100, capacity: capacity)
            if configuration.takesWhatIsThereUnderLoad, batch.records.count >= capacity, capacity > 1 {
                underLoad.store(true, ordering: .relaxed)
                loadInterval.withLock { $0 = (.now, 0) }
            }
        }
        if !batch.records.isEmpty {
            observe(batch.records)
            if let budget = configuration.fetchBytes {
                let average = max(1, batch.records.reduce(0) { $0 + $1.value.count } / batch.records.count)
                fetchCapacity.withLock { $0 = max(1, min(configuration.fetchBatchSize, budget / average)) }
            }
        }
        return batch
    }

    /// Whether polls under load that took `taken` records in an interval (100 ms or more),
    /// `capacity` a poll, end taking what is there: less than half a batch.
    static func leavesLoad(taken: Int, capacity: Int) -> Bool {
        taken * 2 < capacity
    }

    /// One call of librdkafka's batch poll: up to `capacity` records, waiting for them at most
    /// `waiting` milliseconds.
    private func poll(waiting: Int32, capacity: Int) -> (generation: UInt64, records: [KafkaRecord]) {
        client.consumeBatch(queue, timeoutMilliseconds: waiting, capacity: capacity, generation: { state.machine.withLock { $0.generation } }) {
            error in
            logger.warning("Kafka consumer error", metadata: ["kafka.error": "\(error)"])
        }
    }

    /// Says the caller is finished with `record`. Its offset is stored (and later committed)
    /// once every earlier record of its partition is done too. A record from before a
    /// rebalance is ignored: its partition's new owner will see it again.
    public func markDone(_ record: KafkaRecord) {
        guard let store = state.machine.withLock({ $0.markDone(record) }) else { return }
        if let error = client.storeOffset(store.offset, of: store.partition) {
            logger.debug(
                "offset not stored",
                metadata: ["kafka.topic": "\(record.topic)", "kafka.partition": "\(record.partition)", "kafka.error": "\(error)"])
        }
    }

    /// Stops fetching from `partitions` (backpressure) until `resume`. A rebalance clears it.
    public func pause(_ partitions: [KafkaTopicPartition]) throws(KafkaError) {
        try client.changeFlow(partitions, pause: true)
    }

    public func resume(_ partitions: [KafkaTopicPartition]) throws(KafkaError) {
        try client.changeFlow(partitions, pause: false)
    }

    /// The partitions assigned to this member now.
    public var assignment: [KafkaTopicPartition] { state.machine.withLock { $0.assignment } }

    /// Whether this member has partitions and has fetched from each (it knows where it reads
    /// them from): after that, a record produced to them is read even when the group starts
    /// at the end (`latest`).
    public var isPositioned: Bool {
        let partitions = assignment
        return !partitions.isEmpty && partitions.allSatisfy { client.lastSeenHighWatermark(of: $0) != nil }
    }

    /// Waits, at most `timeout`, until `isPositioned`: for a reader of a topic's end (a
    /// group of its own, `latest`) that must see every record produced after this returns.
    /// Records are fetched by whoever iterates `records` meanwhile. False on time-out.
    public func positioned(within timeout: Duration) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !isPositioned {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return true
    }

    /// Commits the stored offsets now and waits for the broker's answer.
    public func commit() async throws(KafkaError) {
        let client = self.client
        let failure = await BlockingCalls.run { client.commitStored() }
        if let failure { throw KafkaError(.operation, failure.cValue, "could not commit offsets") }
    }

    /// Stops handing out records, commits what is done, and leaves the group. Idempotent.
    public func close() async {
        guard state.machine.withLock({ $0.close() }) else { return }
        let client = self.client
        let failure = await BlockingCalls.run(on: fetchQueue) { client.closeConsumer() }
        if let error = failure {
            logger.warning("Kafka consumer did not close cleanly", metadata: ["kafka.error": "\(error)"])
        }
    }

    public func run() async throws {
        try? await gracefulShutdown()
        await close()
    }
}

/// The consumer's state machine, shared with the rebalance handler, which must not keep the
/// consumer alive.
final class ConsumerState: Sendable {
    let machine = Mutex(ConsumerStateMachine())

    /// Runs on the fetch thread, inside librdkafka's poll.
    func rebalance(_ event: Rebalance, logger: Logger) -> ConsumerStateMachine.RebalanceAction {
        switch event {
        case .assigned(let partitions):
            logger.info("Kafka partitions assigned", metadata: ["kafka.partitions": "\(partitions.map(\.description).sorted())"])
            return machine.withLock { $0.assigned(partitions) }
        case .revoked(let partitions):
            logger.info("Kafka partitions revoked", metadata: ["kafka.partitions": "\(partitions.map(\.description).sorted())"])
            return machine.withLock { $0.revoked() }
        }
    }
}
