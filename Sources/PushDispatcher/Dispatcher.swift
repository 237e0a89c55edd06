import Foundation
import Logging
import PushKafka
import PushMetrics
import PushModel
import PushStore
import ServiceLifecycle
import Tracing

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
    /// How far the workers may fall behind before the dispatcher waits for them (nil: never
    /// waits; `backlog.bytesPerPartition` in pushhub.yaml). The embedded cluster drops a
    /// partition's oldest records past 5 MiB, read or not.
    public var deliveryBacklog: ConsumerBacklog.Settings? = ConsumerBacklog.Settings()
    /// How long a dispatched notification id is remembered, so a SendRequest produced twice
    /// is dispatched once (0: not remembered). Needs a store that keeps them.
    public var dedupeWindow: TimeInterval = 86_400
    /// The consumer group of each platform's workers, whose progress the backlog reads.
    public var workerGroups: [Platform: String] = Dictionary(uniqueKeysWithValues: Platform.allCases.map { ($0, $0.workerGroup) })

    public init(topics: PushTopics, hubs: [String]) {
        self.topics = topics
        self.hubs = hubs
    }

    /// Waits for the workers once a partition holds `bound` bytes they have not committed
    /// (never when nil); `group` names each platform's workers' consumer group.
    public mutating func waitForWorkers(bound: Int?, group: (Platform) -> String) {
        deliveryBacklog = bound.map { bytes in
            var settings = ConsumerBacklog.Settings()
            settings.boundPerPartition = bytes
            return settings
        }
        workerGroups = Dictionary(uniqueKeysWithValues: Platform.allCases.map { ($0, group($0)) })
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
    /// What the workers have not committed yet; nil when the dispatcher does not wait for them.
    let backlog: ConsumerBacklog?
    let logger: Logger

    /// The notification ids dispatched, so one produced twice is dispatched once; nil: none.
    let ledger: (any IdempotencyStore)?
    /// Marks a SendRequest the ingress published again on purpose (recovery of a stalled
    /// send), which the dispatcher takes though it took the id before.
    public static let republishedHeader = "pushhub-republished"
    static let duplicates = MetricsRegistry.shared.counter(
        "pushhub_dispatch_duplicates_total", help: "SendRequests not dispatched because their notification id was dispatched already.")

    public init(
        consumer: KafkaConsumer, producer: KafkaProducer, store: any RegistrationStore, ledger: (any IdempotencyStore)? = nil,
        settings: DispatcherSettings, backlog: ConsumerBacklog? = nil, logger: Logger
    ) {
        self.consumer = consumer
        self.producer = producer
        self.store = store
        self.ledger = ledger
        self.settings = settings
        self.backlog = backlog
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
        guard TraceHeaders.isActive else { return try await dispatchRequest(record) }
        // A span under the context the record carries (the ingress's accept, or a producer's
        // own); its batches and summary carry it on.
        try await withSpan("pushhub.dispatch", context: TraceHeaders.context(of: record), ofKind: .consumer) { span in
            span.attributes["kafka.offset"] = "\(record.topic):\(record.partition):\(record.offset)"
            try await dispatchRequest(record)
        }
    }

    private func dispatchRequest(_ record: KafkaRecord) async throws {
        let request: SendRequest
        let expression: TagExpression?
        do {
            (request, expression) = try WireCoding.decodeRequest(from: record.value)
        } catch {
            throw PermanentFailure(error.description)
        }
        guard let hub = settings.hubs.first(where: { CaseFolding.equal($0, request.hub) }) else {
            throw PermanentFailure("hub: no hub named \(request.hub)")
        }
        // A SendRequest produced twice (another service retrying its produce) is dispatched
        // once; the same record again (a redelivery after a crash) goes on, as does one the
        // ingress published again on purpose, to finish a send that stalled.
        let source = "\(record.topic):\(record.partition):\(record.offset)"
        let noted = settings.dedupeWindow > 0 && ledger != nil && record.header(Self.republishedHeader) == nil
        if noted, let ledger,
            !(try await ledger.claimDispatch(
                hub: hub, notificationId: request.notificationId, source: source, now: Date(), window: settings.dedupeWindow))
        {
            Self.duplicates.increment()
            logger.notice(
                "a SendRequest already dispatched came again; not dispatched again",
                metadata: ["pushhub.notification_id": "\(request.notificationId)", "kafka.offset": "\(record.partition):\(record.offset)"])
            return
        }
        var batcher = BatchBuilder(
            request: request, hub: hub, topics: settings.topics, batchSize: settings.batchSize, batchesInFlight: settings.batchesInFlight,
            producer: producer, backlog: backlog)
        let dispatched: [Platform: Int]
        do {
            try await AudienceResolver(store: store).forEachTarget(of: request, expression: expression, hub: hub, pageSize: settings.batchSize) {
                target, platform in try await batcher.add(target, on: platform)
            }
            dispatched = try await batcher.finish()
        } catch let error as SQLError where error.isPermanent {
            batcher.abandon(error)
            // Dead-lettered: nothing was dispatched from this record, so a corrected one with
            // the same id may be.
            if noted { try? await ledger?.releaseDispatch(hub: hub, notificationId: request.notificationId, source: source) }
            throw PermanentFailure("the store refused the audience's query: \(error.message.prefix(300))")
        } catch {
            batcher.abandon(error)
            throw error
        }
        BatchBuilder.count(dispatched)
        try await producer.sendAllAcknowledged([
            BatchBuilder.summary(of: request, hub: hub, dispatched: dispatched, topics: settings.topics, headers: TraceHeaders.headers())
        ])
        logger.info(
            "notification dispatched",
            metadata: ["pushhub.notification_id": "\(request.notificationId)", "pushhub.targets": "\(dispatched.values.reduce(0, +))"])
    }

    /// The configured hub a record names, read leniently for a record that could not be used.
    func hub(of record: KafkaRecord) -> String {
        let named = RecordRejection.hub(of: record)
        return settings.hubs.first { CaseFolding.equal($0, named) } ?? ""
    }

    /// Dead-letters a record with its reason and reports it `rejected`.
    func reject(_ record: KafkaRecord, hub: String, reason: String) async throws {
        try await RecordRejection.reject(record, hub: hub, reason: reason, topics: settings.topics, producer: producer, logger: logger)
    }
}

