import CRdKafka
import Foundation
import Logging
import PushMetrics
import PushModel
import Synchronization

/// How much of some topics their consumer groups have not yet committed, and a wait for it to
/// fall under a bound: backpressure from the workers to whoever produces their records.
///
/// librdkafka's embedded cluster keeps at most 5 MiB (and 100,000 record batches) a partition
/// and drops the oldest beyond that, records a lagging group has not read included; a real
/// Kafka keeps them, but a producer that runs far ahead of its consumers only makes later
/// records wait longer. Producers call `reserve` before producing and `produced` after, and
/// wait while a topic's fullest partition holds more than `boundPerPartition` bytes that its
/// group has not committed.
///
/// A partition's backlog is read from the brokers every `refreshInterval` while anyone asks:
/// the group's committed offset (the admin API's `ListConsumerGroupOffsets`, one handle for
/// every group) and the partition's first and next offsets (`rd_kafka_offsets_for_times`).
/// Records this process produced count at their size; records others produced (the ingress's
/// small audiences, other dispatchers) at `otherRecordBytes` each. Records reserved but not
/// yet acknowledged count as spread evenly over the topic's partitions, as keyed records are.
public final class ConsumerBacklog: Sendable {
    public struct Settings: Sendable {
        /// Most bytes a partition may hold that its group has not committed before producers
        /// wait: well under the embedded cluster's 5 MiB.
        public var boundPerPartition: Int = 2 << 20
        /// What a record produced by another process is taken to weigh.
        public var otherRecordBytes = 4 << 10
        /// How old the brokers' figures may be.
        public var refreshInterval: Duration = .milliseconds(200)
        /// How long one reading of the brokers may take.
        public var requestTimeout: Duration = .seconds(5)
        /// How long a group may commit nothing, with records waiting for it, before a topic is
        /// no longer waited for: a group that never reads (workers run in a group of their own
        /// not named in `backlog.groups`, or a platform without workers) must not stop the
        /// dispatcher for ever. It is logged, and watched again once the group commits.
        public var stalledAfter: Duration = .seconds(60)

        public init() {}
    }

    /// A topic and the consumer group whose progress on it counts.
    public struct Watch: Sendable, Hashable {
        public var topic: String
        public var group: String

        public init(topic: String, group: String) {
            self.topic = topic
            self.group = group
        }
    }

    /// A reservation for records about to be produced; give it back through `produced`.
    public struct Reservation: Sendable {
        fileprivate var bytes: [String: Int]
    }

    struct Partition {
        /// Offsets and sizes of this process's records the group has not committed, in order.
        var own: [(offset: Int64, bytes: Int)] = []
        var ownBytes = 0
        /// Where the group's uncommitted records start (its committed offset, or the
        /// partition's first offset when it has none or the log has moved past it).
        var start: Int64 = 0
        /// The partition's next offset, as last read.
        var end: Int64 = 0
    }

    struct Topic {
        var partitions: [Int32: Partition] = [:]
        var reserved = 0
        /// False after a reading failed: unknown is not full (producing fails on its own when
        /// the cluster is away), and this process's records are kept for the next reading.
        var known = true
        /// When the group last committed anything here, or had nothing waiting.
        var progressAt = ContinuousClock.now
        /// Whether it is not waited for now, having made no progress for `stalledAfter`.
        var stalled = false
        /// The uncommitted bytes of its fullest partition, measured when a reading or this
        /// process's records change them, so asking for room costs no walk of the partitions.
        var fullest = 0

        mutating func measure(other: Int) {
            fullest = partitions.values.map { ConsumerBacklog.bytes(of: $0, other: other) }.max() ?? 0
        }
    }

    struct State {
        var topics: [String: Topic] = [:]
        var readAt: ContinuousClock.Instant?
        var reading = false
        var lastFailureLogged: ContinuousClock.Instant?
        /// Since when producers have been waiting, however many wait.
        var waitingSince: ContinuousClock.Instant?
        /// When a wait was last logged at notice: at most one every 30 s, since waits come
        /// and go many times a second while the workers keep pace with the bound.
        var noticedAt: ContinuousClock.Instant?
    }

    public let settings: Settings
    /// One handle asks the brokers for every watch: the topics' offsets, and each group's
    /// commits through the admin API. A handle per group (a consumer naming the group, to
    /// ask `rd_kafka_committed`) had made eight clients in the dispatcher and eight in the
    /// ingress, one per platform: each with its threads, timers and connections, which the
    /// embedded cluster polls on every turn of its loop.
    private let client: RDKafkaClient
    private let groups: [String: String]
    private let state = Mutex(State())
    private let logger: Logger

