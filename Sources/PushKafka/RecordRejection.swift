import Foundation
import Logging
import PushMetrics
import PushModel

/// What a consumer does with a record it cannot use: the original bytes to the dead-letter
/// topic with the reason, and (for records that belong to a notification) a `rejected`
/// result so the notification's outcome says why.
public enum RecordRejection {
    /// Dead-letters `record` and reports it `rejected` for its notification (its key's id).
    public static func reject(
        _ record: KafkaRecord, hub: String, reason: String, topics: PushTopics, producer: KafkaProducer, logger: Logger
    ) async throws {
        // The key's id only when it is one (a UUID, as every notification's): the key of a record
        // another service produced may hold anything, and the result is kept under it.
        let notificationId =
            record.keyString.flatMap { $0.split(separator: ":").first.map(String.init) }.flatMap { FieldCheck.isUUID($0) ? $0 : nil } ?? "unknown"
        // Reasons quote what they refuse, and a record is up to Kafka's whole size: bounded, so
        // that the result (and the dead letter's header) can always be produced.
        let reason = reason.utf8Prefix(maximumReason)
        let result = ResultBatch(
            notificationId: notificationId, hub: hub,
            results: [DeliveryResult(registrationId: nil, handle: nil, outcome: .rejected, pnsReason: reason, attempts: 0, dwellMs: 0)])
        try await deadLetter(
            record, reason: reason, topics: topics, producer: producer, logger: logger,
            with: [KafkaOutgoingRecord(topic: topics.results, key: notificationId, value: try WireCoding.encode(result))])
    }

    /// The hub a record names, read leniently for one that could not be used (its `hub` when
    /// that is a hub's name; otherwise none): its `rejected` result then settles its send, whose
    /// outcome counts only results of its own hub.
    public static func hub(of record: KafkaRecord) -> String {
        struct Named: Decodable { var hub: String }
        guard !JSONLimits.isTooDeep(record.value), let named = try? JSONDecoder().decode(Named.self, from: record.value),
            (try? FieldCheck.hubName(named.hub, "hub")) != nil
        else { return "" }
        return named.hub
    }

    /// Dead-letters `record` with its reason, and nothing else: for results, whose own
    /// rejection would be another result.
    public static func deadLetter(
        _ record: KafkaRecord, reason: String, topics: PushTopics, producer: KafkaProducer, logger: Logger,
        with others: [KafkaOutgoingRecord] = []
    ) async throws {
        try await deadLetter(
            key: record.key, value: record.value, from: record.topic, reason: reason, topics: topics, producer: producer, logger: logger,
            with: others)
    }

    /// Dead-letters `value` (under `key`), which came from (or was made of records of)
    /// `sourceTopic`, with its reason: counted, logged, and copied whole or cut to size.
    public static func deadLetter(
        key: Data?, value: Data, from sourceTopic: String, reason: String, topics: PushTopics, producer: KafkaProducer, logger: Logger,
        with others: [KafkaOutgoingRecord] = []
    ) async throws {
        MetricsRegistry.shared.counter(
            "pushhub_dead_letters_total", help: "Records sent to the dead-letter topic, by the topic they came from.", labels: ["topic": sourceTopic]
        ).increment()
        logger.warning(
            "record rejected",
            metadata: [
                "pushhub.notification_id": "\(key.map { String(decoding: $0, as: UTF8.self) } ?? "")", "kafka.topic": "\(sourceTopic)",
                "pushhub.reason": "\(reason.utf8Prefix(500))",
            ])
        // A record near Kafka's size limit cannot be produced again with headers added: its
        // copy is cut, and says so, so giving it up cannot fail for ever.
        var headers = [
            KafkaHeader(key: DeadLetterHeader.error, value: reason.utf8Prefix(maximumReason)),
            KafkaHeader(key: DeadLetterHeader.sourceTopic, value: sourceTopic),
        ]
        var value = value
        var key = key
        if value.count + (key?.count ?? 0) > maximumCopy {
            headers.append(
                KafkaHeader(
                    key: "pushhub-truncated", value: "value of \(value.count) bytes and key of \(key?.count ?? 0) cut to \(maximumCopy / 2) each"))
            value = value.prefix(maximumCopy / 2)
            key = key.map { $0.prefix(maximumCopy / 2) }
        }
        try await producer.sendAllAcknowledged(
            [KafkaOutgoingRecord(topic: topics.deadLetter, key: key, value: value, headers: headers)] + others)
    }

    /// The most bytes of a reason a dead letter's header and a `rejected` result carry.
    public static let maximumReason = 4096

    /// The most bytes of a record's key and value copied to the dead-letter topic whole.
    static let maximumCopy = 512 * 1024
}
