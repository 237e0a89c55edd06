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
        // Counted by runs of one topic, which is how records come (a send's one or two, a
        // dispatch's batches): no dictionary made for each call.
        var run: (topic: String, acknowledged: Int, failed: Int)?
        for (record, result) in zip(records, results) {
            if let current = run, current.topic != record.topic {
                countProduced(current)
                run = nil
            }
            var current = run ?? (record.topic, 0, 0)
            if case .success = result { current.acknowledged += 1 } else { current.failed += 1 }
            run = current
        }
        if let run { countProduced(run) }
    }

    private static func countProduced(_ run: (topic: String, acknowledged: Int, failed: Int)) {
        if run.acknowledged > 0 {
            counter("pushhub_kafka_records_produced_total", help: "Records produced and acknowledged, by topic.", topic: run.topic)
                .increment(by: run.acknowledged)
        }
        if run.failed > 0 {
            counter("pushhub_kafka_produce_failures_total", help: "Records that were not acknowledged, by topic.", topic: run.topic)
                .increment(by: run.failed)
        }
    }

    static func consumed(_ records: [KafkaRecord], group: String) {
        var start = records.startIndex
        while start < records.endIndex {
            let topic = records[start].topic
            var end = start + 1
            while end < records.endIndex, records[end].topic == topic { end += 1 }
            counter("pushhub_kafka_records_consumed_total", help: "Records consumed, by consumer group and topic.", topic: topic, group: group)
                .increment(by: end - start)
            start = end
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
