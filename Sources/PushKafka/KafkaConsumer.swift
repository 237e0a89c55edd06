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
    private let progress: ConsumerProgress
    /// Every blocking call on the handle (fetch, close) runs here, one at a time.
    private let fetchQueue = DispatchQueue(label: "pushhub.kafka.consumer.fetch")
    private let configuration: KafkaConsumerConfiguration
    private let logger: Logger

    private init(client: RDKafkaClient, queue: RDKafkaQueue, progress: ConsumerProgress, configuration: KafkaConsumerConfiguration, logger: Logger) {
        self.client = client
        self.queue = queue
        self.progress = progress
        self.configuration = configuration
        self.logger = logger
    }

    /// Creates a member of `configuration.groupID` subscribed to `topics`.
    public static func make(
        configuration: KafkaConsumerConfiguration, topics: [String], logger: Logger
    ) throws(KafkaError) -> KafkaConsumer {
        let callbacks = ClientCallbacks(logger: logger)
        let client = try RDKafkaClient.make(
            type: RD_KAFKA_CONSUMER, properties: configuration.properties, callbacks: callbacks
        ) { conf in
            rd_kafka_conf_set_rebalance_cb(conf, rebalanceCallback)
        }
        let progress = ConsumerProgress()
        callbacks.rebalance.withLock { handler in
            handler = { rk, code, list in progress.rebalance(rk, code, list, logger: logger) }
        }
        rd_kafka_poll_set_consumer(client.handle)
        let code = withPartitionList(topics.map { ($0, RD_KAFKA_PARTITION_UA, nil) }) { list in
            rd_kafka_subscribe(client.handle, list)
        }
        guard code == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(.operation, code, "could not subscribe to \(topics.joined(separator: ", "))")
        }
        guard let queue = rd_kafka_queue_get_consumer(client.handle) else {
            throw KafkaError(kind: .clientCreation, context: "the consumer has no queue")
        }
        return KafkaConsumer(
            client: client, queue: RDKafkaQueue(pointer: queue, client: client), progress: progress, configuration: configuration, logger: logger)
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

    private func next() async -> KafkaRecord? {
        while true {
            switch progress.handOut() {
            case .record(let record): return record
            case .closed: return nil
            case .empty: break
            }
            if Task.isCancelled { return nil }
            let batch = await BlockingCalls.run(on: fetchQueue) { [self] in fetchBatch() }
            progress.buffer(batch)
        }
    }

    /// Counts what was read and, at most once a second, sets the lag of the partitions read.
    private func observe(_ records: [KafkaRecord]) {
        KafkaMetrics.consumed(records, group: configuration.groupID)
        let due = lagState.withLock { state -> [KafkaTopicPartition: Int64]? in
            for record in records { state.next[record.topicPartition] = record.offset + 1 }
            guard ContinuousClock.now - state.last >= .seconds(1) else { return nil }
            state.last = .now
            return state.next
        }
        if let due { KafkaMetrics.lag(handle: client.handle, group: configuration.groupID, positions: due) }
    }

    /// Whether a broker answers within `timeout`.
    public func isReachable(timeout: Duration = .seconds(2)) async -> Bool {
        await client.isReachable(timeout: timeout)
    }

    /// One poll of librdkafka's queue (≤ 100 ms); serves rebalances as a side effect.
    private func fetchBatch() -> (generation: UInt64, records: [KafkaRecord]) {
        guard !progress.isClosed else { return (0, []) }
        let capacity = configuration.fetchBatchSize
        var messages = [UnsafeMutablePointer<rd_kafka_message_t>?](repeating: nil, count: capacity)
        let count = rd_kafka_consume_batch_queue(queue.pointer, 100, &messages, capacity)
        // Read after the call: a rebalance served inside it already moved the generation,
        // and librdkafka drops messages fetched under the old assignment.
        let generation = progress.generation
        guard count > 0 else { return (generation, []) }
        var records: [KafkaRecord] = []
        records.reserveCapacity(count)
        for message in messages.prefix(count) {
            guard let message else { continue }
            defer { rd_kafka_message_destroy(message) }
            if message.pointee.err != RD_KAFKA_RESP_ERR_NO_ERROR {
                if message.pointee.err != RD_KAFKA_RESP_ERR__PARTITION_EOF {
                    logger.warning(
                        "Kafka consumer error",
                        metadata: ["kafka.error": "\(KafkaErrorCode(message.pointee.err))"])
                }
                continue
            }
            records.append(Self.record(from: message, generation: generation))
        }
        observe(records)
        return (generation, records)
    }

    private static func record(from message: UnsafeMutablePointer<rd_kafka_message_t>, generation: UInt64) -> KafkaRecord {
        let m = message.pointee
        let topic = m.rkt.map { String(cString: rd_kafka_topic_name($0)) } ?? ""
        let key = m.key.map { Data(bytes: $0, count: m.key_len) }
        let value = m.payload.map { Data(bytes: $0, count: m.len) } ?? Data()
        var headers: [KafkaHeader] = []
        var headerList: OpaquePointer? = nil
        if rd_kafka_message_headers(message, &headerList) == RD_KAFKA_RESP_ERR_NO_ERROR, let headerList {
            var index = 0
            var name: UnsafePointer<CChar>? = nil
            var valuePointer: UnsafeRawPointer? = nil
            var size = 0
            while rd_kafka_header_get_all(headerList, index, &name, &valuePointer, &size) == RD_KAFKA_RESP_ERR_NO_ERROR {
                headers.append(
                    KafkaHeader(
                        key: name.map { String(cString: $0) } ?? "",
                        value: valuePointer.map { Data(bytes: $0, count: size) }))
                index += 1
            }
        }
        var timestampType = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE
        let timestamp = rd_kafka_message_timestamp(message, &timestampType)
        return KafkaRecord(
            topic: topic, partition: m.partition, offset: m.offset, key: key, value: value,
            headers: headers,
            timestampMilliseconds: timestampType == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE ? nil : timestamp,
            generation: generation)
    }

    /// Says the caller is finished with `record`. Its offset is stored (and later committed)
    /// once every earlier record of its partition is done too. A record from before a
    /// rebalance is ignored: its partition's new owner will see it again.
    public func markDone(_ record: KafkaRecord) {
        guard let offset = progress.markDone(record) else { return }
        let code = withPartitionList([(record.topic, record.partition, offset)]) { list in
            rd_kafka_offsets_store(client.handle, list)
        }
        if code != RD_KAFKA_RESP_ERR_NO_ERROR {
            logger.debug(
                "offset not stored",
                metadata: ["kafka.topic": "\(record.topic)", "kafka.partition": "\(record.partition)", "kafka.error": "\(KafkaErrorCode(code))"])
        }
    }

    /// Stops fetching from `partitions` (backpressure) until `resume`. A rebalance clears it.
    public func pause(_ partitions: [KafkaTopicPartition]) throws(KafkaError) {
        try changeFlow(partitions, "pause", rd_kafka_pause_partitions)
    }

    public func resume(_ partitions: [KafkaTopicPartition]) throws(KafkaError) {
        try changeFlow(partitions, "resume", rd_kafka_resume_partitions)
    }

    /// Pauses or resumes; librdkafka reports a partition it does not have in that partition's
    /// own error, which is turned into a thrown error rather than a silent no-op.
    private func changeFlow(
        _ partitions: [KafkaTopicPartition], _ verb: String,
        _ call: (OpaquePointer, UnsafeMutablePointer<rd_kafka_topic_partition_list_t>) -> rd_kafka_resp_err_t
    ) throws(KafkaError) {
        let handle = client.handle
        let failure = withPartitionList(partitions.map { ($0.topic, $0.partition, nil) }) { list -> rd_kafka_resp_err_t in
            let code = call(handle, list)
            guard code == RD_KAFKA_RESP_ERR_NO_ERROR, let elements = list.pointee.elems else { return code }
            return (0..<Int(list.pointee.cnt)).map { elements[$0].err }.first { $0 != RD_KAFKA_RESP_ERR_NO_ERROR } ?? RD_KAFKA_RESP_ERR_NO_ERROR
        }
        guard failure == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(.operation, failure, "could not \(verb) \(partitions)") }
    }

    /// The partitions assigned to this member now.
    public var assignment: [KafkaTopicPartition] { progress.assignment }

    /// Commits the stored offsets now and waits for the broker's answer.
    public func commit() async throws(KafkaError) {
        let client = self.client
        let code = await BlockingCalls.run { rd_kafka_commit(client.handle, nil, 0) }
        guard code == RD_KAFKA_RESP_ERR_NO_ERROR || code == RD_KAFKA_RESP_ERR__NO_OFFSET else {
            throw KafkaError(.operation, code, "could not commit offsets")
        }
    }

    /// Stops handing out records, commits what is done, and leaves the group. Idempotent.
    public func close() async {
        guard progress.close() else { return }
        let client = self.client
        let code = await BlockingCalls.run(on: fetchQueue) { rd_kafka_consumer_close(client.handle) }
        if code != RD_KAFKA_RESP_ERR_NO_ERROR {
            logger.warning("Kafka consumer did not close cleanly", metadata: ["kafka.error": "\(KafkaErrorCode(code))"])
        }
    }

    public func run() async throws {
        try? await gracefulShutdown()
        await close()
    }
}

private let rebalanceCallback:
    @convention(c) (OpaquePointer?, rd_kafka_resp_err_t, UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?, UnsafeMutableRawPointer?) -> Void = {
        rk, code, list, _ in
        guard let rk else { return }
        let handler = ClientCallbacks.from(rk)?.rebalance.withLock { $0 }
        if let handler {
            handler(rk, code, list)
        } else {
            rd_kafka_assign(rk, code == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS ? list : nil)
        }
    }
