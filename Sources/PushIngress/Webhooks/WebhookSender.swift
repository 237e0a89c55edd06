import Crypto
import Foundation
import Logging
import PushConfiguration
import PushKafka
import PushMetrics
import PushModel
import PushProviders
import ServiceLifecycle

/// Posts a hub's delivery outcomes to one webhook, in batches, from `pushhub.results` in a
/// consumer group of its own: a poll's records are marked done only once the receiver took
/// every POST they make (2xx), so a receiver that is down loses nothing; PushHub tries again,
/// waiting 1 s, doubling up to a minute. A receiver that refuses a POST for good (400, 410,
/// 413, 415, 422) has it dead-lettered, one record holding the POST's events with the answer,
/// and the next goes on.
///
/// Each POST is JSON `{"hub", "events": [...]}`, at most `eventsPerPost` events, each with an
/// `id` naming its result record and place; `PushHub-Webhook-Id` is a digest of those ids, so
/// every try of one POST, across restarts, has one id. `PushHub-Signature: t=UNIX,v1=HEX` is
/// the HMAC-SHA256 under the webhook's secret of `"{t}.{id}.{body}"` (docs/webhooks.md shows
/// how to verify it).
public final class WebhookSender: Service, Sendable {
    let consumer: KafkaConsumer
    let hub: String
    let webhook: WebhookConfiguration
    let http: PNSHTTPClient
    /// Keeps a refused POST's body with the reason (the dead-letter topic); throws when it
    /// could not, and the POST is tried again.
    let giveUp: @Sendable (Data, String) async throws -> Void
    let logger: Logger
    let now: @Sendable () -> Date
    /// The first wait after a failed POST, and the longest.
    let backoff: (first: Duration, longest: Duration)
    let posted: Counter
    let failed: Counter

    /// Records a poll hands the sender at most.
    static let recordsPerPoll = 500
    /// Events a POST carries at most (a result record holds up to 500).
    static let eventsPerPost = 1_000
    /// Answers that refuse a POST for good; any other failure is tried again.
    static let refusals: Set<Int> = [400, 410, 413, 415, 422]

    public init(
        consumer: KafkaConsumer, hub: String, webhook: WebhookConfiguration, http: PNSHTTPClient,
        backoff: (first: Duration, longest: Duration) = (.seconds(1), .seconds(60)), logger: Logger, now: @escaping @Sendable () -> Date = { Date() },
        giveUp: @escaping @Sendable (Data, String) async throws -> Void
    ) {
        self.consumer = consumer
        self.hub = hub
        self.webhook = webhook
        self.http = http
        self.backoff = backoff
        self.logger = logger
        self.now = now
        self.giveUp = giveUp
        posted = MetricsRegistry.shared.counter("pushhub_webhook_posts_total", help: "POSTs of outcomes a webhook took.", labels: ["hub": hub])
        failed = MetricsRegistry.shared.counter(
            "pushhub_webhook_failures_total", help: "POSTs to a webhook that failed (tried again, or given up when refused).", labels: ["hub": hub])
    }

    /// The consumer group of a hub's webhook: its own progress through `pushhub.results`.
    public static func group(hub: String, url: String) -> String {
        "pushhub-webhook-\(hub)-" + SHA256.hash(data: Data(url.utf8)).prefix(6).map { String(format: "%02x", $0) }.joined()
    }

    /// What a webhook's consumer needs: a smaller read-ahead than the recorder's. A new group
    /// starts at the oldest record Kafka keeps, so nothing after its creation is skipped even
    /// when the process stops before the first POST is taken; a webhook added later is sent
    /// what `pushhub.results` still holds. A receiver down for longer than Kafka's poll
    /// interval (5 minutes) has the member leave its group; its uncommitted records are read
    /// again when it rejoins, and posted again (receivers pass over event ids they took).
    public static func tune(_ configuration: inout KafkaConsumerConfiguration) {
        configuration.prefetchBytes = 4 << 20
    }

    public func run() async throws {
        // Ends at graceful shutdown, before the consumer (started first) is closed.
        polls: for await records in consumer.recordGroups(maximum: Self.recordsPerPoll).cancelOnGracefulShutdown() {
            let events = Self.events(in: records, hub: hub, failuresOnly: webhook.outcomes == .failures)
            var start = 0
            while start < events.count {
                let chunk = Array(events[start..<min(start + Self.eventsPerPost, events.count)])
                guard await deliver(chunk) else { break polls }
                start += Self.eventsPerPost
            }
            for record in records { consumer.markDone(record) }
        }
        await http.shutdown()
    }

