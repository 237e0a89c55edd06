import Foundation
import Logging
import PushKafka
import PushModel
import PushStore
import ServiceLifecycle

/// Consumes `pushhub.results` inside the ingress: dispatch summaries and delivery results
/// become per-notification outcomes, and dead handles are pruned. A record's offset is marked
/// done only after the store took it, so a restart repeats (and the store ignores) rather than
/// loses results.
public final class OutcomeRecorder: Service, Sendable {
    let consumer: KafkaConsumer
    let store: any RegistrationStore & OutcomeStore
    let logger: Logger

    public init(consumer: KafkaConsumer, store: any RegistrationStore & OutcomeStore, logger: Logger) {
        self.consumer = consumer
        self.store = store
        self.logger = logger
    }

    public func run() async throws {
        await consumer.processEach(logger: logger) { [self] record in try await apply(record) }
    }

    func apply(_ record: KafkaRecord) async throws {
        let batch: ResultBatch
        do {
            batch = try WireCoding.decode(ResultBatch.self, from: record.value)
        } catch {
            // Nothing to count; a malformed result is logged and skipped, never retried forever.
            logger.warning("unreadable result record skipped", metadata: ["kafka.offset": "\(record.offset)", "pushhub.error": "\(error)"])
            return
        }
        guard try await store.recordOutcomes(batch, now: Date()) else { return }
        for result in batch.results ?? [] where result.outcome == .invalidHandle {
            guard let registrationId = result.registrationId else { continue }
            try await store.pruneInvalidHandle(hub: batch.hub, registrationId: registrationId)
        }
    }
}
