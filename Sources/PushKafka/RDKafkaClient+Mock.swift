import CRdKafka
import Logging
import PushModel
import Synchronization

extension RDKafkaClient {
    /// Starts a mock cluster of `brokers` brokers inside this handle; `nil` when librdkafka
    /// could not. The cluster keeps the handle alive.
    func startMockCluster(brokers: Int) -> RDKafkaMockCluster? {
        guard let pointer = withSignalsBlocked({ rd_kafka_mock_cluster_new(handle, Int32(brokers)) }) else { return nil }
        return RDKafkaMockCluster(client: self, pointer: pointer)
    }
}

/// Owns one `rd_kafka_mock_cluster_t` (`rdkafka_mock.h`) and the handle it lives in. Every call
/// to the cluster goes through here, under a lock that keeps it from racing the teardown.
/// A call that returns a code returns `nil` once the cluster is destroyed.
final class RDKafkaMockCluster: @unchecked Sendable {
    // @unchecked: the mock cluster's calls are thread-safe (they post to its own thread);
    // every call runs under `destroyed`, which guards the one teardown.
    private let client: RDKafkaClient
    private let pointer: OpaquePointer
    private let destroyed = Mutex(false)
    /// `host:port` of every broker.
    let bootstrapServers: [String]

    fileprivate init(client: RDKafkaClient, pointer: OpaquePointer) {
        self.client = client
        self.pointer = pointer
        self.bootstrapServers = String(cString: rd_kafka_mock_cluster_bootstraps(pointer))
            .split(separator: ",").map(String.init)
    }

    deinit {
        destroy()
    }

    /// Starts a cluster of `brokers` brokers in a handle of its own, which never connects anywhere.
    static func start(brokers: Int, logger: Logger) throws(KafkaError) -> RDKafkaMockCluster {
        let client = try RDKafkaClient.make(
            type: RD_KAFKA_PRODUCER, properties: ["log_level": "3"], callbacks: ClientCallbacks(logger: logger))
        guard let cluster = client.startMockCluster(brokers: brokers) else {
            throw KafkaError(kind: .clientCreation, context: "librdkafka could not start an embedded cluster")
        }
        return cluster
    }

    /// Stops every broker. Idempotent; also done when the object goes away, before the handle is.
    func destroy() {
        destroyed.withLock { destroyed in
            guard !destroyed else { return }
            destroyed = true
            rd_kafka_mock_cluster_destroy(pointer)
        }
    }

    /// Creates `name` with `partitions` partitions, each on `replicationFactor` brokers.
    func createTopic(_ name: String, partitions: Int, replicationFactor: Int) -> KafkaErrorCode? {
        let partitionCount = Int32(partitions)
        let replicas = Int32(replicationFactor)
        return perform { rd_kafka_mock_topic_create($0, name, partitionCount, replicas) }
    }

    /// Makes `broker` lead `partition` of `topic`.
    func setPartitionLeader(topic: String, partition: Int32, broker: Int32) -> KafkaErrorCode? {
        perform { rd_kafka_mock_partition_set_leader($0, topic, partition, broker) }
    }

    /// Disconnects `broker` and refuses new connections to it.
    func setBrokerDown(_ broker: Int32) -> KafkaErrorCode? {
        perform { rd_kafka_mock_broker_set_down($0, broker) }
    }

    /// Lets `broker` accept connections again.
    func setBrokerUp(_ broker: Int32) -> KafkaErrorCode? {
        perform { rd_kafka_mock_broker_set_up($0, broker) }
    }

    /// Delays every answer of `broker` by `delay`.
    func setBrokerRoundTripTime(_ broker: Int32, _ delay: Duration) -> KafkaErrorCode? {
        let milliseconds = Int32(delay.wholeMilliseconds)
        return perform { rd_kafka_mock_broker_set_rtt($0, broker, milliseconds) }
    }

    /// Makes the next `errors.count` requests of this kind, on any broker, fail with these
    /// errors in order.
    func pushRequestErrors(_ errors: [KafkaErrorCode], on request: KafkaProtocolRequest) -> KafkaErrorCode? {
        let codes = errors.map(\.cValue)
        return perform { cluster in
            codes.withUnsafeBufferPointer { buffer in
                rd_kafka_mock_push_request_errors_array(cluster, request.rawValue, buffer.count, buffer.baseAddress)
            }
            return RD_KAFKA_RESP_ERR_NO_ERROR
        }
    }

    /// Forgets errors pushed for this kind of request and not yet returned.
    func clearRequestErrors(on request: KafkaProtocolRequest) -> KafkaErrorCode? {
        perform { cluster in
            rd_kafka_mock_clear_request_errors(cluster, request.rawValue)
            return RD_KAFKA_RESP_ERR_NO_ERROR
        }
    }

    /// Runs one call while the cluster is certain to exist; `nil` when it is destroyed.
    private func perform(_ call: (OpaquePointer) -> rd_kafka_resp_err_t) -> KafkaErrorCode? {
        destroyed.withLock { destroyed -> KafkaErrorCode? in
            destroyed ? nil : KafkaErrorCode(call(pointer))
        }
    }
}