/// A send's audience, read from the store: the dispatcher's whole job, and the ingress's for
/// an audience small enough to resolve as the send is accepted.
public struct AudienceResolver: Sendable {
    let store: any RegistrationStore
    /// Most installation ids a small audience names: each is a query of its own.
    public static let smallInstallationIds = 10

    public init(store: any RegistrationStore) { self.store = store }

    /// Calls `add` with each target the request reaches, reading the store a page of
    /// `pageSize` at a time. Direct handles are targets as they are. The store passes over the
    /// registrations of other formats; given `examined`, it reads them too, and `examined`
    /// hears how many registrations each page read, matching or not, so that a caller can
    /// bound the reading.
    public func forEachTarget(
        of request: SendRequest, expression: TagExpression?, hub: String, pageSize: Int, now: Date = Date(),
        examined: ((Int) throws -> Void)? = nil, _ add: (DeliveryBatch.Target, Platform) async throws -> Void
    ) async throws {
        if case .handles(let handles) = request.audience {
            for handle in Self.distinct(handles) {
                try await add(DeliveryBatch.Target(registrationId: nil, handle: handle.handle, webPush: handle.webPush), handle.platform)
            }
            return
        }
        for query in try Self.queries(of: request, expression: expression) {
            var cursor: RegistrationCursor?
            repeat {
                let page = try await store.deliveryCandidates(
                    hub: hub, matching: query, reaching: examined == nil ? request.format : nil, after: cursor, limit: pageSize)
                for candidate in page.candidates where Self.reaches(request, candidate, now: now) {
                    try await add(Self.target(candidate), candidate.platform)
                }
                try examined?(page.candidates.count)
                cursor = page.next
            } while cursor != nil
        }
    }

