import CRdKafka
import Foundation
import Logging
import PushModel

extension RDKafkaClient {
    /// Creates a producer handle whose delivery reports complete the waiters in `deliveries`.
    static func makeProducer(
        properties: [String: String], deliveries: DeliveryWaiters, logger: Logger
    ) throws(KafkaError) -> RDKafkaClient {
        let callbacks = ClientCallbacks(logger: logger, deliveries: deliveries)
        return try RDKafkaClient.make(type: RD_KAFKA_PRODUCER, properties: properties, callbacks: callbacks) { conf in
            rd_kafka_conf_set_dr_msg_cb(conf, deliveryReportCallback)
        }
    }

    /// Hands one record to librdkafka, which copies the key and value; `deliveryID` comes back
    /// in the record's delivery report. A `nil` partition lets the partitioner choose by key.
    /// Does not wait for the broker; the code says whether librdkafka took the record.
    func produce(
        topic: String, partition: Int32?, key: Data?, value: Data, headers: [KafkaHeader], deliveryID: UInt
    ) -> KafkaErrorCode {
        var headerList: OpaquePointer? = nil
        if !headers.isEmpty {
            headerList = rd_kafka_headers_new(headers.count)
            for header in headers {
                if let headerValue = header.value {
                    headerValue.withUnsafeBytes { bytes in
                        _ = rd_kafka_header_add(headerList, header.key, -1, bytes.baseAddress, bytes.count)
                    }
                } else {
                    _ = rd_kafka_header_add(headerList, header.key, -1, nil, 0)
                }
            }
        }
        let code = value.withUnsafeBytes { valueBytes in
            withOptionalBytes(key) { keyBytes in
                pushhub_produce(
                    handle, topic, partition ?? RD_KAFKA_PARTITION_UA,
                    keyBytes?.baseAddress, keyBytes?.count ?? 0,
                    valueBytes.baseAddress, valueBytes.count,
                    headerList, UnsafeMutableRawPointer(bitPattern: deliveryID))
            }
        }
        // On success librdkafka owns the headers; on failure they are still ours.
        if code != RD_KAFKA_RESP_ERR_NO_ERROR, let headerList { rd_kafka_headers_destroy(headerList) }
        return KafkaErrorCode(code)
    }

    /// Asks the brokers for `topics`' partitions and leaders in one metadata request, waiting
    /// up to `timeout`, on a Dispatch thread. librdkafka holds the first record to a topic it
    /// has not met until it has learnt them; learnt beforehand, that record goes out at once.
    /// Returns the partition count of each of `topics` the answer named without an error.
    func learnTopics(_ topics: [String], timeout: Duration) async -> (KafkaErrorCode, partitions: [String: Int32]) {
        let milliseconds = Int32(clamping: timeout.wholeMilliseconds)
        return await BlockingCalls.run { [self] in
            // The topics are made known to the client first: a metadata answer updates only
            // the topics it knows.
            let known = topics.compactMap { rd_kafka_topic_new(handle, $0, nil) }
            defer { known.forEach { rd_kafka_topic_destroy($0) } }
            var metadata: UnsafePointer<rd_kafka_metadata>? = nil
            // all_topics 0: the topics this client knows, not every topic of the cluster.
            let code = rd_kafka_metadata(handle, 0, nil, &metadata, milliseconds)
            var partitions: [String: Int32] = [:]
            if let metadata {
                let wanted = Set(topics)
                for index in 0..<Int(metadata.pointee.topic_cnt) {
                    let topic = metadata.pointee.topics[index]
                    guard topic.err == RD_KAFKA_RESP_ERR_NO_ERROR, topic.partition_cnt > 0, let name = topic.topic else { continue }
                    let text = String(cString: name)
                    if wanted.contains(text) { partitions[text] = topic.partition_cnt }
                }
                rd_kafka_metadata_destroy(metadata)
            }
            return (KafkaErrorCode(code), partitions)
        }
    }

    /// Waits up to `timeout` until every record handed over so far has its delivery report,
    /// on a Dispatch thread.
    func flush(timeout: Duration) async -> KafkaErrorCode {
        let milliseconds = Int32(clamping: timeout.wholeMilliseconds)
        return await BlockingCalls.run { [self] in
            KafkaErrorCode(rd_kafka_flush(handle, milliseconds))
        }
    }

    /// Drops the records still queued or in flight; each gets a failed delivery report at the
    /// next poll.
    func purgeQueuedAndInFlight() {
        _ = rd_kafka_purge(handle, Int32(RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT))
    }
}

private func withOptionalBytes<R>(_ data: Data?, _ body: (UnsafeRawBufferPointer?) -> R) -> R {
    guard let data else { return body(nil) }
    return data.withUnsafeBytes { body($0) }
}

/// Completes the waiter whose id `produce` passed as the message opaque.
private let deliveryReportCallback: @convention(c) (OpaquePointer?, UnsafePointer<rd_kafka_message_t>?, UnsafeMutableRawPointer?) -> Void = {
    rk, message, _ in
    guard let message, let callbacks = ClientCallbacks.from(rk), let deliveries = callbacks.deliveries else { return }
    let id = UInt(bitPattern: message.pointee._private)
    let topic = message.pointee.rkt.map { String(cString: rd_kafka_topic_name($0)) } ?? ""
    if message.pointee.err == RD_KAFKA_RESP_ERR_NO_ERROR {
        deliveries.complete(
            id,
            with: .success(KafkaDeliveryReport(topic: topic, partition: message.pointee.partition, offset: message.pointee.offset)))
    } else {
        deliveries.complete(
            id, with: .failure(KafkaError(.delivery, message.pointee.err, "record for \(topic) was not acknowledged")))
    }
}
