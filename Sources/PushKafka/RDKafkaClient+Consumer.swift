import CRdKafka
import Foundation

/// The consumer's calls on its handle.
extension RDKafkaClient {
    /// Routes the main queue to the consumer queue and joins the group on `topics`.
    func subscribe(_ topics: [String]) throws(KafkaError) {
        rd_kafka_poll_set_consumer(handle)
        let code = withPartitionList(topics.map { ($0, RD_KAFKA_PARTITION_UA, nil) }) { list in
            rd_kafka_subscribe(handle, list)
        }
        guard code == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(.operation, code, "could not subscribe to \(topics.joined(separator: ", "))")
        }
    }

    /// The consumer's queue, which fetches records and serves rebalances.
    func consumerQueue() throws(KafkaError) -> RDKafkaQueue {
        guard let queue = rd_kafka_queue_get_consumer(handle) else {
            throw KafkaError(kind: .clientCreation, context: "the consumer has no queue")
        }
        return RDKafkaQueue(pointer: queue, client: self)
    }

    /// Up to `capacity` records from `queue`, waiting at most `timeoutMilliseconds`. Blocks:
    /// call it on a Dispatch thread. Errors other than end-of-partition go to `onError`.
    func consumeBatch(
        _ queue: RDKafkaQueue, timeoutMilliseconds: Int32, capacity: Int, generation: () -> UInt64, onError: (KafkaErrorCode) -> Void
    ) -> (generation: UInt64, records: [KafkaRecord]) {
        var messages = [UnsafeMutablePointer<rd_kafka_message_t>?](repeating: nil, count: capacity)
        let count = rd_kafka_consume_batch_queue(queue.pointer, Int32(timeoutMilliseconds), &messages, capacity)
        // Read after the call: a rebalance served inside it already moved the generation,
        // and librdkafka drops messages fetched under the old assignment.
        let current = generation()
        guard count > 0 else { return (current, []) }
        var records: [KafkaRecord] = []
        records.reserveCapacity(count)
        for message in messages.prefix(count) {
            guard let message else { continue }
            defer { rd_kafka_message_destroy(message) }
            if message.pointee.err != RD_KAFKA_RESP_ERR_NO_ERROR {
                if message.pointee.err != RD_KAFKA_RESP_ERR__PARTITION_EOF { onError(KafkaErrorCode(message.pointee.err)) }
                continue
            }
            records.append(Self.record(from: message, generation: current))
        }
        return (current, records)
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
                headers.append(KafkaHeader(key: name.map { String(cString: $0) } ?? "", value: valuePointer.map { Data(bytes: $0, count: size) }))
                index += 1
            }
        }
        var timestampType = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE
        let timestamp = rd_kafka_message_timestamp(message, &timestampType)
        return KafkaRecord(
            topic: topic, partition: m.partition, offset: m.offset, key: key, value: value, headers: headers,
            timestampMilliseconds: timestampType == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE ? nil : timestamp, generation: generation)
    }

    /// Stores `offset` for the next commit.
    func storeOffset(_ offset: Int64, of partition: KafkaTopicPartition) -> KafkaErrorCode? {
        let code = withPartitionList([(partition.topic, partition.partition, offset)]) { list in rd_kafka_offsets_store(handle, list) }
        return code == RD_KAFKA_RESP_ERR_NO_ERROR ? nil : KafkaErrorCode(code)
    }

    /// Stops (`pause: true`) or restarts fetching from `partitions`. librdkafka reports a
    /// partition it does not have in that partition's own error, which is thrown here.
    func changeFlow(_ partitions: [KafkaTopicPartition], pause: Bool) throws(KafkaError) {
        let failure = withPartitionList(partitions.map { ($0.topic, $0.partition, nil) }) { list -> rd_kafka_resp_err_t in
            let code = pause ? rd_kafka_pause_partitions(handle, list) : rd_kafka_resume_partitions(handle, list)
            guard code == RD_KAFKA_RESP_ERR_NO_ERROR, let elements = list.pointee.elems else { return code }
            return (0..<Int(list.pointee.cnt)).map { elements[$0].err }.first { $0 != RD_KAFKA_RESP_ERR_NO_ERROR } ?? RD_KAFKA_RESP_ERR_NO_ERROR
        }
        guard failure == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(.operation, failure, "could not \(pause ? "pause" : "resume") \(partitions)")
        }
    }

    /// Commits the stored offsets and waits for the broker. Blocks: call it on a Dispatch thread.
    /// Nothing to commit is not an error.
    func commitStored() -> KafkaErrorCode? {
        let code = rd_kafka_commit(handle, nil, 0)
        return code == RD_KAFKA_RESP_ERR_NO_ERROR || code == RD_KAFKA_RESP_ERR__NO_OFFSET ? nil : KafkaErrorCode(code)
    }

    /// Commits and leaves the group. Blocks: call it on a Dispatch thread.
    func closeConsumer() -> KafkaErrorCode? {
        let code = rd_kafka_consumer_close(handle)
        return code == RD_KAFKA_RESP_ERR_NO_ERROR ? nil : KafkaErrorCode(code)
    }
}

/// A group rebalance, as librdkafka reports it to the consumer.
enum Rebalance: Sendable {
    case assigned([KafkaTopicPartition])
    case revoked([KafkaTopicPartition])
}

extension RDKafkaClient {
    /// Sends the consumer's rebalances to `callbacks.rebalance` and carries out the action it
    /// returns, on the fetch thread inside librdkafka's poll. Set before the handle is made.
    static func routeRebalances(_ conf: OpaquePointer) {
        rd_kafka_conf_set_rebalance_cb(conf, rebalanceCallback)
    }
}

private let rebalanceCallback:
    @convention(c) (OpaquePointer?, rd_kafka_resp_err_t, UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?, UnsafeMutableRawPointer?) -> Void = {
        rk, code, list, _ in
        guard let rk else { return }
        let event: Rebalance = code == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS ? .assigned(partitions(of: list)) : .revoked(partitions(of: list))
        let callbacks = ClientCallbacks.from(rk)
        let handler = callbacks?.rebalance.withLock { $0 }
        // A new assignment is taken before the state machine hears of it, so a partition it
        // lists can be paused at once; this runs on the fetch thread, so no record is handed
        // out meanwhile.
        if case .assigned = event { rd_kafka_assign(rk, list) }
        let action = handler?(event) ?? (code == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS ? .none : .commitThenUnassign)
        switch action {
        case .none:
            break
        case .commitThenUnassign:
            // What is done must be committed before another member starts on these partitions.
            let commit = rd_kafka_commit(rk, nil, 0)
            if commit != RD_KAFKA_RESP_ERR_NO_ERROR && commit != RD_KAFKA_RESP_ERR__NO_OFFSET {
                callbacks?.logger.warning("offsets not committed on revoke", metadata: ["kafka.error": "\(KafkaErrorCode(commit))"])
            }
            rd_kafka_assign(rk, nil)
        }
    }