    /// Up to `limit` of the targets a request reaches, by platform, and how many it reaches,
    /// counted up to `countLimit` among at most `examining` registrations read (a debug
    /// send's sample: a native send to a hub of other platforms, or `!tag`, would otherwise
    /// read every registration).
    public func sample(
        of request: SendRequest, expression: TagExpression?, hub: String, picking limit: Int, countingUpTo countLimit: Int, examining: Int,
        now: Date = Date()
    ) async throws -> AudienceSample {
        struct Counted: Error {}
        var sample = AudienceSample()
        var read = 0
        do {
            try await forEachTarget(
                of: request, expression: expression, hub: hub, pageSize: 1_000, now: now,
                examined: { count in
                    read += count
                    if read >= examining { throw Counted() }
                }
            ) { target, platform in
                if sample.matched < limit { sample.targets[platform, default: []].append(target) }
                sample.matched += 1
                if sample.matched >= countLimit { throw Counted() }
            }
        } catch is Counted {
            sample.capped = true
        }
        return sample
    }

    /// The targets of an audience of at most `limit` registrations per query, by platform; nil
    /// when it may be larger: a broadcast, more than `smallInstallationIds` installations, or a
    /// tag expression that matches a full page.
    public func smallAudience(of request: SendRequest, expression: TagExpression?, hub: String, limit: Int, now: Date = Date()) async throws
        -> [Platform: [DeliveryBatch.Target]]?
    {
        var targets: [Platform: [DeliveryBatch.Target]] = [:]
        switch request.audience {
        case .broadcast: return nil
        case .installationIds(let ids) where ids.count > Self.smallInstallationIds: return nil
        case .handles(let handles):
            for handle in Self.distinct(handles) {
                targets[handle.platform, default: []].append(
                    DeliveryBatch.Target(registrationId: nil, handle: handle.handle, webPush: handle.webPush))
            }
            return targets
        case .tags, .installationIds: break
        }
        for query in try Self.queries(of: request, expression: expression) {
            let page = try await store.deliveryCandidates(hub: hub, matching: query, reaching: request.format, after: nil, limit: limit)
            guard page.next == nil else { return nil }
            for candidate in page.candidates where Self.reaches(request, candidate, now: now) {
                targets[candidate.platform, default: []].append(Self.target(candidate))
            }
        }
        return targets
    }

    /// The store queries that find a request's registrations; none for direct handles.
    static func queries(of request: SendRequest, expression: TagExpression?) throws -> [RegistrationQuery] {
        switch request.audience {
        case .tags:
            // Parsed once, while the record was checked.
            guard let expression else { throw PermanentFailure("audience.tags: not parsed") }
            return [.tagExpression(expression)]
        case .broadcast: return [.all]
        case .installationIds(let ids): return distinct(ids, by: { $0 }).map(RegistrationQuery.installation)
        case .handles: return []
        }
    }

    /// Each handle of a direct send once, by platform and bytes as its results are counted
    /// (`ResultBatch.targetKeys`): one named twice would be pushed twice and counted once, and
    /// its send would wait for a result that never comes (a send another service produced, or
    /// a `$batch` whose list repeats a device).
    static func distinct(_ handles: [DirectHandle]) -> [DirectHandle] {
        distinct(handles) { "\($0.platform.rawValue)\t\($0.handle)" }
    }

    /// `items` without repeats of `key` (compared as bytes, as the store compares), in order.
    static func distinct<Item>(_ items: [Item], by key: (Item) -> String) -> [Item] {
        var seen = Set<[UInt8]>()
        seen.reserveCapacity(items.count)
        return items.filter { seen.insert(Array(key($0).utf8)).inserted }
    }

