/// The consumer's assignment and commit state as a state machine: each event changes the state
/// and returns what the client must do, so the rules are tested without a cluster and every
/// librdkafka call stays in `RDKafkaClient`.
///
/// It knows which generation of the assignment the consumer is in, the records fetched but not
/// yet handed out, and per partition which handed-out records are done.
struct ConsumerStateMachine: Sendable {
    /// What the client does after the state machine saw a rebalance.
    enum RebalanceAction: Equatable, Sendable {
        /// Nothing more: the client took the new assignment before telling the state machine,
        /// so every partition the machine lists is one librdkafka has (and can pause).
        case none
        /// Commit what is done, then give the partitions up: another member starts on them next.
        case commitThenUnassign
    }

    /// What the next record is.
    enum HandOut: Sendable {
        case record(KafkaRecord)
        /// Nothing buffered: fetch more.
        case empty
        case closed
    }

    /// An offset to store for commit.
    struct StoreOffset: Equatable, Sendable {
        var partition: KafkaTopicPartition
        var offset: Int64
    }

    private(set) var generation: UInt64 = 0
    private var partitions: [KafkaTopicPartition: OffsetProgress] = [:]
    private var buffered: [KafkaRecord] = []
    private var bufferHead = 0
    private(set) var isClosed = false

    var assignment: [KafkaTopicPartition] { Array(partitions.keys) }

    /// The group gave this member `assigned`, and the client took it.
    mutating func assigned(_ assigned: [KafkaTopicPartition]) -> RebalanceAction {
        generation += 1
        partitions = Dictionary(assigned.map { ($0, OffsetProgress()) }) { first, _ in first }
        dropBuffer()
        return .none
    }

    /// The group took this member's partitions back (or the member is leaving).
    mutating func revoked() -> RebalanceAction {
        generation += 1
        partitions.removeAll()
        dropBuffer()
        return .commitThenUnassign
    }

    /// Keeps a fetched batch, unless a rebalance came between the fetch and now.
    mutating func fetched(_ records: [KafkaRecord], generation fetchedIn: UInt64) {
        guard fetchedIn == generation else { return }
        buffered = records
        bufferHead = 0
    }

    /// The next buffered record of the current assignment, now counted as handed out.
    mutating func handOut() -> HandOut {
        if isClosed { return .closed }
        while bufferHead < buffered.count {
            let record = buffered[bufferHead]
            bufferHead += 1
            guard record.generation == generation, partitions[record.topicPartition] != nil else { continue }
            partitions[record.topicPartition]!.handedOut(record.offset)
            return .record(record)
        }
        dropBuffer()
        return .empty
    }

    /// The offset to store after `record` is done, when its partition's position moved. A
    /// record from before a rebalance gives none: its partition's next owner sees it again.
    mutating func markDone(_ record: KafkaRecord) -> StoreOffset? {
        guard record.generation == generation, let offset = partitions[record.topicPartition]?.markDone(record.offset) else { return nil }
        return StoreOffset(partition: record.topicPartition, offset: offset)
    }

    /// Whether the client must close the consumer now (false when it already did).
    mutating func close() -> Bool {
        defer { isClosed = true }
        return !isClosed
    }

    private mutating func dropBuffer() {
        buffered.removeAll(keepingCapacity: true)
        bufferHead = 0
    }
}