    /// The handle for every watch; nothing is asked of the brokers until the first wait.
    public init(servers: [String], watches: [Watch], settings: Settings = Settings(), logger: Logger) throws(KafkaError) {
        // A consumer naming a group of its own that it never joins: librdkafka answers a
        // coordinator error of another group's offsets by asking its handle's own group to find
        // its coordinator again, and on a handle without a group (a producer) that crashes
        // (confluentinc/librdkafka#5040).
        client = try RDKafkaClient.make(
            type: RD_KAFKA_CONSUMER,
            properties: [
                "bootstrap.servers": servers.joined(separator: ","), "client.id": "pushhub-backlog", "group.id": "pushhub-backlog",
                "enable.auto.commit": "false",
            ], callbacks: ClientCallbacks(logger: logger))
        self.groups = Dictionary(watches.map { ($0.topic, $0.group) }, uniquingKeysWith: { first, _ in first })
        self.settings = settings
        self.logger = logger
    }

    /// Waits until every topic of `records` that is watched has room for them, then reserves
    /// it. A topic with nothing outstanding always has room, so a record larger than the
    /// bound still goes. Throws only when the task is cancelled.
    public func reserve(_ records: [KafkaOutgoingRecord]) async throws -> Reservation {
        var bytes: [String: Int] = [:]
        for record in records where groups[record.topic] != nil { bytes[record.topic, default: 0] += record.value.count }
        guard !bytes.isEmpty else { return Reservation(bytes: [:]) }
        while true {
            await readIfStale()
            let (full, resumedAfter) = state.withLock { state -> (String?, Duration?) in
                if let full = Self.fullTopic(of: bytes, in: state, settings: settings) {
                    guard state.waitingSince == nil else { return (full, nil) }
                    state.waitingSince = .now
                    guard state.noticedAt.map({ ContinuousClock.now - $0 > .seconds(30) }) ?? true else { return (full, nil) }
                    state.noticedAt = .now
                    return (full, .zero)
                }
                for (topic, count) in bytes { state.topics[topic, default: Topic()].reserved += count }
                defer { state.waitingSince = nil }
                return (nil, state.waitingSince.map { ContinuousClock.now - $0 })
            }
            guard let full else {
                if let resumedAfter {
                    Self.waited.increment(by: Int(resumedAfter.wholeMilliseconds))
                    logger.debug("consumers caught up; producing again", metadata: ["pushhub.waited_ms": "\(resumedAfter.wholeMilliseconds)"])
                }
                return Reservation(bytes: bytes)
            }
            if resumedAfter != nil {
                logger.notice(
                    "consumers are behind; waiting before producing more (logged at most every 30 s)",
                    metadata: [
                        "kafka.topic": "\(full)", "kafka.group": "\(groups[full] ?? "")",
                        "pushhub.bound_bytes_per_partition": "\(settings.boundPerPartition)",
                    ])
            }
            try await Task.sleep(for: settings.refreshInterval)
        }
    }

    static let waited = MetricsRegistry.shared.counter(
        "pushhub_backlog_wait_milliseconds_total", help: "Time producers waited for consumers that were behind (ConsumerBacklog).")

    /// Whether every watched topic among `topics` has room now, without reserving it. It
    /// answers from the last reading at once, and has the brokers read again in the
    /// background only when that is stale: a request's caller never waits on the brokers,
    /// and pays a lock and a look per topic.
    public func hasRoom(in topics: [String]) -> Bool {
        let (full, claimed) = state.withLock { state -> (Bool, Bool) in
            let full = topics.contains { topic in
                groups[topic] != nil && Self.fullTopic(topic, adding: 1, in: state, settings: settings)
            }
            return (full, Self.claimReading(&state, interval: settings.refreshInterval))
        }
        // Claimed under the lock, so one send of a burst starts the reading, not each.
        if claimed { Task { await read() } }
        return !full
    }

    /// Gives back a reservation once its records were produced (or not): `reports` are the
    /// acknowledged ones, with the sizes of `records`.
    public func produced(_ reservation: Reservation, records: [KafkaOutgoingRecord], results: [Result<KafkaDeliveryReport, KafkaError>]) {
        guard !reservation.bytes.isEmpty else { return }
        state.withLock { state in
            for (topic, count) in reservation.bytes { state.topics[topic]?.reserved -= count }
            for (record, result) in zip(records, results) {
                guard case .success(let report) = result, groups[report.topic] != nil else { continue }
                var partition = state.topics[report.topic, default: Topic()].partitions[report.partition, default: Partition()]
                if report.offset >= partition.start {
                    partition.own.append((report.offset, record.value.count))
                    partition.ownBytes += record.value.count
                }
                state.topics[report.topic]!.partitions[report.partition] = partition
            }
            for topic in Set(results.compactMap { try? $0.get().topic }) { state.topics[topic]?.measure(other: settings.otherRecordBytes) }
        }
    }

