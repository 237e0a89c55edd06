import Foundation
import Logging
import PushKafka
import PushMetrics
import PushModel
import PushStore
import ServiceLifecycle

/// Settings of the dispatcher.
public struct DispatcherSettings: Sendable {
    public var topics: PushTopics
    /// Targets per DeliveryBatch; also the store's page size.
    public var batchSize = DeliveryBatch.maximumTargets
    /// Batches produced before waiting for their acknowledgements (bounds memory on broadcasts).
    public var batchesInFlight = 16
    /// SendRequests dispatched at the same time. Each waits for the store and for Kafka's
    /// acknowledgements; one at a time, a dispatcher managed about 85 single-user sends a
    /// second. Notifications have no order among themselves, so they may finish in any order.
    public var requestsInFlight = 64
    /// How long one request may keep failing (store or Kafka away) before it is dead-lettered.
    public var retryBudget = RetryBudget()
    /// The hubs this deployment serves; requests for others are rejected.
    public var hubs: [String]

    public init(topics: PushTopics, hubs: [String]) {
        self.topics = topics
        self.hubs = hubs
    }
}

/// Consumes SendRequests, resolves each audience page by page from the store, and produces
/// DeliveryBatches to the platforms' topics and a dispatch summary to the results topic. A
/// request's offset is marked done only after all of that was acknowledged; a record it
/// cannot use goes to the dead-letter topic with the reason, and a `rejected` result.
public final class Dispatcher: Service, Sendable {
    let consumer: KafkaConsumer
    let producer: KafkaProducer
    let store: any RegistrationStore
    let settings: DispatcherSettings
    let logger: Logger

    public init(consumer: KafkaConsumer, producer: KafkaProducer, store: any RegistrationStore, settings: DispatcherSettings, logger: Logger) {
        self.consumer = consumer
        self.producer = producer
        self.store = store
        self.settings = settings
        self.logger = logger
    }

    public func run() async throws {
        await consumer.processEach(
            maximum: settings.requestsInFlight, budget: settings.retryBudget, logger: logger,
            giveUp: { [self] record, reason in try await reject(record, hub: hub(of: record), reason: reason) },
            { [self] record in try await dispatch(record) })
    }

    /// Dispatches one request. What will fail again the same way (a record that breaks the
    /// contract or a limit, an unknown hub, a query the store refuses) throws `PermanentFailure`
    /// and is dead-lettered; anything else is retried within the budget.
    func dispatch(_ record: KafkaRecord) async throws {
        let request: SendRequest
        let expression: TagExpression?
        do {
            (request, expression) = try WireCoding.decodeRequest(from: record.value)
        } catch {
            throw PermanentFailure(error.description)
        }
        guard let hub = settings.hubs.first(where: { $0.caseInsensitiveCompare(request.hub) == .orderedSame }) else {
            throw PermanentFailure("hub: no hub named \(request.hub)")
        }
        var queries: [RegistrationQuery] = []
        switch request.audience {
        case .tags:
            // Parsed once, while the record was checked.
            guard let expression else { throw PermanentFailure("audience.tags: not parsed") }
            queries = [.tagExpression(expression)]
        case .broadcast: queries = [.all]
        case .installationIds(let ids): queries = ids.map(RegistrationQuery.installation)
        case .handles: break
        }
        var batcher = BatchBuilder(request: request, hub: hub, settings: settings, producer: producer)
        if case .handles(let handles) = request.audience {
            for handle in handles {
                try await batcher.add(DeliveryBatch.Target(registrationId: nil, handle: handle.handle, webPush: handle.webPush), on: handle.platform)
            }
        }
        let now = Date()
        for query in queries {
            var cursor: RegistrationCursor?
            repeat {
                let page: RegistrationPage
                do {
                    page = try await store.registrations(hub: hub, matching: query, after: cursor, limit: settings.batchSize)
                } catch let error as SQLError where error.isPermanent {
                    throw PermanentFailure("the store refused the audience's query: \(error.message.prefix(300))")
                }
                for registration in page.registrations where Self.reaches(request, registration, now: now) {
                    try await batcher.add(
                        DeliveryBatch.Target(
                            registrationId: registration.registrationId, handle: registration.handle, webPush: registration.webPush,
                            template: registration.template?.forDelivery),
                        on: registration.platform)
                }
                cursor = page.next
            } while cursor != nil
        }
        let dispatched = try await batcher.finish()
        for (platform, count) in dispatched where count > 0 {
            MetricsRegistry.shared.counter(
                "pushhub_targets_dispatched_total", help: "Targets dispatched to a platform's deliveries topic.",
                labels: ["platform": platform.rawValue]
            ).increment(by: count)
        }
        let summary = ResultBatch(notificationId: request.notificationId, hub: hub, dispatched: dispatched)
        try await producer.sendAllAcknowledged([
            KafkaOutgoingRecord(topic: settings.topics.results, key: request.notificationId, value: WireCoding.encode(summary))
        ])
        logger.info(
            "notification dispatched",
            metadata: ["pushhub.notification_id": "\(request.notificationId)", "pushhub.targets": "\(dispatched.values.reduce(0, +))"])
    }

