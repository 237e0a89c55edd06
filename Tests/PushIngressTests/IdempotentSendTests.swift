import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import PushIngress
import PushModel
import Testing

@testable import PushStore

@Suite("Idempotent sends (Idempotency-Key)", .timeLimit(.minutes(2)))
struct IdempotentSendTests {
    static func headers(_ fields: [(String, String)]) -> HTTPFields { MessagesAPITests.headers(fields) }

    static let template = [("ServiceBusNotification-Format", "template"), ("Content-Type", "application/json")]

    @Test("a repeat answers the first 201 and sends nothing; another body is 422; one still being accepted is 409; bad keys are 400")
    func messages() async throws {
        let fixture = try await MessagingFixture()
        try await fixture.app.test(.router) { client in
            func send(_ key: String?, _ body: String, path: String = "/myhub/messages", extra: [(String, String)] = []) async throws -> TestResponse {
                try await client.execute(
                    uri: path, method: .post, headers: Self.headers(Self.template + extra + (key.map { [("Idempotency-Key", $0)] } ?? [])),
                    body: ByteBuffer(string: body))
            }
            let first = try await send("order-1", #"{"News":"one"}"#)
            #expect(first.status == .created, "\(first.text)")
            #expect(first.headers[HTTPField.Name("Idempotent-Replay")!] == nil)
            let id = try #require(first.headers[HTTPField.Name("TrackingId")!])
            let again = try await send("order-1", #"{"News":"one"}"#)
            #expect(again.status == .created, "\(again.text)")
            #expect(again.headers[HTTPField.Name("TrackingId")!] == id)
            #expect(again.headers[.location] == first.headers[.location])
            #expect(again.headers[HTTPField.Name("Idempotent-Replay")!] == "true")
            // The same key with another body: refused, naming the header.
            let other = try await send("order-1", #"{"News":"two"}"#)
            #expect(other.status == .unprocessableContent)
            #expect(other.text.contains("<Detail>Idempotency-Key:"), "\(other.text)")
            // Keys are a hub's, whoever sends: another key is another send.
            let second = try await send("order-2", #"{"News":"one"}"#)
            #expect(second.status == .created)
            let secondId = try #require(second.headers[HTTPField.Name("TrackingId")!])
            #expect(secondId != id)
            // Two records went to pushhub.requests, one per key.
            let published = try await fixture.requests(2).map(\.notificationId)
            #expect(Set(published) == [id, secondId], "\(published)")
            let third = try await send(nil, #"{"News":"three"}"#)
            #expect(third.status == .created)
            #expect(Set(try await fixture.requests(3).map(\.notificationId)).count == 3, "a repeat made no record")

            // A key whose first request is still being accepted.
            let fingerprint = String(repeating: "0", count: 64)
            #expect(
                try await fixture.store.claimIdempotencyKey(
                    scope: "hub:myhub", key: "busy", fingerprint: fingerprint, now: Date(), window: 86_400, pendingTimeout: 120
                ).token != nil)
            let busy = try await send("busy", #"{"News":"one"}"#)
            #expect(busy.status == .conflict)
            #expect(busy.headers[.retryAfter] == "1")

            for key in [String(repeating: "k", count: 256), "", "caf\u{E9}"] {
                let refused = try await send(key, #"{"News":"one"}"#)
                #expect(refused.status == .badRequest, "\(key.prefix(10))")
                #expect(refused.text.contains("<Detail>Idempotency-Key:"), "\(refused.text)")
            }
            let longest = try await send(String(repeating: "k", count: 255), #"{"News":"one"}"#)
            #expect(longest.status == .created)

            // Scheduled and batch sends take keys too, with their own Location.
            let due = RFC3339.format(Date().addingTimeInterval(3600))
            let scheduled = try await send(
                "sched-1", #"{"News":"later"}"#, path: "/myhub/schedulednotifications", extra: [("ServiceBusNotification-ScheduleTime", due)])
            #expect(scheduled.status == .created, "\(scheduled.text)")
            let scheduledAgain = try await send(
                "sched-1", #"{"News":"later"}"#, path: "/myhub/schedulednotifications", extra: [("ServiceBusNotification-ScheduleTime", due)])
            #expect(scheduledAgain.headers[.location] == scheduled.headers[.location])
            #expect(scheduledAgain.headers[.location]?.contains("/schedulednotifications/") == true)
            #expect(scheduledAgain.headers[HTTPField.Name("Idempotent-Replay")!] == "true")
            let otherTime = try await send(
                "sched-1", #"{"News":"later"}"#, path: "/myhub/schedulednotifications",
                extra: [("ServiceBusNotification-ScheduleTime", RFC3339.format(Date().addingTimeInterval(7200)))])
            #expect(otherTime.status == .unprocessableContent, "another time is another request")
        }
    }

    @Test("a keyed send Kafka did not take: 503, and the retry sends under the same notification id, which a record written after all would have")
    func refusedSendIsRetriedUnderItsID() async throws {
        let fixture = try await MessagingFixture(deliveryTimeout: .seconds(2))
        try fixture.cluster.setBrokerDown(1)
        let headers = Self.headers(Self.template + [("Idempotency-Key", "retry-me")])
        try await fixture.app.test(.router) { client in
            let response = try await client.execute(
                uri: "/myhub/messages", method: .post, headers: headers, body: ByteBuffer(string: #"{"News":"one"}"#))
            #expect(response.status == .serviceUnavailable)
            #expect(response.headers[.retryAfter] == "5")
            let row = try await fixture.store.database.read { connection in
                try await connection.query("SELECT state, notification_id FROM idempotency_keys WHERE idempotency_key = 'retry-me'", []).first
            }
            #expect(row?.text("state") == "failed")
            let first = try #require(row?.text("notification_id"))
            try fixture.cluster.setBrokerUp(1)
            // The producer finds the broker again within its reconnection back-off, which a
            // loaded machine stretches past the 2 s a send waits: until then a retry is another
            // 503 and leaves the key as it was, so retry as a client would.
            var retried: TestResponse
            let deadline = ContinuousClock.now + .seconds(60)
            repeat {
                retried = try await client.execute(
                    uri: "/myhub/messages", method: .post, headers: headers, body: ByteBuffer(string: #"{"News":"one"}"#))
            } while retried.status == .serviceUnavailable && ContinuousClock.now < deadline
            #expect(retried.status == .created, "\(retried.text)")
            #expect(retried.headers[HTTPField.Name("TrackingId")!] == first, "sent under the first try's id")
            #expect(retried.headers[HTTPField.Name("Idempotent-Replay")!] == nil)
            let again = try await client.execute(
                uri: "/myhub/messages", method: .post, headers: headers, body: ByteBuffer(string: #"{"News":"one"}"#))
            #expect(again.headers[HTTPField.Name("Idempotent-Replay")!] == "true" && again.headers[HTTPField.Name("TrackingId")!] == first)
        }
    }

    @Test("the app backend's /api/notifications takes the key, per sender")
    func appBackend() async throws {
        let fixture = try await MessagingFixture()
        try await fixture.store.setUser(name: "alice", passwordHash: hashPassword("alice-secret"))
        try await fixture.store.setUser(name: "bob", passwordHash: hashPassword("bob-secret"))
        try await fixture.app.test(.router) { client in
            func send(_ user: String, _ message: String) async throws -> TestResponse {
                var headers = basic(user, "\(user)-secret")
                headers[.contentType] = "application/json"
                headers[HTTPField.Name("Idempotency-Key")!] = "note-1"
                return try await client.execute(
                    uri: "/api/notifications?pns=apns&to_tag=carol", method: .post, headers: headers, body: ByteBuffer(string: "\"\(message)\""))
            }
            let first = try await send("alice", "hello")
            #expect(first.status == .ok, "\(first.text)")
            let again = try await send("alice", "hello")
            #expect(again.text == first.text)
            #expect(again.headers[HTTPField.Name("Idempotent-Replay")!] == "true")
            #expect(try await send("alice", "goodbye").status == .unprocessableContent)
            // Bob's key is his own.
            let bob = try await send("bob", "hello")
            #expect(bob.status == .ok)
            #expect(bob.text != first.text && bob.headers[HTTPField.Name("Idempotent-Replay")!] == nil)
        }
    }
}

@Suite("Debug sends, refused and narrowed", .timeLimit(.minutes(2)))
struct DebugSendLimitsTests {
    @Test("a debug send is its sample only: never kept for recovery, never published whole; the flag is refused where it would send for real")
    func sampleOnly() async throws {
        // Sends kept for republishing, so a debug send kept whole would show.
        let fixture = try await MessagingFixture(
            recovery: SendRecoverySettings(IngressFixture.hubs.sendRecovery, embeddedKafka: true), debugSendTimeout: .seconds(1))
        for index in 0..<12 { try await fixture.register(.apple, handle: String(format: "%064x", index), tags: ["dbg"]) }
        try await fixture.app.test(.router) { client in
            let headers = IdempotentSendTests.headers([
                ("ServiceBusNotification-Format", "apple"), ("ServiceBusNotification-Tags", "dbg"), ("Content-Type", "application/json"),
            ])
            // No worker answers here: after the time-out, each of the ten says so.
            let response = try await client.execute(
                uri: "/myhub/messages?test", method: .post, headers: headers, body: ByteBuffer(string: #"{"aps":{"alert":"t"}}"#))
            #expect(response.status == .created, "\(response.text)")
            #expect(response.headers[HTTPField.Name("PushHub-Matched")!] == "12")
            #expect(response.text.contains("<Success>0</Success><Failure>10</Failure>"), "\(response.text)")
            #expect(response.text.contains("No result within 1 s"), "\(response.text)")
            var keyed = headers
            keyed[HTTPField.Name("Idempotency-Key")!] = "k"
            let withKey = try await client.execute(
                uri: "/myhub/messages?test", method: .post, headers: keyed, body: ByteBuffer(string: #"{"aps":{"alert":"t"}}"#))
            #expect(withKey.status == .badRequest && withKey.text.contains("<Detail>Idempotency-Key:"), "\(withKey.text)")
            var scheduled = IdempotentSendTests.headers(IdempotentSendTests.template)
            scheduled[HTTPField.Name("ServiceBusNotification-ScheduleTime")!] = RFC3339.format(Date().addingTimeInterval(600))
            let refused = try await client.execute(
                uri: "/myhub/schedulednotifications?test", method: .post, headers: scheduled, body: ByteBuffer(string: #"{"News":"x"}"#))
            #expect(refused.status == .badRequest && refused.text.contains("<Detail>test:"), "\(refused.text)")
        }
        // Ten targets in batches, nothing whole on pushhub.requests, nothing kept to republish.
        #expect(try await fixture.deliveries(1).flatMap(\.targets).count == 10)
        #expect(try await fixture.isEmpty(fixture.topics.requests))
        #expect(try await fixture.store.claimUnfinished(now: Date().addingTimeInterval(3600), grace: 1, maximumPublishes: 10, limit: 10).isEmpty)
    }
}