    /// The bytes not committed of each partition of each watched topic, as last read.
    public func backlog() -> [KafkaTopicPartition: Int] {
        state.withLock { state in
            var bytes: [KafkaTopicPartition: Int] = [:]
            for (topic, entry) in state.topics {
                for (id, partition) in entry.partitions {
                    bytes[KafkaTopicPartition(topic: topic, partition: id)] = Self.bytes(of: partition, other: settings.otherRecordBytes)
                }
            }
            return bytes
        }
    }

    /// The first of `bytes`' topics that has no room for them; nil when all have.
    private static func fullTopic(of bytes: [String: Int], in state: State, settings: Settings) -> String? {
        bytes.keys.sorted().first { fullTopic($0, adding: bytes[$0]!, in: state, settings: settings) }
    }

    /// Whether `topic` has no room for `count` bytes more: its fullest partition, with what is
    /// reserved and `count` spread over its partitions, past the bound. A topic with nothing
    /// outstanding always has room, so a record larger than the bound still goes; one not
    /// read yet, whose reading failed, or whose group stalled is not waited for.
    private static func fullTopic(_ topic: String, adding count: Int, in state: State, settings: Settings) -> Bool {
        guard let entry = state.topics[topic], entry.known, !entry.stalled else { return false }
        guard entry.fullest > 0 || entry.reserved > 0 else { return false }
        return entry.fullest + (entry.reserved + count) / max(1, entry.partitions.count) > settings.boundPerPartition
    }

    /// A partition's uncommitted bytes: this process's records at their size, others' at `other`.
    static func bytes(of partition: Partition, other: Int) -> Int {
        let ownBelowEnd = partition.own.lazy.filter { $0.offset < partition.end }.count
        let others = max(0, Int(partition.end - partition.start) - ownBelowEnd)
        return partition.ownBytes + others * other
    }

    /// Reads the brokers' figures when the last reading is older than `refreshInterval` and
    /// no other caller is reading them.
    private func readIfStale() async {
        guard state.withLock({ Self.claimReading(&$0, interval: settings.refreshInterval) }) else { return }
        await read()
    }

    /// Whether the last reading is stale and no other is under way; if so, the caller takes
    /// the next one (`reading` set) and must `read()`.
    private static func claimReading(_ state: inout State, interval: Duration) -> Bool {
        guard !state.reading, state.readAt.map({ ContinuousClock.now - $0 >= interval }) ?? true else { return false }
        state.reading = true
        return true
    }

    /// Reads every watched topic's figures from the brokers; the caller claimed the reading.
    private func read() async {
        let client = self.client
        let timeout = Int32(clamping: settings.requestTimeout.wholeMilliseconds)
        // The topics side by side, each on a Dispatch thread of its own: one after another, a
        // reading of eight topics waited for up to 32 answers in a row (a cold handle's first
        // asks each group's coordinator too), and a dispatcher waiting for room waited for all.
        let readings = await withTaskGroup(of: (String, Result<[Int32: (start: Int64, end: Int64)], KafkaError>).self) { tasks in
            for (topic, group) in groups {
                tasks.addTask { (topic, await BlockingCalls.run { client.uncommitted(of: topic, by: group, timeout: timeout) }) }
            }
            var readings: [String: Result<[Int32: (start: Int64, end: Int64)], KafkaError>] = [:]
            for await (topic, reading) in tasks { readings[topic] = reading }
            return readings
        }
        // Its error and log events are served (and logged) rather than kept; without waiting.
        client.poll(timeoutMilliseconds: 0)
        state.withLock { state in
            state.reading = false
            state.readAt = .now
            for (topic, reading) in readings {
                switch reading {
                case .success(let partitions):
                    let previous = state.topics[topic, default: Topic()]
                    var entry = previous
                    entry.known = true
                    entry.partitions = [:]
                    var progressed = false
                    for (id, offsets) in partitions {
                        var partition = previous.partitions[id] ?? Partition()
                        if offsets.start > partition.start { progressed = true }
                        // Taken as read: a log that was truncated or a topic made again starts over.
                        if offsets.end < partition.end { partition = Partition() }
                        partition.start = offsets.start
                        partition.end = offsets.end
                        let done = partition.own.prefix { $0.offset < offsets.start }
                        partition.ownBytes -= done.reduce(0) { $0 + $1.bytes }
                        partition.own.removeFirst(done.count)
                        entry.partitions[id] = partition
                    }
                    entry.measure(other: settings.otherRecordBytes)
                    let waiting = entry.fullest > 0
                    if progressed || !waiting {
                        entry.progressAt = .now
                        if entry.stalled {
                            entry.stalled = false
                            logger.notice("consumers are reading again; waiting for them when they are behind", metadata: ["kafka.topic": "\(topic)"])
                        }
                    } else if !entry.stalled, ContinuousClock.now - entry.progressAt > settings.stalledAfter {
                        entry.stalled = true
                        logger.warning(
                            "consumers committed nothing for a while; producing without waiting for them. If they run in a consumer group of their own, name it in backlog.groups",
                            metadata: ["kafka.topic": "\(topic)", "kafka.group": "\(groups[topic] ?? "")"])
                    }
                    state.topics[topic] = entry
                case .failure(let error):
                    state.topics[topic, default: Topic()].known = false
                    if state.lastFailureLogged.map({ ContinuousClock.now - $0 > .seconds(30) }) ?? true {
                        state.lastFailureLogged = .now
                        logger.warning(
                            "could not read how far consumers are behind", metadata: ["kafka.topic": "\(topic)", "kafka.error": "\(error)"])
                    }
                }
            }
        }
    }
}

