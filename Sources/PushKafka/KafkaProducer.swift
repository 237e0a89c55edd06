import CRdKafka
import Foundation
import Logging
import ServiceLifecycle
import Synchronization

/// An idempotent producer (`acks=all`) whose sends return only once the broker has
/// acknowledged the record.
///
/// As a `Service` it runs until graceful shutdown, then flushes what is in flight.
public final class KafkaProducer: Service, Sendable {
    private let client: RDKafkaClient
    private let deliveries: DeliveryWaiters
    private let poller: PollLoop
    private let configuration: KafkaProducerConfiguration
    private let logger: Logger
    private let isShutDown = Atomic<Bool>(false)

    private init(client: RDKafkaClient, deliveries: DeliveryWaiters, configuration: KafkaProducerConfiguration, logger: Logger) {
        self.client = client
        self.deliveries = deliveries
        self.configuration = configuration
        self.logger = logger
        self.poller = PollLoop(client: client, name: "pushhub.kafka.producer.poll")
    }

    deinit {
        poller.stop()
    }

    public static func make(configuration: KafkaProducerConfiguration, logger: Logger) throws(KafkaError) -> KafkaProducer {
        let deliveries = DeliveryWaiters()
        let callbacks = ClientCallbacks(logger: logger, deliveries: deliveries)
        let client = try RDKafkaClient.make(
            type: RD_KAFKA_PRODUCER, properties: configuration.properties, callbacks: callbacks
        ) { conf in
            rd_kafka_conf_set_dr_msg_cb(conf, deliveryReportCallback)
        }
        return KafkaProducer(client: client, deliveries: deliveries, configuration: configuration, logger: logger)
    }

    /// Produces one record and returns when the broker acknowledged it.
    /// - Throws: `KafkaError` with kind `.delivery` when it was not acknowledged in time.
    @discardableResult
    public func send(_ record: KafkaOutgoingRecord) async throws(KafkaError) -> KafkaDeliveryReport {
        try await sendAll([record])[0].get()
    }

    /// Produces many records at once and waits for all their delivery reports, one result
    /// per record in the same order. The high-throughput path: records are batched by
    /// librdkafka instead of waiting for each acknowledgement in turn.
    public func sendAll(_ records: [KafkaOutgoingRecord]) async -> [Result<KafkaDeliveryReport, KafkaError>] {
        let group = DeliveryGroup(count: records.count)
        for (index, record) in records.enumerated() {
            if let error = await enqueue(record, group: group, index: index) {
                group.complete(index, with: .failure(error))
            }
        }
        let results = await group.wait()
        KafkaMetrics.produced(records, results)
        return results
    }

    /// Whether a broker answers within `timeout`.
    public func isReachable(timeout: Duration = .seconds(2)) async -> Bool {
        await client.isReachable(timeout: timeout)
    }

    /// Produces many records at once and returns when every one was acknowledged.
    /// - Throws: the first record's `KafkaError` that was not acknowledged.
    public func sendAllAcknowledged(_ records: [KafkaOutgoingRecord]) async throws(KafkaError) {
        for result in await sendAll(records) { _ = try result.get() }
    }

    /// Hands one record to librdkafka, waiting while its local queue is full.
    private func enqueue(_ record: KafkaOutgoingRecord, group: DeliveryGroup, index: Int) async -> KafkaError? {
        let deadline = ContinuousClock.now + configuration.deliveryTimeout
        while true {
            if isShutDown.load(ordering: .relaxed) {
                return KafkaError(kind: .shutDown, context: "the producer is shut down; record for \(record.topic) not sent")
            }
            let id = deliveries.register(group, index: index)
            let code = produce(record, opaque: UnsafeMutableRawPointer(bitPattern: id))
            if code == RD_KAFKA_RESP_ERR_NO_ERROR { return nil }
            // Not taken: no report will come for this id.
            let removed = deliveries.cancel(id)
            precondition(removed, "a record librdkafka refused has no delivery report")
            guard code == RD_KAFKA_RESP_ERR__QUEUE_FULL, ContinuousClock.now < deadline else {
                return KafkaError(.delivery, code, "could not produce to \(record.topic)")
            }
            try? await Task.sleep(for: .milliseconds(2))
        }
    }