    /// POSTs until the receiver takes the events or refuses them for good (true), or the
    /// process stops (false: their records are read again at the next start).
    func deliver(_ events: [[String: Any]]) async -> Bool {
        let id = Self.postID(events)
        let body =
            (try? JSONSerialization.data(withJSONObject: ["hub": hub, "events": events], options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        var wait = backoff.first
        while !Task.isCancelled, !Task.isShuttingDownGracefully {
            let timestamp = Int(now().timeIntervalSince1970)
            let headers = [
                ("Content-Type", "application/json"), ("User-Agent", "PushHub-Webhook"), ("PushHub-Webhook-Id", id),
                ("PushHub-Signature", "t=\(timestamp),v1=\(Self.signature(secret: webhook.secret, timestamp: timestamp, id: id, body: body))"),
            ]
            var failure: String
            do {
                // What the receiver says past its first KiB is not PushHub's business.
                let response = try await http.send(.POST, webhook.url, headers: headers, body: body, bodyLimit: 1024)
                if (200..<300).contains(response.status) {
                    posted.increment()
                    return true
                }
                failure = "answered \(response.status)"
                if Self.refusals.contains(response.status) {
                    failed.increment()
                    let reason = "webhook \(Self.shown(webhook.url)) of hub \(hub) refused POST \(id): \(response.status)"
                    do {
                        try await giveUp(body, reason)
                        logger.error("a webhook refused a POST of outcomes; it is dead-lettered", metadata: ["pushhub.reason": "\(reason)"])
                        return true
                    } catch {
                        failure = "refused, and not dead-lettered: \(error)"
                    }
                }
            } catch {
                failure = "\(error)"
            }
            failed.increment()
            logger.warning(
                "a webhook did not take a POST of outcomes; trying again",
                metadata: ["pushhub.webhook": "\(Self.shown(webhook.url))", "pushhub.error": "\(failure.prefix(300))", "pushhub.wait": "\(wait)"])
            let pause = wait
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: pause) }
            wait = min(wait * 2, backoff.longest)
        }
        return false
    }

    /// The events of `records` for `hub`: one per delivery result (dispatch summaries are not
    /// events), each with an id naming its record and place, and the time its result was
    /// published.
    static func events(in records: [KafkaRecord], hub: String, failuresOnly: Bool) -> [[String: Any]] {
        var events: [[String: Any]] = []
        for record in records {
            guard let batch = try? WireCoding.decode(ResultBatch.self, from: record.value), CaseFolding.equal(batch.hub, hub),
                let results = batch.results
            else { continue }
            let time = record.timestampMilliseconds.map { RFC3339.format(Date(timeIntervalSince1970: Double($0) / 1000)) }
            for (index, result) in results.enumerated() where !failuresOnly || result.outcome != .delivered {
                var event: [String: Any] = [
                    "id": "\(record.partition)-\(record.offset)-\(index)", "notificationId": batch.notificationId,
                    "outcome": result.outcome.rawValue, "attempts": result.attempts,
                ]
                event["platform"] = batch.platform?.rawValue
                event["registrationId"] = result.registrationId
                event["handle"] = result.handle
                event["pnsStatus"] = result.pnsStatus
                event["pnsReason"] = result.pnsReason
                event["time"] = time
                events.append(event)
            }
        }
        return events
    }

    /// A refused POST's body on the dead-letter topic, keyed by its hub, with the reason.
    public static func deadLetter(_ body: Data, reason: String, hub: String, topics: PushTopics, producer: KafkaProducer, logger: Logger)
        async throws
    {
        try await RecordRejection.deadLetter(
            key: Data(hub.utf8), value: body, from: topics.results, reason: reason, topics: topics, producer: producer, logger: logger)
    }

    /// A digest of the POST's event ids: the same for every try of the same events.
    static func postID(_ events: [[String: Any]]) -> String {
        var hash = SHA256()
        for event in events { hash.update(data: Data(((event["id"] as? String) ?? "").utf8 + [0x2C])) }
        return hash.finalize().prefix(16).map { String(format: "%02x", $0) }.joined()
    }

    /// Hex HMAC-SHA256 under `secret` of `"{timestamp}.{id}.{body}"`.
    public static func signature(secret: String, timestamp: Int, id: String, body: Data) -> String {
        var signed = Data("\(timestamp).\(id).".utf8)
        signed.append(body)
        return HMAC<SHA256>.authenticationCode(for: signed, using: SymmetricKey(data: Data(secret.utf8))).map { String(format: "%02x", $0) }.joined()
    }

    /// A webhook's URL as logs show it: scheme and host only (a path or query may carry a
    /// token of the receiver's).
    static func shown(_ url: String) -> String {
        guard let components = URLComponents(string: url), let scheme = components.scheme, let host = components.host else { return "(a webhook)" }
        return "\(scheme)://\(host)\(components.port.map { ":\($0)" } ?? "")"
    }
}
