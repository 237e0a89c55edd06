import CRdKafka
import Logging
import Synchronization

/// The consumer's view of its assignment: which generation it is in, the records fetched but
/// not yet handed out, and per partition which handed-out records are done.
///
/// Kept apart from `KafkaConsumer` so the rebalance callback can hold it without keeping
/// the consumer alive.
final class ConsumerProgress: Sendable {
    enum HandOut {
        case record(KafkaRecord)
        case empty
        case closed
    }

    private struct State {
        var generation: UInt64 = 0
        var partitions: [KafkaTopicPartition: OffsetProgress] = [:]
        var buffered: [KafkaRecord] = []
        var bufferHead = 0
        var closed = false
    }

    private let state = Mutex(State())

    var generation: UInt64 { state.withLock { $0.generation } }
    var isClosed: Bool { state.withLock { $0.closed } }
    var assignment: [KafkaTopicPartition] { state.withLock { Array($0.partitions.keys) } }

    /// Marks the consumer closed; false when it already was.
    func close() -> Bool {
        state.withLock { state in
            defer { state.closed = true }
            return !state.closed
        }
    }

    func buffer(_ batch: (generation: UInt64, records: [KafkaRecord])) {
        state.withLock { state in
            guard batch.generation == state.generation else { return }
            state.buffered = batch.records
            state.bufferHead = 0
        }
    }

    /// The next buffered record of the current assignment, now counted as handed out.
    func handOut() -> HandOut {
        state.withLock { state in
            if state.closed { return .closed }
            while state.bufferHead < state.buffered.count {
                let record = state.buffered[state.bufferHead]
                state.bufferHead += 1
                let partition = record.topicPartition
                guard record.generation == state.generation, state.partitions[partition] != nil else { continue }
                state.partitions[partition]!.handedOut(record.offset)
                return .record(record)
            }
            state.buffered.removeAll(keepingCapacity: true)
            state.bufferHead = 0
            return .empty
        }
    }

    /// The offset to store after `record` is done, if the partition's position moved.
    func markDone(_ record: KafkaRecord) -> Int64? {
        state.withLock { state in
            guard record.generation == state.generation else { return nil }
            return state.partitions[record.topicPartition]?.markDone(record.offset)
        }
    }

    /// Runs on the fetch thread, inside librdkafka's poll.
    func rebalance(
        _ rk: OpaquePointer, _ code: rd_kafka_resp_err_t,
        _ list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?, logger: Logger
    ) {
        let changed = partitions(of: list)
        switch code {
        case RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS:
            // librdkafka takes the assignment first, so a partition shown as assigned can be
            // paused at once. No record is handed out meanwhile: this runs on the fetch thread.
            rd_kafka_assign(rk, list)
            state.withLock { state in
                state.generation += 1
                state.partitions = Dictionary(uniqueKeysWithValues: changed.map { ($0, OffsetProgress()) })
                state.buffered.removeAll()
                state.bufferHead = 0
            }
            logger.info("Kafka partitions assigned", metadata: ["kafka.partitions": "\(changed.map(\.description).sorted())"])
        default:
            state.withLock { state in
                state.generation += 1
                state.partitions.removeAll()
                state.buffered.removeAll()
                state.bufferHead = 0
            }
            // What is done must be committed before another member starts on these partitions.
            let commit = rd_kafka_commit(rk, nil, 0)
            if commit != RD_KAFKA_RESP_ERR_NO_ERROR && commit != RD_KAFKA_RESP_ERR__NO_OFFSET {
                logger.warning("offsets not committed on revoke", metadata: ["kafka.error": "\(KafkaErrorCode(commit))"])
            }
            logger.info("Kafka partitions revoked", metadata: ["kafka.partitions": "\(changed.map(\.description).sorted())"])
            rd_kafka_assign(rk, nil)
        }
    }
}