extension RDKafkaClient {
    /// For each partition of `topic`: where `group`'s uncommitted records start and the
    /// partition's next offset. Blocks; call it on a Dispatch thread.
    func uncommitted(of topic: String, by group: String, timeout: Int32) -> Result<[Int32: (start: Int64, end: Int64)], KafkaError> {
        var metadata: UnsafePointer<rd_kafka_metadata>? = nil
        let topicHandle = rd_kafka_topic_new(handle, topic, nil)
        defer { if let topicHandle { rd_kafka_topic_destroy(topicHandle) } }
        let code = rd_kafka_metadata(handle, 0, topicHandle, &metadata, timeout)
        guard code == RD_KAFKA_RESP_ERR_NO_ERROR, let metadata else { return .failure(KafkaError(.operation, code, "no metadata for \(topic)")) }
        defer { rd_kafka_metadata_destroy(metadata) }
        guard metadata.pointee.topic_cnt == 1, metadata.pointee.topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            let topicError = metadata.pointee.topic_cnt == 1 ? metadata.pointee.topics[0].err : RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC
            return .failure(KafkaError(.operation, topicError, "no metadata for \(topic)"))
        }
        let ids = (0..<Int(metadata.pointee.topics[0].partition_cnt)).map { metadata.pointee.topics[0].partitions[$0].id }
        func offsets(_ fill: Int64?, _ call: (UnsafeMutablePointer<rd_kafka_topic_partition_list_t>) -> rd_kafka_resp_err_t) -> Result<
            [Int32: Int64], KafkaError
        > {
            withPartitionList(ids.map { (topic, $0, fill) }) { list in
                let code = call(list)
                guard code == RD_KAFKA_RESP_ERR_NO_ERROR else { return .failure(KafkaError(.operation, code, "could not read offsets of \(topic)")) }
                var found: [Int32: Int64] = [:]
                for index in 0..<Int(list.pointee.cnt) {
                    let element = list.pointee.elems[index]
                    // A partition the brokers could not answer for is left out of the reading.
                    found[element.partition] = element.err == RD_KAFKA_RESP_ERR_NO_ERROR ? element.offset : .min
                }
                return .success(found)
            }
        }
        // offsets_for_times takes timestamps: -2 asks for the first offset, -1 for the next.
        let first = offsets(-2) { rd_kafka_offsets_for_times(handle, $0, timeout) }
        let next = offsets(-1) { rd_kafka_offsets_for_times(handle, $0, timeout) }
        let committed = offsets(nil) { committedOffsets(of: group, into: $0, timeout: timeout) }
        return first.flatMap { first in
            next.flatMap { next in
                committed.map { committed in
                    var result: [Int32: (start: Int64, end: Int64)] = [:]
                    for id in ids {
                        guard let low = first[id], let high = next[id], let mark = committed[id], low != .min, high != .min, mark != .min else {
                            continue
                        }
                        let done = mark >= 0 ? mark : low
                        result[id] = (start: min(max(done, low), high), end: high)
                    }
                    return result
                }
            }
        }
    }
}
