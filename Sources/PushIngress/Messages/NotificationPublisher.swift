import Foundation
import PushKafka
import PushModel

/// Where accepted sends go: `pushhub.requests`, acknowledged before the caller hears back.
public protocol NotificationPublisher: Sendable {
    /// Returns once the request is durably queued; throws when it could not be.
    func publish(_ request: SendRequest) async throws
}

/// Publishes SendRequests with PushHub's idempotent, `acks=all` producer, keyed by notification id.
public struct KafkaNotificationPublisher: NotificationPublisher {
    let producer: KafkaProducer
    let topics: PushTopics

    public init(producer: KafkaProducer, topics: PushTopics) {
        self.producer = producer
        self.topics = topics
    }

    public func publish(_ request: SendRequest) async throws {
        try await producer.send(KafkaOutgoingRecord(topic: topics.requests, key: request.notificationId, value: WireCoding.encode(request)))
    }
}