    /// Native sends reach the native registrations of their platform; template sends every
    /// template registration. Expired registrations are skipped.
    static func reaches(_ request: SendRequest, _ registration: Registration, now: Date) -> Bool {
        if let expiry = registration.expiresAt, expiry < now { return false }
        if request.format == .template { return registration.template != nil }
        return registration.template == nil && registration.platform == request.format.platform
    }

    /// The configured hub a record names, read leniently for a record that could not be used.
    func hub(of record: KafkaRecord) -> String {
        struct Named: Decodable { var hub: String }
        guard !JSONLimits.isTooDeep(record.value), let named = try? JSONDecoder().decode(Named.self, from: record.value) else { return "" }
        return settings.hubs.first { $0.caseInsensitiveCompare(named.hub) == .orderedSame } ?? ""
    }

    /// Dead-letters a record with its reason and reports it `rejected`.
    func reject(_ record: KafkaRecord, hub: String, reason: String) async throws {
        try await RecordRejection.reject(record, hub: hub, reason: reason, topics: settings.topics, producer: producer, logger: logger)
    }
}

/// Collects targets per platform into DeliveryBatches and produces them, a bounded number
/// unacknowledged at a time.
struct BatchBuilder {
    let request: SendRequest
    let hub: String
    let settings: DispatcherSettings
    let producer: KafkaProducer
    private var pending: [Platform: [DeliveryBatch.Target]] = [:]
    private var counts: [Platform: Int] = Dictionary(uniqueKeysWithValues: Platform.allCases.map { ($0, 0) })
    private var unacknowledged: [KafkaOutgoingRecord] = []
    private var batchIndex = 0

    init(request: SendRequest, hub: String, settings: DispatcherSettings, producer: KafkaProducer) {
        self.request = request
        self.hub = hub
        self.settings = settings
        self.producer = producer
    }

    mutating func add(_ target: DeliveryBatch.Target, on platform: Platform) async throws {
        pending[platform, default: []].append(target)
        counts[platform, default: 0] += 1
        if pending[platform]!.count >= settings.batchSize { try await close(platform) }
    }

    /// Produces what is left and waits for every acknowledgement; returns targets per platform.
    mutating func finish() async throws -> [Platform: Int] {
        for platform in Platform.allCases where !(pending[platform]?.isEmpty ?? true) { try await close(platform) }
        try await flush()
        return counts
    }

    private mutating func close(_ platform: Platform) async throws {
        guard let targets = pending.removeValue(forKey: platform), !targets.isEmpty else { return }
        let batch = DeliveryBatch(
            notificationId: request.notificationId, hub: hub, platform: platform, kind: request.format == .template ? .template : .native,
            format: request.format == .template ? nil : request.format, body: request.body, headers: request.headers,
            expiresAt: request.expiresAt, enqueuedAt: request.enqueuedAt, attempt: 1, targets: targets)
        unacknowledged.append(
            KafkaOutgoingRecord(
                topic: settings.topics.deliveries(platform), key: "\(request.notificationId):\(batchIndex)", value: try WireCoding.encode(batch)))
        batchIndex += 1
        if unacknowledged.count >= settings.batchesInFlight { try await flush() }
    }

    private mutating func flush() async throws {
        guard !unacknowledged.isEmpty else { return }
        try await producer.sendAllAcknowledged(unacknowledged)
        unacknowledged.removeAll(keepingCapacity: true)
    }
}
