import Foundation
import PushMetrics
import Testing

@testable import PushKafka

@Suite("Kafka's record counts")
struct KafkaMetricsTests {
    static func value(_ name: String, _ labels: [String: String]) -> Int {
        MetricsRegistry.shared.counter(name, help: "", labels: labels).value
    }

    @Test("records produced and not acknowledged are counted by topic, in runs of one topic and mixed")
    func produced() {
        let topics = (0..<3).map { "metrics-test-\(UUID().uuidString)-\($0)" }
        let records = [0, 0, 1, 0, 2, 2, 2].map { KafkaOutgoingRecord(topic: topics[$0], key: "k", value: Data()) }
        let failure = KafkaError(kind: .delivery, context: "test")
        let results: [Result<KafkaDeliveryReport, KafkaError>] = [true, false, true, true, true, false, true].enumerated().map {
            $0.element ? .success(KafkaDeliveryReport(topic: records[$0.offset].topic, partition: 0, offset: 0)) : .failure(failure)
        }
        KafkaMetrics.produced(records, results)
        KafkaMetrics.produced(Array(records.prefix(1)), Array(results.prefix(1)))
        let produced = topics.map { Self.value("pushhub_kafka_records_produced_total", ["topic": $0]) }
        let failed = topics.map { Self.value("pushhub_kafka_produce_failures_total", ["topic": $0]) }
        #expect(produced == [3, 1, 2])
        #expect(failed == [1, 0, 1])
    }

    @Test("records consumed are counted by group and topic")
    func consumed() {
        let topics = (0..<2).map { "metrics-test-\(UUID().uuidString)-\($0)" }
        let records = [0, 1, 1, 0, 0].map {
            KafkaRecord(topic: topics[$0], partition: 0, offset: 0, key: nil, value: Data(), headers: [], timestampMilliseconds: nil, generation: 0)
        }
        KafkaMetrics.consumed(records, group: "g1")
        KafkaMetrics.consumed([], group: "g1")
        KafkaMetrics.consumed(Array(records.suffix(1)), group: "g2")
        #expect(topics.map { Self.value("pushhub_kafka_records_consumed_total", ["group": "g1", "topic": $0]) } == [3, 2])
        #expect(topics.map { Self.value("pushhub_kafka_records_consumed_total", ["group": "g2", "topic": $0]) } == [1, 0])
    }
}
