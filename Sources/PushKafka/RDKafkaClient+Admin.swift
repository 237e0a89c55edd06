import CRdKafka
import Logging

extension RDKafkaClient {
    /// Creates a handle for admin requests: a producer that never produces.
    static func makeAdmin(properties: [String: String], logger: Logger) throws(KafkaError) -> RDKafkaClient {
        try RDKafkaClient.make(type: RD_KAFKA_PRODUCER, properties: properties, callbacks: ClientCallbacks(logger: logger))
    }

    /// Asks the cluster to create `specifications`, allowing `timeout` for the request and as
    /// much again for the brokers to carry it out; waits on a Dispatch thread.
    func createTopics(
        _ specifications: [KafkaTopicSpecification], timeout: Duration
    ) async throws(KafkaError) -> [String: KafkaAdmin.CreationOutcome] {
        let milliseconds = Int32(clamping: timeout.milliseconds)
        // The answer comes after the operation time-out at the latest; a little slack on top.
        let answerMilliseconds = Int32(clamping: timeout.milliseconds + 5000)
        let outcome = await BlockingCalls.run { [self] () -> Result<[String: KafkaAdmin.CreationOutcome], KafkaError> in
            var errorText = [CChar](repeating: 0, count: 512)
            var newTopics: [OpaquePointer?] = []
            defer { newTopics.forEach { rd_kafka_NewTopic_destroy($0) } }
            for specification in specifications {
                guard
                    let topic = rd_kafka_NewTopic_new(
                        specification.name, Int32(specification.partitions), Int32(specification.replicationFactor),
                        &errorText, errorText.count)
                else {
                    return .failure(
                        KafkaError(kind: .operation, context: "invalid topic \(specification.name)", detail: text(ofCString: errorText)))
                }
                newTopics.append(topic)
                for (name, value) in specification.configuration {
                    _ = rd_kafka_NewTopic_set_config(topic, name, value)
                }
            }
            let options = rd_kafka_AdminOptions_new(handle, RD_KAFKA_ADMIN_OP_CREATETOPICS)
            defer { rd_kafka_AdminOptions_destroy(options) }
            _ = rd_kafka_AdminOptions_set_request_timeout(options, milliseconds, &errorText, errorText.count)
            _ = rd_kafka_AdminOptions_set_operation_timeout(options, milliseconds, &errorText, errorText.count)
            let queue = rd_kafka_queue_new(handle)
            defer { rd_kafka_queue_destroy(queue) }
            let topicCount = newTopics.count
            rd_kafka_CreateTopics(handle, &newTopics, topicCount, options, queue)
            guard let event = rd_kafka_queue_poll(queue, answerMilliseconds) else {
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
            var outcomes: [String: KafkaAdmin.CreationOutcome] = [:]
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

    /// The brokers and every topic of the cluster, waiting up to `timeout` on a Dispatch thread.
    func clusterMetadata(timeout: Duration) async throws(KafkaError) -> KafkaClusterMetadata {
        let milliseconds = Int32(clamping: timeout.milliseconds)
        return try await BlockingCalls.run { [self] () -> Result<KafkaClusterMetadata, KafkaError> in
            var metadata: UnsafePointer<rd_kafka_metadata>? = nil
            let code = rd_kafka_metadata(handle, 1, nil, &metadata, milliseconds)
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