    private func produce(_ record: KafkaOutgoingRecord, opaque: UnsafeMutableRawPointer?) -> rd_kafka_resp_err_t {
        var headers: OpaquePointer? = nil
        if !record.headers.isEmpty {
            headers = rd_kafka_headers_new(record.headers.count)
            for header in record.headers {
                if let value = header.value {
                    value.withUnsafeBytes { bytes in
                        _ = rd_kafka_header_add(headers, header.key, -1, bytes.baseAddress, bytes.count)
                    }
                } else {
                    _ = rd_kafka_header_add(headers, header.key, -1, nil, 0)
                }
            }
        }
        let partition = record.partition ?? RD_KAFKA_PARTITION_UA
        let code = record.value.withUnsafeBytes { value in
            withOptionalBytes(record.key) { key in
                pushhub_produce(
                    client.handle, record.topic, partition,
                    key?.baseAddress, key?.count ?? 0,
                    value.baseAddress, value.count,
                    headers, opaque)
            }
        }
        // On success librdkafka owns the headers; on failure they are still ours.
        if code != RD_KAFKA_RESP_ERR_NO_ERROR, let headers { rd_kafka_headers_destroy(headers) }
        return code
    }

    /// Records handed to librdkafka whose delivery report has not arrived yet.
    public var inFlightCount: Int { deliveries.outstanding }

    /// Waits until every record handed over so far is acknowledged or failed.
    public func flush(timeout: Duration) async throws(KafkaError) {
        let client = self.client
        let code = await BlockingCalls.run {
            rd_kafka_flush(client.handle, Int32(clamping: timeout.milliseconds))
        }
        if code != RD_KAFKA_RESP_ERR_NO_ERROR {
            throw KafkaError(.delivery, code, "flush did not finish within \(timeout)")
        }
    }

    /// Stops taking records, flushes what is in flight (up to the delivery time-out), and
    /// fails whatever could still not be delivered. Idempotent.
    public func shutdown() async {
        guard !isShutDown.exchange(true, ordering: .relaxed) else { return }
        do {
            try await flush(timeout: configuration.deliveryTimeout)
        } catch {
            logger.error("Kafka producer shut down with undelivered records", metadata: ["kafka.error": "\(error)"])
        }
        rd_kafka_purge(client.handle, Int32(RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT))
        // Serve the delivery reports the purge produced, then fail anything left.
        rd_kafka_poll(client.handle, 0)
        poller.stop()
        deliveries.failAll(with: KafkaError(kind: .shutDown, context: "the producer shut down before the record was acknowledged"))
    }

    public func run() async throws {
        try? await gracefulShutdown()
        await shutdown()
    }
}

private func withOptionalBytes<R>(_ data: Data?, _ body: (UnsafeRawBufferPointer?) -> R) -> R {
    guard let data else { return body(nil) }
    return data.withUnsafeBytes { body($0) }
}

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

/// A dedicated thread serving a handle's callbacks with `rd_kafka_poll`.
final class PollLoop: Sendable {
    private let stopped = Atomic<Bool>(false)
    private let exited = DispatchSemaphore(value: 0)

    init(client: RDKafkaClient, name: String) {
        let thread = Thread { [self] in
            while !self.stopped.load(ordering: .relaxed) {
                rd_kafka_poll(client.handle, 100)
            }
            self.exited.signal()
        }
        thread.name = name
        thread.start()
    }

    /// Stops the thread and waits for it to leave librdkafka. Idempotent.
    func stop() {
        guard !stopped.exchange(true, ordering: .relaxed) else { return }
        exited.wait()
    }
}
