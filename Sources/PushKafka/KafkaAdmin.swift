import CRdKafka
import Logging

/// A topic to create.
public struct KafkaTopicSpecification: Sendable, Hashable {
    public var name: String
    public var partitions: Int
    public var replicationFactor: Int
    /// Topic configuration such as `retention.ms`.
    public var configuration: [String: String]

    public init(name: String, partitions: Int, replicationFactor: Int, configuration: [String: String] = [:]) {
        self.name = name
        self.partitions = partitions
        self.replicationFactor = replicationFactor
        self.configuration = configuration
    }
}

/// What the cluster said about its brokers and topics.
public struct KafkaClusterMetadata: Sendable {
    public struct Broker: Sendable, Hashable {
        public var id: Int32
        public var host: String
        public var port: Int
    }

    public struct Partition: Sendable, Hashable {
        public var id: Int32
        public var leader: Int32
        public var replicas: [Int32]
        public var inSyncReplicas: [Int32]
    }

    public struct Topic: Sendable, Hashable {
        public var name: String
        public var partitions: [Partition]
        /// Set when the broker reported an error for this topic.
        public var error: KafkaErrorCode?
    }

    public var brokers: [Broker]
    public var topics: [Topic]
}

/// Creates topics and reads metadata.
public final class KafkaAdmin: Sendable {
    public enum CreationOutcome: Sendable, Hashable {
        case created
        case alreadyExisted
    }

    private let client: RDKafkaClient
    private let configuration: KafkaAdminConfiguration

    private init(client: RDKafkaClient, configuration: KafkaAdminConfiguration) {
        self.client = client
        self.configuration = configuration
    }

    public static func make(configuration: KafkaAdminConfiguration, logger: Logger) throws(KafkaError) -> KafkaAdmin {
        let client = try RDKafkaClient.make(
            type: RD_KAFKA_PRODUCER, properties: configuration.properties, callbacks: ClientCallbacks(logger: logger))
        return KafkaAdmin(client: client, configuration: configuration)
    }

    /// Creates the topics that do not exist yet; a topic that exists is left as it is.
    public func createTopics(_ specifications: [KafkaTopicSpecification]) async throws(KafkaError) -> [String: CreationOutcome] {
        let client = self.client
        let timeout = configuration.requestTimeout.milliseconds
        let outcome = await BlockingCalls.run { () -> Result<[String: CreationOutcome], KafkaError> in
            var errorText = [CChar](repeating: 0, count: 512)
            var newTopics: [OpaquePointer?] = []
            defer { newTopics.forEach { rd_kafka_NewTopic_destroy($0) } }
            for specification in specifications {
                guard
                    let topic = rd_kafka_NewTopic_new(
                        specification.name, Int32(specification.partitions), Int32(specification.replicationFactor),
                        &errorText, errorText.count)
                else {
                    return .failure(KafkaError(kind: .operation, context: "invalid topic \(specification.name)", detail: text(ofCString: errorText)))
                }
                newTopics.append(topic)
                for (name, value) in specification.configuration {
                    _ = rd_kafka_NewTopic_set_config(topic, name, value)
                }
            }
            let options = rd_kafka_AdminOptions_new(client.handle, RD_KAFKA_ADMIN_OP_CREATETOPICS)
            defer { rd_kafka_AdminOptions_destroy(options) }
            _ = rd_kafka_AdminOptions_set_request_timeout(options, Int32(timeout), &errorText, errorText.count)
            _ = rd_kafka_AdminOptions_set_operation_timeout(options, Int32(timeout), &errorText, errorText.count)
            let queue = rd_kafka_queue_new(client.handle)
            defer { rd_kafka_queue_destroy(queue) }
            rd_kafka_CreateTopics(client.handle, &newTopics, newTopics.count, options, queue)
            guard let event = rd_kafka_queue_poll(queue, Int32(timeout) + 5000) else {
                return .failure(KafkaError(kind: .operation, code: .timedOut, context: "no answer to CreateTopics"))
            }
            defer { rd_kafka_event_destroy(event) }
            let eventError = rd_kafka_event_error(event)
            if eventError != RD_KAFKA_RESP_ERR_NO_ERROR {
                let detail = rd_kafka_event_error_string(event).map { String(cString: $0) }
                return .failure(KafkaError(kind: .operation, code: KafkaErrorCode(eventError), context: "CreateTopics failed", detail: detail))
            }
            var count = 0
            guard let results = rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(event), &count) else {
                return .failure(KafkaError(kind: .operation, context: "CreateTopics returned no result"))
            }
            var outcomes: [String: CreationOutcome] = [:]
            for index in 0..<count {
                let result = results[index]
                let name = String(cString: rd_kafka_topic_result_name(result))
                let code = rd_kafka_topic_result_error(result)
                switch code {
                case RD_KAFKA_RESP_ERR_NO_ERROR: outcomes[name] = .created
                case RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS: outcomes[name] = .alreadyExisted
                default:
                    let detail = rd_kafka_topic_result_error_string(result).map { String(cString: $0) }
                    return .failure(
                        KafkaError(kind: .operation, code: KafkaErrorCode(code), context: "could not create topic \(name)", detail: detail))
                }
            }
            return .success(outcomes)
        }
        return try outcome.get()
    }

    /// Brokers and topics of the cluster.
    public func metadata() async throws(KafkaError) -> KafkaClusterMetadata {
        let client = self.client
        let timeout = Int32(configuration.requestTimeout.milliseconds)
        return try await BlockingCalls.run { () -> Result<KafkaClusterMetadata, KafkaError> in
            var metadata: UnsafePointer<rd_kafka_metadata>? = nil
            let code = rd_kafka_metadata(client.handle, 1, nil, &metadata, timeout)
            guard code == RD_KAFKA_RESP_ERR_NO_ERROR, let metadata else {
                return .failure(KafkaError(.operation, code, "could not read cluster metadata"))
            }
            defer { rd_kafka_metadata_destroy(metadata) }
            let m = metadata.pointee
            let brokers = (0..<Int(m.broker_cnt)).map { index in
                let broker = m.brokers[index]
                return KafkaClusterMetadata.Broker(id: broker.id, host: String(cString: broker.host), port: Int(broker.port))
            }
            let topics = (0..<Int(m.topic_cnt)).map { index in
                let topic = m.topics[index]
                let partitions = (0..<Int(topic.partition_cnt)).map { p in
                    let partition = topic.partitions[p]
                    return KafkaClusterMetadata.Partition(
                        id: partition.id, leader: partition.leader,
                        replicas: Array(UnsafeBufferPointer(start: partition.replicas, count: Int(partition.replica_cnt))),
                        inSyncReplicas: Array(UnsafeBufferPointer(start: partition.isrs, count: Int(partition.isr_cnt))))
                }
                return KafkaClusterMetadata.Topic(
                    name: String(cString: topic.topic), partitions: partitions.sorted { $0.id < $1.id },
                    error: topic.err == RD_KAFKA_RESP_ERR_NO_ERROR ? nil : KafkaErrorCode(topic.err))
            }
            return .success(KafkaClusterMetadata(brokers: brokers.sorted { $0.id < $1.id }, topics: topics.sorted { $0.name < $1.name }))
        }.get()
    }
}
