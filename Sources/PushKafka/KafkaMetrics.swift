import PushMetrics

/// Records produced and consumed per topic, failures, and consumer lag.
enum KafkaMetrics {
    static func produced(_ records: [KafkaOutgoingRecord], _ results: [Result<KafkaDeliveryReport, KafkaError>]) {
        var acknowledged: [String: Int] = [:]
        var failed: [String: Int] = [:]
        for (record, result) in zip(records, results) {
            switch result {
            case .success: acknowledged[record.topic, default: 0] += 1
            case .failure: failed[record.topic, default: 0] += 1
            }
        }
        let metrics = MetricsRegistry.shared
        for (topic, count) in acknowledged {
            metrics.counter("pushhub_kafka_records_produced_total", help: "Records produced and acknowledged, by topic.", labels: ["topic": topic])
                .increment(by: count)
        }
        for (topic, count) in failed {
            metrics.counter("pushhub_kafka_produce_failures_total", help: "Records that were not acknowledged, by topic.", labels: ["topic": topic])
                .increment(by: count)
        }
    }

    static func consumed(_ records: [KafkaRecord], group: String) {
        var counts: [String: Int] = [:]
        for record in records { counts[record.topic, default: 0] += 1 }
        for (topic, count) in counts {
            MetricsRegistry.shared.counter(
                "pushhub_kafka_records_consumed_total", help: "Records consumed, by consumer group and topic.",
                labels: ["group": group, "topic": topic]
            ).increment(by: count)
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
