import Synchronization

/// Where a producer sends records that may go to any partition of their topic (`sticky`): one
/// partition for `window`, or for `recordsPerPartition` records, whichever ends first, then
/// the next, round the topic's partitions from a random start. Records produced close together
/// so share one record batch, as Kafka's own producer does with records that have no key.
///
/// Kafka reads and stores a batch at a time, so a batch of many small records costs it about
/// what a batch of one does. With keys spread over 32 partitions, single-user sends at 2,000 a
/// second made a batch of one record each (a partition's next record came after the linger
/// time). librdkafka's embedded cluster pays for every batch it keeps as well: it finds a fetch
/// offset by walking its partition's batches from the oldest.
///
/// A topic whose partitions were not learnt (`learn`) is left to the partitioner, by key, and
/// so is a record larger than `largestRecord`: it makes a record batch worth its cost alone.
final class StickyPartitions: Sendable {
    /// Sticky records larger than this go by key. A broadcast's DeliveryBatches (tens of KB
    /// each) grouped ten milliseconds at a time made record batches of a megabyte, and the
    /// embedded cluster answers a fetch with one record batch a partition: the APNs worker's
    /// peak RSS in a broadcast to a million rose from 72 to 85 MB, the cluster's from 255 to
    /// 415 MB, and the broadcast took 2 s longer.
    static let largestRecord = 16 << 10

    private struct Topic {
        var partitions: Int32
        var current: Int32
        var records = 0
        var until: ContinuousClock.Instant
    }

    let window: Duration
    let recordsPerPartition: Int
    private let topics = Mutex<[String: Topic]>([:])

    init(window: Duration, recordsPerPartition: Int = 1000) {
        self.window = window
        self.recordsPerPartition = recordsPerPartition
    }

    /// Takes the partition counts of topics, as a metadata answer gave them.
    func learn(_ partitions: [String: Int32]) {
        let now = ContinuousClock.now
        topics.withLock { topics in
            for (name, count) in partitions where count > 0 && topics[name]?.partitions != count {
                topics[name] = Topic(partitions: count, current: Int32.random(in: 0..<count), until: now + window)
            }
        }
    }

    /// Forgets a topic's partitions (a produce found fewer): its records go by key again.
    func forget(_ topic: String) {
        _ = topics.withLock { $0.removeValue(forKey: topic) }
    }

    /// Where the producer sends `record`: nil (its key's partition, or its own) unless it is
    /// sticky, without a partition, and no larger than `largestRecord`.
    func partition(for record: KafkaOutgoingRecord) -> Int32? {
        guard record.sticky, record.partition == nil, record.value.count <= Self.largestRecord else { return nil }
        return partition(of: record.topic)
    }

    /// The partition for the next sticky record to `topic`; nil when its partitions are unknown.
    func partition(of topic: String, now: ContinuousClock.Instant = .now) -> Int32? {
        topics.withLock { topics -> Int32? in
            guard var entry = topics[topic] else { return nil }
            if now >= entry.until || entry.records >= recordsPerPartition {
                entry.current = (entry.current + 1) % entry.partitions
                entry.records = 0
                entry.until = now + window
            }
            entry.records += 1
            topics[topic] = entry
            return entry.current
        }
    }
}
