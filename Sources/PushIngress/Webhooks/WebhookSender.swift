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
/// consumer group of its own: a batch's records are marked done only once the receiver took
/// it (2xx), so a receiver that is down loses nothing; PushHub tries again, waiting 1 s,
/// doubling up to a minute. A receiver that refuses a batch for good (4xx but 408 and 429)
/// has it dead-lettered with its answer, and the next batch goes on.
///
/// Each POST is JSON `{"hub", "events": [...]}` with `PushHub-Signature: t=UNIX,v1=HEX`, the
/// HMAC-SHA256 under the webhook's secret of `"{t}.{body}"`, and `PushHub-Webhook-Id`, the same
/// for every try of one batch (docs/webhooks.md shows how to verify them).
public final class WebhookSender: Service, Sendable {
    let consumer: KafkaConsumer
    let hub: String
    let webhook: WebhookConfiguration
    let http: PNSHTTPClient
    let giveUp: @Sendable (KafkaRecord, String) async throws -> Void
    let logger: Logger
    let now: @Sendable () -> Date
    /// The first wait after a failed POST, and the longest.
    let backoff: (first: Duration, longest: Duration)
    let posted: Counter
    let failed: Counter

    /// Records a POST covers at most.
    static let recordsPerPost = 500

    public init(
        consumer: KafkaConsumer, hub: String, webhook: WebhookConfiguration, http: PNSHTTPClient,
        backoff: (first: Duration, longest: Duration) = (.seconds(1), .seconds(60)), logger: Logger, now: @escaping @Sendable () -> Date = { Date() },
        giveUp: @escaping @Sendable (KafkaRecord, String) async throws -> Void
    ) {
        self.consumer = consumer
        self.hub = hub
        self.webhook = webhook
        self.http = http
        self.backoff = backoff
        self.logger = logger
        self.now = now
        self.giveUp = giveUp
        posted = MetricsRegistry.shared.counter("pushhub_webhook_posts_total", help: "Batches of outcomes a webhook took.", labels: ["hub": hub])
        failed = MetricsRegistry.shared.counter(
            "pushhub_webhook_failures_total", help: "POSTs to a webhook that failed (tried again, or given up when refused).", labels: ["hub": hub])
    }

    /// The consumer group of a hub's webhook: its own progress through `pushhub.results`.
    public static func group(hub: String, url: String) -> String {
        "pushhub-webhook-\(hub)-" + SHA256.hash(data: Data(url.utf8)).prefix(6).map { String(format: "%02x", $0) }.joined()
    }

    public func run() async throws {
        // Ends at graceful shutdown, before the consumer (started first) is closed.
        for await records in consumer.recordGroups(maximum: Self.recordsPerPost).cancelOnGracefulShutdown() {
            let events = Self.events(in: records, hub: hub, failuresOnly: webhook.outcomes == .failures)
            if !events.isEmpty {
                guard await deliver(events, id: Self.postID(records.first!), records: records) else { break }
            }
            for record in records { consumer.markDone(record) }
        }
        await http.shutdown()
    }

    /// POSTs until the receiver takes the batch or refuses it for good (true), or the process
    /// stops (false: the records are read again at the next start).
    func deliver(_ events: [[String: Any]], id: String, records: [KafkaRecord]) async -> Bool {
        let body =
            (try? JSONSerialization.data(withJSONObject: ["hub": hub, "events": events], options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        var wait = backoff.first
        while !Task.isCancelled, !Task.isShuttingDownGracefully {
            let timestamp = Int(now().timeIntervalSince1970)
            let headers = [
                ("Content-Type", "application/json"), ("User-Agent", "PushHub-Webhook"), ("PushHub-Webhook-Id", id),
                ("PushHub-Signature", "t=\(timestamp),v1=\(Self.signature(secret: webhook.secret, timestamp: timestamp, body: body))"),
            ]
            var failure: String
            do {
                let response = try await http.send(.POST, webhook.url, headers: headers, body: body)
                if (200..<300).contains(response.status) {
                    posted.increment()
                    return true
                }
                failure = "answered \(response.status)"
                if (400..<500).contains(response.status), ![408, 429].contains(response.status) {
                    failed.increment()
                    let reason = "webhook \(Self.shown(webhook.url)) refused the batch: \(response.status)"
                    logger.error("a webhook refused a batch of outcomes; it is dead-lettered", metadata: ["pushhub.reason": "\(reason)"])
                    for record in records { try? await giveUp(record, reason) }
                    return true
                }
            } catch {
                failure = "\(error)"
            }
            failed.increment()
            logger.warning(
                "a webhook did not take a batch of outcomes; trying again",
                metadata: ["pushhub.webhook": "\(Self.shown(webhook.url))", "pushhub.error": "\(failure.prefix(300))", "pushhub.wait": "\(wait)"])
            let pause = wait
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: pause) }
            wait = min(wait * 2, backoff.longest)
        }
        return false
    }

    /// The events of `records` for `hub`: one per delivery result (dispatch summaries are not
    /// events), each with the time its result was published.
    static func events(in records: [KafkaRecord], hub: String, failuresOnly: Bool) -> [[String: Any]] {
        var events: [[String: Any]] = []
        for record in records {
            guard let batch = try? WireCoding.decode(ResultBatch.self, from: record.value), CaseFolding.equal(batch.hub, hub),
                let results = batch.results
            else { continue }
            let time = record.timestampMilliseconds.map { RFC3339.format(Date(timeIntervalSince1970: Double($0) / 1000)) }
            for result in results where !failuresOnly || result.outcome != .delivered {
                var event: [String: Any] = ["notificationId": batch.notificationId, "outcome": result.outcome.rawValue, "attempts": result.attempts]
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

    /// The same for every try of the batch that starts at `record`, across restarts.
    static func postID(_ record: KafkaRecord) -> String { "\(record.topic)-\(record.partition)-\(record.offset)" }

    /// Hex HMAC-SHA256 under `secret` of `"{timestamp}.{body}"`.
    public static func signature(secret: String, timestamp: Int, body: Data) -> String {
        var signed = Data("\(timestamp).".utf8)
        signed.append(body)
        return HMAC<SHA256>.authenticationCode(for: signed, using: SymmetricKey(data: Data(secret.utf8))).map { String(format: "%02x", $0) }.joined()
    }

    /// A webhook's URL as logs show it: scheme, host and path, never a query.
    static func shown(_ url: String) -> String {
        guard var components = URLComponents(string: url) else { return "(a webhook)" }
        components.query = nil
        components.fragment = nil
        return components.string ?? "(a webhook)"
    }
}
