import CRdKafka
import Logging
import PushModel

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
        let milliseconds = Int32(clamping: timeout.wholeMilliseconds)
        // The answer comes after the operation time-out at the latest; a little slack on top.
        let answerMilliseconds = Int32(clamping: timeout.wholeMilliseconds + 5000)
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
            let topicCount = newTopics.count
            return adminRequest(
                RD_KAFKA_ADMIN_OP_CREATETOPICS, named: "CreateTopics", timeout: milliseconds, operationTimeout: true,
                answerWithin: answerMilliseconds
            ) { options, queue in
                rd_kafka_CreateTopics(handle, &newTopics, topicCount, options, queue)
            } read: { event in
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
        }
        return try outcome.get()
    }

    /// The brokers and every topic of the cluster, waiting up to `timeout` on a Dispatch thread.
    func clusterMetadata(timeout: Duration) async throws(KafkaError) -> KafkaClusterMetadata {
        let milliseconds = Int32(clamping: timeout.wholeMilliseconds)
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

extension RDKafkaClient {
    /// One admin request: options for `operation` with `timeout` for the request (and for the
    /// brokers' operation too, with `operationTimeout`), sent by `send` to a queue of its own,
    /// whose answer `read` takes. The answer's own error, or none within `answerWithin`, is a
    /// failure. Blocks; call it on a Dispatch thread.
    func adminRequest<T>(
        _ operation: rd_kafka_admin_op_t, named name: String, timeout: Int32, operationTimeout: Bool = false, answerWithin: Int32,
        send: (OpaquePointer?, OpaquePointer?) -> Void, read: (OpaquePointer) -> Result<T, KafkaError>
    ) -> Result<T, KafkaError> {
        var errorText = [CChar](repeating: 0, count: 512)
        let options = rd_kafka_AdminOptions_new(handle, operation)
        defer { rd_kafka_AdminOptions_destroy(options) }
        _ = rd_kafka_AdminOptions_set_request_timeout(options, timeout, &errorText, errorText.count)
        if operationTimeout { _ = rd_kafka_AdminOptions_set_operation_timeout(options, timeout, &errorText, errorText.count) }
        let queue = rd_kafka_queue_new(handle)
        defer { rd_kafka_queue_destroy(queue) }
        send(options, queue)
        guard let event = rd_kafka_queue_poll(queue, answerWithin) else {
            return .failure(KafkaError(kind: .operation, code: .timedOut, context: "no answer to \(name)"))
        }
        defer { rd_kafka_event_destroy(event) }
        let eventError = rd_kafka_event_error(event)
        if eventError != RD_KAFKA_RESP_ERR_NO_ERROR {
            let detail = rd_kafka_event_error_string(event).map { String(cString: $0) }
            return .failure(KafkaError(kind: .operation, code: KafkaErrorCode(eventError), context: "\(name) failed", detail: detail))
        }
        return read(event)
    }

    /// Fills `list`'s offsets with those `group` committed (`RD_KAFKA_OFFSET_INVALID` where it
    /// committed none, or the answer left a partition out), through the admin API: any handle
    /// asks for any group. Blocks; call it on a Dispatch thread.
    func committedOffsets(
        of group: String, into list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>, timeout: Int32
    ) -> rd_kafka_resp_err_t {
        guard list.pointee.cnt > 0 else { return RD_KAFKA_RESP_ERR_NO_ERROR }
        guard let request = rd_kafka_ListConsumerGroupOffsets_new(group, list) else { return RD_KAFKA_RESP_ERR__INVALID_ARG }
        defer { rd_kafka_ListConsumerGroupOffsets_destroy(request) }
        var requests: [OpaquePointer?] = [request]
        let answered = adminRequest(
            RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPOFFSETS, named: "ListConsumerGroupOffsets", timeout: timeout,
            // The answer comes by the request time-out at the latest; a little slack on top.
            answerWithin: Int32(clamping: Int64(timeout) + 1000)
        ) { options, queue in
            rd_kafka_ListConsumerGroupOffsets(handle, &requests, 1, options, queue)
        } read: { event -> Result<[KafkaTopicPartition: (offset: Int64, error: rd_kafka_resp_err_t)], KafkaError> in
            var count = 0
            guard let result = rd_kafka_event_ListConsumerGroupOffsets_result(event),
                let groups = rd_kafka_ListConsumerGroupOffsets_result_groups(result, &count), count == 1, let answer = groups[0]
            else {
                return .failure(
                    KafkaError(
                        kind: .operation, code: KafkaErrorCode(RD_KAFKA_RESP_ERR__BAD_MSG), context: "ListConsumerGroupOffsets returned no group"))
            }
            if let error = rd_kafka_group_result_error(answer) {
                return .failure(KafkaError(kind: .operation, code: KafkaErrorCode(rd_kafka_error_code(error)), context: "offsets of \(group)"))
            }
            guard let partitions = rd_kafka_group_result_partitions(answer), let elements = partitions.pointee.elems else {
                return .failure(
                    KafkaError(
                        kind: .operation, code: KafkaErrorCode(RD_KAFKA_RESP_ERR__BAD_MSG), context: "ListConsumerGroupOffsets returned no partitions"
                    ))
            }
            // By topic and partition: the answer need not keep the request's order. A partition
            // the brokers could not answer for keeps its error, as rd_kafka_committed's did.
            var offsets: [KafkaTopicPartition: (offset: Int64, error: rd_kafka_resp_err_t)] = [:]
            for index in 0..<Int(partitions.pointee.cnt) {
                let element = elements[index]
                offsets[KafkaTopicPartition(topic: String(cString: element.topic), partition: element.partition)] = (element.offset, element.err)
            }
            return .success(offsets)
        }
        switch answered {
        case .failure(let error): return error.code?.cValue ?? RD_KAFKA_RESP_ERR__FAIL
        case .success(let offsets):
            for index in 0..<Int(list.pointee.cnt) {
                let element = list.pointee.elems[index]
                let answer = offsets[KafkaTopicPartition(topic: String(cString: element.topic), partition: element.partition)]
                list.pointee.elems[index].offset = answer?.offset ?? Int64(RD_KAFKA_OFFSET_INVALID)
                list.pointee.elems[index].err = answer?.error ?? RD_KAFKA_RESP_ERR_NO_ERROR
            }
            return RD_KAFKA_RESP_ERR_NO_ERROR
        }
    }
}
