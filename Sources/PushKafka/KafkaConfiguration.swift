import PushModel

/// Settings of the producer; the defaults are the delivery guarantees of ARCHITECTURE.md.
public struct KafkaProducerConfiguration: Sendable {
    /// `host:port` of one or more brokers.
    public var bootstrapServers: [String]
    public var clientID: String = "pushhub"
    /// How long a record may wait for its acknowledgement, retries included, before the send
    /// fails with `_MSG_TIMED_OUT` (librdkafka `message.timeout.ms`).
    public var deliveryTimeout: Duration = .seconds(30)
    /// How long records wait to be batched together (librdkafka `linger.ms`).
    public var linger: Duration = .milliseconds(5)
    /// The topics it learns as it starts to run (`KafkaProducer.prepare`): those it writes
    /// to from the start. Any other is learnt as its first record comes.
    public var topics: [String] = []
    /// Any other librdkafka property, applied last.
    public var additionalProperties: [String: String] = [:]
    /// How often delivery reports are looked for besides when librdkafka announces them
    /// (`EventPoller`); tests lengthen it to see that the announcements alone suffice.
    var pollSweep: Duration = .milliseconds(500)
    /// How long a topic's records wait for it to be learnt, from when the learning began: the
    /// embedded cluster answers in milliseconds; librdkafka, left to learn a topic itself,
    /// holds its first record 0.3 s (`KafkaProducer.learnOnFirstRecord`).
    var learningWait: Duration = .milliseconds(500)
    /// How long a learning that a record began may take (the brokers' answer).
    var firstRecordLearning: Duration = .seconds(2)

    public init(bootstrapServers: [String]) {
        self.bootstrapServers = bootstrapServers
    }

    var properties: [String: String] {
        baseProperties(
            bootstrapServers, clientID, additionalProperties,
            [
                "enable.idempotence": "true",
                "acks": "all",
                "message.timeout.ms": String(deliveryTimeout.wholeMilliseconds),
                "linger.ms": String(linger.wholeMilliseconds),
            ])
    }
}

/// Settings of a consumer-group member.
public struct KafkaConsumerConfiguration: Sendable {
    public enum OffsetReset: String, Sendable {
        case earliest, latest
    }

    public var bootstrapServers: [String]
    public var groupID: String
    public var clientID: String = "pushhub"
    /// Where a group with no committed offset starts.
    public var offsetReset: OffsetReset = .earliest
    /// How often stored offsets are committed (besides on revoke and on shutdown).
    public var commitInterval: Duration = .seconds(1)
    /// How long the group waits for a silent member before moving its partitions.
    public var sessionTimeout: Duration = .seconds(10)
    /// Most records handed out by one fetch from librdkafka's queue.
    public var fetchBatchSize: Int = 500
    /// Most bytes of records one fetch hands out, as the records of the fetch before ran;
    /// nil for no bound but `fetchBatchSize`. Records handed out wait in the process for
    /// their turn, beside what librdkafka keeps ahead (`prefetchBytes`).
    public var fetchBytes: Int?
    /// Whether, after a fetch that came back full, fetches take what librdkafka holds without
    /// waiting for a whole batch (`KafkaConsumer.fetchBatch`): the workers', whose PNS
    /// connections emptied while a fetch waited. Others gather what comes in 100 ms.
    public var takesWhatIsThereUnderLoad = false
    /// How long a broker may hold a fetch that finds no new record. Kafka answers as soon as a
    /// record arrives; librdkafka's embedded cluster always waits this long, so on it every
    /// hop of the pipeline costs up to this much latency (librdkafka's default is 500 ms).
    public var fetchWait: Duration = .milliseconds(50)
    /// Most bytes of fetched records librdkafka keeps ahead of the consumer, and most one fetch
    /// brings. librdkafka's defaults (64 MiB queued, 50 MiB a fetch) let a consumer that is
    /// behind on a broadcast hold that much of records it will not reach for seconds; 16 MiB
    /// is still hundreds of full delivery batches. (The APNs worker's peak under a broadcast
    /// to a million went from 125–140 MB to 116 MB.)
    public var prefetchBytes: Int = 16 << 20
    /// The `group` label of the consumer's metrics; the group id unless set. Consumers in
    /// groups of their own per use (a debug send's reader) share one, so the metrics do not
    /// grow a series per use.
    public var metricsGroup: String?
    public var additionalProperties: [String: String] = [:]

    public init(bootstrapServers: [String], groupID: String) {
        self.bootstrapServers = bootstrapServers
        self.groupID = groupID
    }

    var properties: [String: String] {
        baseProperties(
            bootstrapServers, clientID, additionalProperties,
            [
                "group.id": groupID,
                "auto.offset.reset": offsetReset.rawValue,
                "enable.auto.commit": "true",
                "enable.auto.offset.store": "false",
                "auto.commit.interval.ms": String(commitInterval.wholeMilliseconds),
                "session.timeout.ms": String(sessionTimeout.wholeMilliseconds),
                "heartbeat.interval.ms": String(max(100, sessionTimeout.wholeMilliseconds / 4)),
                "fetch.wait.max.ms": String(fetchWait.wholeMilliseconds),
                "queued.max.messages.kbytes": String(max(1, prefetchBytes / 1024)),
                "fetch.max.bytes": String(max(1 << 20, prefetchBytes)),
            ])
    }
}

/// Settings of the admin client.
public struct KafkaAdminConfiguration: Sendable {
    public var bootstrapServers: [String]
    public var clientID: String = "pushhub-admin"
    public var requestTimeout: Duration = .seconds(15)
    public var additionalProperties: [String: String] = [:]

    public init(bootstrapServers: [String]) {
        self.bootstrapServers = bootstrapServers
    }

    var properties: [String: String] {
        baseProperties(bootstrapServers, clientID, additionalProperties, [:])
    }
}

/// The properties every client has, then the client's own, then the caller's additions.
private func baseProperties(
    _ bootstrapServers: [String], _ clientID: String, _ additional: [String: String], _ own: [String: String]
) -> [String: String] {
    var properties = ["bootstrap.servers": bootstrapServers.joined(separator: ","), "client.id": clientID]
    properties.merge(own) { _, new in new }
    properties.merge(additional) { _, new in new }
    return properties
}
