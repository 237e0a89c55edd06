import PushMetrics

/// Records produced and consumed per topic, failures, and consumer lag.
enum KafkaMetrics {
    /// The series each count goes to, made once per name and labels (each send's two records
    /// looked their counters up in the registry: a hundredth of the ingress's CPU).
    private static let series = SeriesCache<SeriesKey, Counter>()

    private struct SeriesKey: Hashable {
        var name: String
        var topic: String
        var group: String?
    }

    private static func counter(_ name: String, help: String, topic: String, group: String? = nil) -> Counter {
        series.series(SeriesKey(name: name, topic: topic, group: group)) {
            MetricsRegistry.shared.counter(name, help: help, labels: group.map { ["group": $0, "topic": topic] } ?? ["topic": topic])
        }
    }

    static func produced(_ records: [KafkaOutgoingRecord], _ results: [Result<KafkaDeliveryReport, KafkaError>]) {
        var acknowledged: [String: Int] = [:]
        var failed: [String: Int] = [:]
        for (record, result) in zip(records, results) {
            switch result {
            case .success: acknowledged[record.topic, default: 0] += 1
            case .failure: failed[record.topic, default: 0] += 1
            }
        }
        for (topic, count) in acknowledged {
            counter("pushhub_kafka_records_produced_total", help: "Records produced and acknowledged, by topic.", topic: topic).increment(by: count)
        }
        for (topic, count) in failed {
            counter("pushhub_kafka_produce_failures_total", help: "Records that were not acknowledged, by topic.", topic: topic)
                .increment(by: count)
        }
    }

    static func consumed(_ records: [KafkaRecord], group: String) {
        var counts: [String: Int] = [:]
        for record in records { counts[record.topic, default: 0] += 1 }
        for (topic, count) in counts {
            counter("pushhub_kafka_records_consumed_total", help: "Records consumed, by consumer group and topic.", topic: topic, group: group)
                .increment(by: count)
        }
    }

    /// Lag per partition: the high watermark `client` last saw, less the next offset to read.
    static func lag(client: RDKafkaClient, group: String, positions: [KafkaTopicPartition: Int64]) {
        for (partition, next) in positions {
            guard let high = client.lastSeenHighWatermark(of: partition) else { continue }
            MetricsRegistry.shared.gauge(
                "pushhub_kafka_consumer_lag", help: "Records not yet read, by consumer group, topic and partition.",
                labels: ["group": group, "topic": partition.topic, "partition": String(partition.partition)]
            ).set(Int(max(0, high - next)))
        }
    }
}
