import CRdKafka
import Logging
import Synchronization

/// Kafka protocol requests whose answers the embedded cluster can be told to fail.
public enum KafkaProtocolRequest: Int16, Sendable, CaseIterable {
    case produce = 0
    case fetch = 1
    case listOffsets = 2
    case metadata = 3
    case offsetCommit = 8
    case offsetFetch = 9
    case findCoordinator = 10
    case joinGroup = 11
    case heartbeat = 12
    case syncGroup = 14
    case initProducerID = 22
}

/// librdkafka's in-memory Kafka-protocol cluster (`rdkafka_mock.h`): real brokers on
/// loopback ports that any Kafka client can use, for tests and `pushhub dev`. Nothing is
/// kept on disk. Brokers are numbered from 1.
///
/// The cluster cannot create topics over the protocol (it has no controller); create them
/// with `createTopic`. Topics a producer names before that are created with 4 partitions.
public final class EmbeddedKafkaCluster: @unchecked Sendable {
    // @unchecked: the mock cluster's calls are thread-safe (they post to its own thread);
    // `destroyed` guards the one teardown.
    private let client: RDKafkaClient
    private let cluster: OpaquePointer
    private let destroyed = Mutex(false)
    /// `host:port` of every broker.
    public let bootstrapServers: [String]
    public let brokerCount: Int

    private init(client: RDKafkaClient, cluster: OpaquePointer, brokerCount: Int) {
        self.client = client
        self.cluster = cluster
        self.brokerCount = brokerCount
        self.bootstrapServers = String(cString: rd_kafka_mock_cluster_bootstraps(cluster))
            .split(separator: ",").map(String.init)
    }

    deinit {
        shutdown()
    }

    /// Starts a cluster of `brokers` brokers on loopback.
    public static func start(brokers: Int = 3, logger: Logger) throws(KafkaError) -> EmbeddedKafkaCluster {
        guard brokers >= 1 else {
            throw KafkaError(kind: .configuration, context: "an embedded cluster needs at least one broker, not \(brokers)")
        }
        // The cluster lives inside a client handle of its own, which never connects anywhere.
        let client = try RDKafkaClient.make(
            type: RD_KAFKA_PRODUCER, properties: ["log_level": "3"], callbacks: ClientCallbacks(logger: logger))
        guard let cluster = withSignalsBlocked({ rd_kafka_mock_cluster_new(client.handle, Int32(brokers)) }) else {
            throw KafkaError(kind: .clientCreation, context: "librdkafka could not start an embedded cluster")
        }
        return EmbeddedKafkaCluster(client: client, cluster: cluster, brokerCount: brokers)
    }

    /// Stops every broker. Idempotent; also done when the object goes away.
    public func shutdown() {
        destroyed.withLock { destroyed in
            guard !destroyed else { return }
            destroyed = true
            rd_kafka_mock_cluster_destroy(cluster)
        }
    }

    /// Creates `name` with `partitions` partitions; the replication factor is capped by the
    /// broker count.
    public func createTopic(_ name: String, partitions: Int, replicationFactor: Int = 1) throws(KafkaError) {
        let replicas = Int32(min(replicationFactor, brokerCount))
        try perform("could not create topic \(name)") { rd_kafka_mock_topic_create($0, name, Int32(partitions), replicas) }
    }

    /// Makes `broker` lead `partition` of `topic`.
    public func setPartitionLeader(topic: String, partition: Int32, broker: Int32) throws(KafkaError) {
        try perform("could not move the leader of \(topic)[\(partition)]") {
            rd_kafka_mock_partition_set_leader($0, topic, partition, broker)
        }
    }

    /// Disconnects `broker` and refuses new connections to it. Leadership does not move.
    public func setBrokerDown(_ broker: Int32) throws(KafkaError) {
        try perform("could not take broker \(broker) down") { rd_kafka_mock_broker_set_down($0, broker) }
    }

    /// Lets `broker` accept connections again.
    public func setBrokerUp(_ broker: Int32) throws(KafkaError) {
        try perform("could not bring broker \(broker) up") { rd_kafka_mock_broker_set_up($0, broker) }
    }

    /// Delays every answer of `broker` by `delay`.
    public func setBrokerLatency(_ broker: Int32, _ delay: Duration) throws(KafkaError) {
        try perform("could not set the latency of broker \(broker)") {
            rd_kafka_mock_broker_set_rtt($0, broker, Int32(delay.milliseconds))
        }
    }

    /// Makes the next `errors.count` requests of this kind, on any broker, fail with these
    /// errors in order.
    public func injectErrors(_ errors: [KafkaErrorCode], on request: KafkaProtocolRequest) throws(KafkaError) {
        let codes = errors.map(\.cValue)
        try perform("could not inject errors") { cluster in
            codes.withUnsafeBufferPointer { buffer in
                rd_kafka_mock_push_request_errors_array(cluster, request.rawValue, buffer.count, buffer.baseAddress)
            }
            return RD_KAFKA_RESP_ERR_NO_ERROR
        }
    }

    /// Forgets errors injected for this kind of request and not yet returned.
    public func clearInjectedErrors(on request: KafkaProtocolRequest) throws(KafkaError) {
        try perform("could not clear injected errors") { cluster in
            rd_kafka_mock_clear_request_errors(cluster, request.rawValue)
            return RD_KAFKA_RESP_ERR_NO_ERROR
        }
    }

    /// Runs one mock-cluster call while the cluster is certain to exist.
    private func perform(_ context: String, _ call: (OpaquePointer) -> rd_kafka_resp_err_t) throws(KafkaError) {
        let code = destroyed.withLock { destroyed -> rd_kafka_resp_err_t? in
            destroyed ? nil : call(cluster)
        }
        guard let code else { throw KafkaError(kind: .shutDown, context: "\(context): the embedded cluster is shut down") }
        guard code == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(.operation, code, context) }
    }
}
