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
    /// Publishes an accepted send again, to finish one that stalled: marked, so the
    /// dispatcher takes it though it took the id before.
    func republish(_ request: SendRequest) async throws
    /// Produces the DeliveryBatches of a send whose audience was resolved (`targets` by
    /// platform) as the dispatcher would have, with its dispatch summary to `pushhub.results`
    /// (marked `recorded` when the store took it already); returns once all are acknowledged.
    /// Throws `PartlyPublished` when some batches were acknowledged and others not.
    func publish(_ request: SendRequest, resolved targets: [Platform: [DeliveryBatch.Target]], recorded: Bool) async throws
    /// Whether the workers are close enough behind to take a resolved audience's batches
    /// now; when not, the dispatcher, which waits for them, takes the send. Never waits.
    func workersHaveRoom(on platforms: [Platform]) -> Bool
    /// A reader of one send's results from `pushhub.results`, to make before the send is
    /// published; nil where results cannot be read (debug sends are then refused).
    func resultsTail(of notificationId: String) throws -> SendResultsTail?
}

extension NotificationPublisher {
    public func republish(_ request: SendRequest) async throws { try await publish(request) }
    public func workersHaveRoom(on platforms: [Platform]) -> Bool { true }
    public func resultsTail(of notificationId: String) throws -> SendResultsTail? { nil }
}

/// Some of a resolved send's batches went out, others did not.
public struct PartlyPublished: Error, Sendable {
    public var acknowledged: Int
    public var underlying: any Error

    public init(acknowledged: Int, underlying: any Error) {
        self.acknowledged = acknowledged
        self.underlying = underlying
    }
}

/// Publishes with PushHub's idempotent, `acks=all` producer: SendRequests keyed by notification
/// id, DeliveryBatches as the dispatcher cuts and keys them.
public struct KafkaNotificationPublisher: NotificationPublisher {
    let producer: KafkaProducer
    let topics: PushTopics
    /// What the workers have not committed; nil: always room.
    let backlog: ConsumerBacklog?

    /// Where results are read from, for debug sends; nil: they are not.
    let results: ResultsWatcher?

    public init(
        producer: KafkaProducer, topics: PushTopics, backlog: ConsumerBacklog? = nil, servers: [String]? = nil,
        logger: Logger = Logger(label: "pushhub.ingress.results")
    ) {
        self.producer = producer
        self.topics = topics
        self.backlog = backlog
        results = servers.map { ResultsWatcher(servers: $0, topics: topics, logger: logger) }
    }

    public func resultsTail(of notificationId: String) throws -> SendResultsTail? {
        try results?.tail(of: notificationId)
    }

    public func workersHaveRoom(on platforms: [Platform]) -> Bool {
        guard let backlog else { return true }
        return backlog.hasRoom(in: platforms.count == Platform.allCases.count ? topics.allDeliveries : platforms.map(topics.deliveries))
    }

    public func publish(_ request: SendRequest) async throws {
        try await producer.send(
            KafkaOutgoingRecord(
                topic: topics.requests, key: request.notificationId, value: WireCoding.encode(request), headers: TraceHeaders.headers()))
    }

    public func republish(_ request: SendRequest) async throws {
        try await producer.send(
            KafkaOutgoingRecord(
                topic: topics.requests, key: request.notificationId, value: try WireCoding.encode(request),
                headers: [KafkaHeader(key: Dispatcher.republishedHeader, value: "recovery")]))
    }

    public func publish(_ request: SendRequest, resolved targets: [Platform: [DeliveryBatch.Target]], recorded: Bool) async throws {
        let dispatched = DeliveryBatch.counts(of: targets)
        // The summary goes with the last batches, in one round trip. Marked, the outcome
        // recorder passes over it; were it published and the batches not, the send is
        // forgotten and a marked summary records nothing.
        let summary = try BatchBuilder.summary(
            of: request, hub: request.hub, dispatched: dispatched, topics: topics,
            headers: (recorded ? [OutcomeRecorder.recordedHeader] : []) + TraceHeaders.headers())
        var batcher = BatchBuilder(request: request, hub: request.hub, topics: topics, producer: producer)
        do {
            for platform in Platform.allCases {
                for target in targets[platform] ?? [] { try await batcher.add(target, on: platform) }
            }
            BatchBuilder.count(try await batcher.finish(trailing: [summary]))
        } catch {
            batcher.abandon(error)
            guard batcher.acknowledged == 0 else { throw PartlyPublished(acknowledged: batcher.acknowledged, underlying: error) }
            throw error
        }
    }
}
