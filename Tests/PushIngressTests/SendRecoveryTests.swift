import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import PushConfiguration
import PushIngress
import PushKafka
import PushMetrics
import PushModel
import Synchronization
import Testing

/// Sends kept in the store, published again, and given up, with the clock in the test's hands.
@Suite("Send recovery", .timeLimit(.minutes(2)))
struct SendRecoveryTests {
    /// A clock the test moves.
    final class TestClock: Sendable {
        private let current = Mutex(Date())
        var now: Date { current.withLock { $0 } }
        func advance(_ seconds: TimeInterval) { current.withLock { $0 += seconds } }
    }

    static func send(_ fixture: MessagingFixture) async throws -> (HTTPResponse.Status, String?) {
        try await fixture.app.test(.router) { client in
            let response = try await client.execute(
                uri: "/myhub/messages", method: .post,
                headers: MessagesAPITests.headers([("ServiceBusNotification-Format", "gcm"), ("Content-Type", "application/json")]),
                body: ByteBuffer(string: #"{"data":{"message":"hi"}}"#))
            return (response.status, response.headers[HTTPField.Name("TrackingId")!])
        }
    }

    /// The send's NotificationDetails, asked with a token valid at the test clock's time.
    static func details(_ fixture: MessagingFixture, _ id: String, at now: Date) async throws -> String {
        let token = SharedAccessSignature.token(
            resourceURI: "https://localhost/myhub", keyName: "DefaultFullSharedAccessSignature", key: IngressFixture.fullKey,
            expiry: now.addingTimeInterval(600))
        return try await fixture.app.test(.router) { client in
            try await client.execute(uri: "/myhub/messages/\(id)", method: .get, headers: [.authorization: token]).text
        }
    }

    @Test("by default (Azure's 30 minutes) a send that never progresses ends Abandoned at its deadline plus the grace, with its reason and a metric")
    func abandonedAfterThirtyMinutes() async throws {
        let clock = TestClock()
        let fixture = try await MessagingFixture(now: { clock.now })
        let (status, tracking) = try await Self.send(fixture)
        #expect(status == .created)
        let id = try #require(tracking)
        let settings = SendRecoverySettings(SendRecoveryConfiguration(), embeddedKafka: false)
        #expect(!settings.republish, "a Kafka cluster's acknowledgement is the durability by default")
        let metrics = MetricsRegistry()
        let recovery = SendRecovery(
            store: fixture.store, publisher: KafkaNotificationPublisher(producer: fixture.producer, topics: fixture.topics), settings: settings,
            logger: MessagingFixture.logger, metrics: metrics, now: { clock.now })

        clock.advance(31 * 60)
        await recovery.check()
        #expect(try await Self.details(fixture, id, at: clock.now).contains("<State>Enqueued</State>"), "past 30 minutes, within the grace of 2")
        clock.advance(90)
        await recovery.check()
        let details = try await Self.details(fixture, id, at: clock.now)
        #expect(details.contains("<State>Abandoned</State>"), "\(details)")
        #expect(details.contains("<Reason>no progress by the deadline: never dispatched"), "\(details)")
        #expect(metrics.render().contains("pushhub_sends_abandoned_total 1"))
        #expect(metrics.render().contains("pushhub_sends_republished_total 0"))
    }

    @Test("a send ended for longer than keepEnded is deleted by a recovery round: its details answer 404 after, not before")
    func endedSendsDeleted() async throws {
        let clock = TestClock()
        let fixture = try await MessagingFixture(now: { clock.now })
        let (status, tracking) = try await Self.send(fixture)
        #expect(status == .created)
        let id = try #require(tracking)
        let settings = SendRecoverySettings(SendRecoveryConfiguration(keepEnded: 2 * 86_400), embeddedKafka: false)
        let recovery = SendRecovery(
            store: fixture.store, publisher: KafkaNotificationPublisher(producer: fixture.producer, topics: fixture.topics), settings: settings,
            logger: MessagingFixture.logger, metrics: MetricsRegistry(), now: { clock.now })
        func details() async throws -> (HTTPResponse.Status, String) {
            let token = SharedAccessSignature.token(
                resourceURI: "https://localhost/myhub", keyName: "DefaultFullSharedAccessSignature", key: IngressFixture.fullKey,
                expiry: clock.now.addingTimeInterval(600))
            return try await fixture.app.test(.router) { client in
                let response = try await client.execute(uri: "/myhub/messages/\(id)", method: .get, headers: [.authorization: token])
                return (response.status, response.text)
            }
        }
        // Never dispatched: it ends Abandoned 32 minutes on (30 and the grace of 2).
        clock.advance(33 * 60)
        await recovery.check()
        #expect(try await details().1.contains("<State>Abandoned</State>"))
        clock.advance(2 * 86_400 - 120)
        await recovery.check()
        #expect(try await details().1.contains("<State>Abandoned</State>"), "ended not quite two days ago: kept")
        clock.advance(180)
        await recovery.check()
        let (gone, text) = try await details()
        #expect(gone == .notFound, "\(text)")
    }

    @Test("a backlog of ended sends goes one transaction a round when the round has no time for more, and all at once when it has")
    func endedSendsBacklog() async throws {
        let fixture = try await MessagingFixture()
        let ids = (0..<2_200).map { _ in UUID().uuidString.lowercased() }
        // Ended eight days ago, past the default week.
        try await fixture.store.recordOutcomes(
            ids.map { ResultBatch(notificationId: $0, hub: "myhub", dispatched: [.fcm: 0]) }, now: Date().addingTimeInterval(-8 * 86_400))
        func left() async throws -> Int {
            var count = 0
            for id in ids where try await fixture.store.notification(hub: "myhub", id: id) != nil { count += 1 }
            return count
        }
        func recovery(_ perRound: Duration) -> SendRecovery {
            var settings = SendRecoverySettings(SendRecoveryConfiguration(), embeddedKafka: false)
            settings.endedSweepPerRound = perRound
            return SendRecovery(
                store: fixture.store, publisher: KafkaNotificationPublisher(producer: fixture.producer, topics: fixture.topics), settings: settings,
                logger: MessagingFixture.logger, metrics: MetricsRegistry())
        }
        await recovery(.zero).check()
        #expect(try await left() == 1_700, "one transaction of 500")
        await recovery(.zero).check()
        #expect(try await left() == 1_200)
        await recovery(.seconds(60)).check()
        #expect(try await left() == 0, "the rest in one round")
    }

    @Test("a recovery round deletes the counted targets an ended broadcast left, whatever their number")
    func roundSweepsEndedTargets() async throws {
        let fixture = try await MessagingFixture()
        let id = UUID().uuidString.lowercased()
        try await fixture.store.recordOutcomes(ResultBatch(notificationId: id, hub: "myhub", dispatched: [.fcm: 45_000]), now: Date())
        for start in stride(from: 0, to: 45_000, by: 500) {
            let results = (start..<start + 500).map {
                DeliveryResult(registrationId: "r\($0)", handle: "h", outcome: .delivered, pnsStatus: 200, attempts: 1, dwellMs: 1)
            }
            try await fixture.store.recordOutcomes(ResultBatch(notificationId: id, hub: "myhub", platform: .fcm, results: results), now: Date())
        }
        let recovery = SendRecovery(
            store: fixture.store, publisher: KafkaNotificationPublisher(producer: fixture.producer, topics: fixture.topics),
            settings: SendRecoverySettings(SendRecoveryConfiguration(), embeddedKafka: false), logger: MessagingFixture.logger)
        await recovery.check()
        // 1,000 went as the send ended, the other 44,000 in the round (three transactions).
        #expect(try await fixture.store.sweepEndedTargets(limit: 1) == false)
        let details = try await Self.details(fixture, id, at: Date())
        #expect(details.contains("<State>Completed</State>") && details.contains("<FcmV1OutcomeCounts>"), "\(details)")
    }

    @Test("republishing keeps each accepted send and publishes the same request again; a send Kafka refused (503) is not kept")
    func republishes() async throws {
        let clock = TestClock()
        let settings = SendRecoverySettings(SendRecoveryConfiguration(mode: .republish, grace: 60), embeddedKafka: false)
        let fixture = try await MessagingFixture(deliveryTimeout: .seconds(2), recovery: settings, now: { clock.now })
        let (status, tracking) = try await Self.send(fixture)
        #expect(status == .created)
        let id = try #require(tracking)
        let recovery = SendRecovery(
            store: fixture.store, publisher: KafkaNotificationPublisher(producer: fixture.producer, topics: fixture.topics), settings: settings,
            logger: MessagingFixture.logger, metrics: MetricsRegistry(), now: { clock.now })
        clock.advance(30)
        #expect(await recovery.check() == 0, "within the grace")
        clock.advance(31)
        #expect(await recovery.check() == 1)
        let requests = try await fixture.requests(2)
        #expect(requests.count == 2 && requests[0] == requests[1] && requests[0].notificationId == id, "the same request, twice")
        #expect(requests[0].expiresAt.map { $0.timeIntervalSince(requests[0].enqueuedAt) } == 1800, "30 minutes to live, as the workers see it")

        try fixture.cluster.setBrokerDown(1)
        let (refused, _) = try await Self.send(fixture)
        #expect(refused == .serviceUnavailable)
        clock.advance(1)
        let kept = try await fixture.store.claimUnfinished(now: clock.now, grace: 0, maximumPublishes: 100, limit: 10)
        #expect(kept.map(\.notificationId) == [id], "the refused send is not kept")
        clock.advance(3600)
        await recovery.check()
        #expect(
            try await Self.details(fixture, id, at: clock.now).contains("<State>Abandoned</State>"), "given up after its deadline, republished or not"
        )
    }
}