    static func target(_ candidate: DeliveryCandidate) -> DeliveryBatch.Target {
        DeliveryBatch.Target(
            registrationId: candidate.registrationId, handle: candidate.handle, webPush: candidate.webPush, template: candidate.template)
    }

    /// Native sends reach the native registrations of their platform; template sends every
    /// template registration. Expired registrations are skipped.
    static func reaches(_ request: SendRequest, _ candidate: DeliveryCandidate, now: Date) -> Bool {
        if let expiry = candidate.expiresAt, expiry < now { return false }
        return candidate.isReached(by: request.format)
    }
}

/// Some of the targets of a send, and how many there are.
public struct AudienceSample: Sendable {
    public var targets: [Platform: [DeliveryBatch.Target]] = [:]
    /// Targets the send reaches; with `capped`, at least this many.
    public var matched = 0
    /// Counting stopped before the audience's end (at the count's or the reading's limit).
    public var capped = false

    public init() {}
}

/// Collects targets per platform into DeliveryBatches and produces them, a bounded number
/// unacknowledged at a time.
public struct BatchBuilder {
    let request: SendRequest
    let hub: String
    let topics: PushTopics
    let batchSize: Int
    let batchesInFlight: Int
    let producer: KafkaProducer
    /// Waited on before each round of batches, so they do not run too far ahead of the workers.
    let backlog: ConsumerBacklog?
    private var pending: [Platform: [DeliveryBatch.Target]] = [:]
    private var counts: [Platform: Int] = Dictionary(uniqueKeysWithValues: Platform.allCases.map { ($0, 0) })
    private var unacknowledged: [KafkaOutgoingRecord] = []
    /// The spans of the batches not yet acknowledged (when tracing), by their record's place in
    /// `unacknowledged`, each ended with its record's result (or by `abandon`).
    private var batchSpans: [(record: Int, span: any Span)] = []
    private var unacknowledgedBytes = 0
    /// Bytes of batches produced before waiting for their acknowledgements, besides their
    /// count: a round stays well under what the workers' backlog may hold.
    static let bytesInFlight = 1 << 20
    private var batchIndex = 0
    /// Batches Kafka acknowledged so far: after a failure, whether some went out.
    public private(set) var acknowledged = 0

    /// Batches of at most `batchSize` targets, at most `batchesInFlight` unacknowledged.
    public init(
        request: SendRequest, hub: String, topics: PushTopics, batchSize: Int = DeliveryBatch.maximumTargets, batchesInFlight: Int = 16,
        producer: KafkaProducer, backlog: ConsumerBacklog? = nil
    ) {
        self.request = request
        self.hub = hub
        self.topics = topics
        self.batchSize = batchSize
        self.batchesInFlight = batchesInFlight
        self.producer = producer
        self.backlog = backlog
    }

    public mutating func add(_ target: DeliveryBatch.Target, on platform: Platform) async throws {
        pending[platform, default: []].append(target)
        counts[platform, default: 0] += 1
        if pending[platform]!.count >= batchSize { try await close(platform) }
    }

    /// Produces what is left, with `trailing` records after the last batches, and waits for
    /// every acknowledgement; returns targets per platform (every platform named, zero where
    /// none).
    public mutating func finish(trailing: [KafkaOutgoingRecord] = []) async throws -> [Platform: Int] {
        for platform in Platform.allCases where !(pending[platform]?.isEmpty ?? true) { try await close(platform) }
        unacknowledged.append(contentsOf: trailing)
        try await flush()
        return counts
    }

