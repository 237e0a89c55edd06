import Foundation
import Logging
import PushDispatcher
import PushKafka
import PushModel

/// Where accepted sends go: `pushhub.requests`, or, for an audience the ingress resolved, the
/// platforms' deliveries topics, acknowledged before the caller hears back.
public protocol NotificationPublisher: Sendable {
    /// Returns once the request is durably queued; throws when it could not be.
    func publish(_ request: SendRequest) async throws
    /// Produces the DeliveryBatches of a send whose audience was resolved (`targets` by
    /// platform) as the dispatcher would have, and once all are acknowledged its dispatch
    /// summary to `pushhub.results`. Throws when a batch could not be queued; a summary that
    /// could not be is only logged, since the batches are on their way and the store has it.
    func publish(_ request: SendRequest, resolved targets: [Platform: [DeliveryBatch.Target]]) async throws
}

/// Publishes with PushHub's idempotent, `acks=all` producer: SendRequests keyed by notification
/// id, DeliveryBatches as the dispatcher cuts and keys them.
public struct KafkaNotificationPublisher: NotificationPublisher {
    let producer: KafkaProducer
    let topics: PushTopics
    let logger: Logger

    public init(producer: KafkaProducer, topics: PushTopics, logger: Logger = Logger(label: "pushhub.ingress.publisher")) {
        self.producer = producer
        self.topics = topics
        self.logger = logger
    }

    public func publish(_ request: SendRequest) async throws {
        try await producer.send(KafkaOutgoingRecord(topic: topics.requests, key: request.notificationId, value: WireCoding.encode(request)))
    }

    public func publish(_ request: SendRequest, resolved targets: [Platform: [DeliveryBatch.Target]]) async throws {
        var batcher = BatchBuilder(request: request, hub: request.hub, topics: topics, producer: producer)
        for platform in Platform.allCases {
            for target in targets[platform] ?? [] { try await batcher.add(target, on: platform) }
        }
        let dispatched = try await batcher.finish()
        BatchBuilder.count(dispatched)
        do {
            // The store took this summary with the send's Enqueued row: the outcome recorder
            // passes over it.
            let summary = try BatchBuilder.summary(
                of: request, hub: request.hub, dispatched: dispatched, topics: topics, headers: [OutcomeRecorder.recordedHeader])
            try await producer.sendAllAcknowledged([summary])
        } catch {
            logger.warning(
                "dispatch summary not published; the send's batches are",
                metadata: ["pushhub.notification_id": "\(request.notificationId)", "pushhub.error": "\(error)"])
        }
    }
}
