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
        forEachRun(min(records.count, results.count), topic: { records[$0].topic }) { topic, run in
            let acknowledged = run.count { if case .success = results[$0] { true } else { false } }
            if acknowledged > 0 {
                counter("pushhub_kafka_records_produced_total", help: "Records produced and acknowledged, by topic.", topic: topic)
                    .increment(by: acknowledged)
            }
            if acknowledged < run.count {
                counter("pushhub_kafka_produce_failures_total", help: "Records that were not acknowledged, by topic.", topic: topic)
                    .increment(by: run.count - acknowledged)
            }
        }
    }

    static func consumed(_ records: [KafkaRecord], group: String) {
        forEachRun(records.count, topic: { records[$0].topic }) { topic, run in
            counter("pushhub_kafka_records_consumed_total", help: "Records consumed, by consumer group and topic.", topic: topic, group: group)
                .increment(by: run.count)
        }
    }

    /// Calls `body` with each run of records of one topic among the first `count`, in order:
    /// records come in such runs (a send's one or two, a dispatch's batches), so each run's
    /// count goes to its series at once, without a dictionary made for every call.
    private static func forEachRun(_ count: Int, topic: (Int) -> String, _ body: (String, Range<Int>) -> Void) {
        var start = 0
        while start < count {
            let name = topic(start)
            var end = start + 1
            while end < count, topic(end) == name { end += 1 }
            body(name, start..<end)
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
