import Foundation
import Logging
import PushKafka
import PushModel
import PushStore
import ServiceLifecycle
import Tracing

/// Consumes `pushhub.results` inside the ingress: dispatch summaries and delivery results
/// become per-notification outcomes, and dead handles are pruned. A record's offset is marked
/// done only after the store took it, so a restart repeats (and the store ignores) rather than
/// loses results.
public final class OutcomeRecorder: Service, Sendable {
    let consumer: KafkaConsumer
    let store: any RegistrationStore & OutcomeStore
    /// Where a result that cannot be recorded goes (the dead-letter topic, with its reason).
    let giveUp: @Sendable (KafkaRecord, String) async throws -> Void
    let budget: RetryBudget
    let logger: Logger

    /// Results that cannot be recorded (unreadable, refused by the store, or failing past
    /// `budget`) are handed to `giveUp`.
    public init(
        consumer: KafkaConsumer, store: any RegistrationStore & OutcomeStore, budget: RetryBudget = RetryBudget(), logger: Logger,
        giveUp: @escaping @Sendable (KafkaRecord, String) async throws -> Void
    ) {
        self.consumer = consumer
        self.store = store
        self.budget = budget
        self.logger = logger
        self.giveUp = giveUp
    }

    /// Results that cannot be recorded go to the dead-letter topic through `producer`.
    public convenience init(
        consumer: KafkaConsumer, store: any RegistrationStore & OutcomeStore, producer: KafkaProducer, topics: PushTopics,
        budget: RetryBudget = RetryBudget(), logger: Logger
    ) {
        self.init(consumer: consumer, store: store, budget: budget, logger: logger) { record, reason in
            try await RecordRejection.deadLetter(record, reason: reason, topics: topics, producer: producer, logger: logger)
        }
    }

    /// Marks a dispatch summary the ingress published for a send whose audience it resolved:
    /// the store took it with the send's Enqueued row, so it is passed over here.
    public static let recordedHeader = KafkaHeader(key: "pushhub-recorded", value: Data("summary".utf8))

    /// Records per store transaction: those one poll fetched, up to this many.
    static let recordsPerTransaction = 64

    public func run() async throws {
        await consumer.processGroups(maximum: Self.recordsPerTransaction, budget: budget, logger: logger, giveUp: giveUp) { [self] records in
            try await apply(records)
        }
    }

    /// Prunes the registrations whose handles `batches` call invalid, before their results are
    /// recorded, so that whoever reads a send Completed no longer finds them registered. Each in
    /// a write of its own, as a lone prune locks one installation and waits for no other, and
    /// only while the registration still holds the handle the result names: a result that comes
    /// again after the device moved to a new handle prunes nothing. A result naming no handle
    /// prunes nothing (PushHub's workers always name it). The first prune that fails ends the
    /// pass, logged once: the store is most likely failing, and the group is retried or taken
    /// apart after it, with its prunes. A handle left is pruned when a send next finds it dead.
    func prune(_ batches: [ResultBatch]) async {
        // Each registration and handle once, compared as bytes, as the database compares them.
        var seen = Set<[UInt8]>()
        var dead: [(batch: ResultBatch, registrationId: String, handle: String)] = []
        for batch in batches {
            for result in batch.results ?? [] where result.outcome == .invalidHandle {
                guard let registrationId = result.registrationId, let handle = result.handle,
                    seen.insert(Array("\(batch.hub)\0\(registrationId)\0\(handle)".utf8)).inserted
                else { continue }
                dead.append((batch, registrationId, handle))
            }
        }
        for (index, entry) in dead.enumerated() {
            do {
                try await store.pruneInvalidHandle(hub: entry.batch.hub, registrationId: entry.registrationId, handle: entry.handle)
            } catch {
                logger.warning(
                    "dead handles not pruned",
                    metadata: [
                        "pushhub.notification_id": "\(entry.batch.notificationId)", "pushhub.registration_id": "\(entry.registrationId)",
                        "pushhub.not_pruned": "\(dead.count - index)", "pushhub.error": "\(error)",
                    ])
                return
            }
        }
    }

    /// Prunes the dead handles of a group of results, then records the group in one
    /// transaction. A record that cannot be read fails the group, so its records are taken
    /// one at a time and only that one is given up.
    func apply(_ records: [KafkaRecord]) async throws {
        var batches: [ResultBatch] = []
        batches.reserveCapacity(records.count)
        // When tracing, a span per record under the context it carries, all of them over the
        // one transaction that records the group.
        var decoded: [KafkaRecord] = []
        for record in records where record.header(Self.recordedHeader.key) != Self.recordedHeader.value {
            do {
                batches.append(try WireCoding.decode(ResultBatch.self, from: record.value))
            } catch {
                throw PermanentFailure(error.description)
            }
            decoded.append(record)
        }
        guard !batches.isEmpty else { return }
        // Started once every record was read, so a record that cannot be leaves none open.
        var spans: [any Span] = []
        if TraceHeaders.isActive {
            for (record, batch) in zip(decoded, batches) {
                let span = startSpan("pushhub.outcome", context: TraceHeaders.context(of: record), ofKind: .consumer)
                span.attributes["pushhub.notification_id"] = batch.notificationId
                spans.append(span)
            }
        }
        await prune(batches)
        do {
            _ = try await store.recordOutcomes(batches, now: Date())
            for span in spans { span.end() }
        } catch {
            for span in spans {
                span.recordError(error)
                span.setStatus(SpanStatus(code: .error))
                span.end()
            }
            if let error = error as? SQLError, error.isPermanent {
                throw PermanentFailure("the store refused the result: \(error.message.prefix(300))")
            }
            throw error
        }
    }
}