    /// The dispatch summary of a request, for `pushhub.results`: produced once every batch was
    /// acknowledged.
    public static func summary(
        of request: SendRequest, hub: String, dispatched: [Platform: Int], topics: PushTopics, headers: [KafkaHeader] = []
    ) throws -> KafkaOutgoingRecord {
        let summary = ResultBatch(notificationId: request.notificationId, hub: hub, dispatched: dispatched)
        return KafkaOutgoingRecord(
            topic: topics.results, key: request.notificationId, value: try WireCoding.encode(summary), headers: headers, sticky: true)
    }

    /// Counts dispatched targets in the metrics.
    public static func count(_ dispatched: [Platform: Int]) {
        for (platform, count) in dispatched where count > 0 { dispatchedTargets[platform]?.increment(by: count) }
    }

    /// Each platform's series of dispatched targets, made once.
    static let dispatchedTargets = Dictionary(
        uniqueKeysWithValues: Platform.allCases.map { platform in
            (
                platform,
                MetricsRegistry.shared.counter(
                    "pushhub_targets_dispatched_total", help: "Targets dispatched to a platform's deliveries topic.",
                    labels: ["platform": platform.rawValue])
            )
        })

    private mutating func close(_ platform: Platform) async throws {
        guard let targets = pending.removeValue(forKey: platform), !targets.isEmpty else { return }
        let (request, hub) = (request, hub)
        // Cut further when the batch is too large for a record (targets with long handles, or
        // templates of their own): a record Kafka refuses would never go.
        let values = try WireCoding.encodeInParts(targets) { targets in
            DeliveryBatch(
                notificationId: request.notificationId, hub: hub, platform: platform, kind: request.format == .template ? .template : .native,
                format: request.format == .template ? nil : request.format, body: request.body, headers: request.headers,
                expiresAt: request.expiresAt, enqueuedAt: request.enqueuedAt, attempt: 1, targets: targets)
        }
        for value in values {
            // A span per batch, under the one producing it (dispatch, or the ingress's accept); the
            // batch carries it to its worker.
            var headers: [KafkaHeader] = []
            if TraceHeaders.isActive {
                let span = startSpan("pushhub.dispatch.batch", ofKind: .producer)
                span.attributes["pushhub.platform"] = platform.rawValue
                if values.count == 1 { span.attributes["pushhub.targets"] = targets.count }
                span.attributes["pushhub.batch"] = batchIndex
                headers = TraceHeaders.headers(for: span.context)
                batchSpans.append((unacknowledged.count, span))
            }
            unacknowledged.append(
                KafkaOutgoingRecord(
                    topic: topics.deliveries(platform), key: "\(request.notificationId):\(batchIndex)", value: value, headers: headers,
                    sticky: true))
            batchIndex += 1
            unacknowledgedBytes += value.count
            if unacknowledged.count >= batchesInFlight || unacknowledgedBytes >= Self.bytesInFlight { try await flush() }
        }
    }

    /// Ends the spans of batches that will not be produced now (the dispatch failed); the
    /// builder is not used after.
    public mutating func abandon(_ error: any Error) {
        for (_, span) in batchSpans {
            span.recordError(error)
            span.setStatus(SpanStatus(code: .error))
            span.end()
        }
        batchSpans.removeAll()
    }

    private mutating func flush() async throws {
        guard !unacknowledged.isEmpty else { return }
        let reservation = try await backlog?.reserve(unacknowledged)
        let results = await producer.sendAll(unacknowledged)
        if let reservation { backlog?.produced(reservation, records: unacknowledged, results: results) }
        let deliveryTopics = topics.allDeliveries
        for (record, result) in zip(unacknowledged, results) {
            if case .success = result, deliveryTopics.contains(record.topic) { acknowledged += 1 }
        }
        unacknowledged.removeAll(keepingCapacity: true)
        unacknowledgedBytes = 0
        for (record, span) in batchSpans {
            if record < results.count, case .failure(let error) = results[record] {
                span.recordError(error)
                span.setStatus(SpanStatus(code: .error))
            }
            span.end()
        }
        batchSpans.removeAll()
        for result in results { _ = try result.get() }
    }
}
