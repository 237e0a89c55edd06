import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import PushIngress
import PushModel
import PushStore
import Testing

@Suite("Scheduled sends", .timeLimit(.minutes(2)))
struct ScheduledSendTests {
    static func headers(scheduleTime: String?) -> HTTPFields {
        var headers = IngressFixture.fullAccess
        headers[HTTPField.Name("ServiceBusNotification-Format")!] = "template"
        headers[.contentType] = "application/json"
        if let scheduleTime { headers[HTTPField.Name("ServiceBusNotification-ScheduleTime")!] = scheduleTime }
        return headers
    }

    @Test("a scheduled send is kept until due, then released once; a cancelled one never is")
    func releaseAndCancel() async throws {
        let fixture = try await MessagingFixture()
        let due = Date().addingTimeInterval(3600)
        let (kept, cancelled) = try await fixture.app.test(.router) { client in
            var ids: [String] = []
            for _ in 0..<2 {
                let response = try await client.execute(
                    uri: "/myhub/schedulednotifications", method: .post, headers: Self.headers(scheduleTime: RFC3339.format(due)),
                    body: ByteBuffer(string: #"{"messageParam":"later"}"#))
                #expect(response.status == .created, "\(response.text)")
                #expect(response.headers[.location]?.contains("/myhub/schedulednotifications/") == true)
                ids.append(try #require(response.headers[HTTPField.Name("TrackingId")!]))
            }
            #expect(
                try await client.execute(uri: "/myhub/schedulednotifications/\(ids[1])", method: .delete, headers: IngressFixture.fullAccess).status
                    == .ok)
            #expect(
                try await client.execute(uri: "/myhub/schedulednotifications/\(ids[1])", method: .delete, headers: IngressFixture.fullAccess).status
                    == .notFound)
            let details = try await client.execute(uri: "/myhub/messages/\(ids[1])", method: .get, headers: IngressFixture.fullAccess)
            #expect(details.text.contains("<State>Cancelled</State>"))
            return (ids[0], ids[1])
        }
        let replicas = (0..<2).map { _ in
            ScheduledReleaser(
                store: fixture.store, publisher: KafkaNotificationPublisher(producer: fixture.producer, topics: fixture.topics),
                logger: MessagingFixture.logger)
        }
        #expect(await replicas[0].releaseDue(now: Date()) == 0, "not due yet")
        async let first = replicas[0].releaseDue(now: due.addingTimeInterval(1))
        async let second = replicas[1].releaseDue(now: due.addingTimeInterval(1))
        #expect(await first + second == 1, "two replicas release it once")
        let released = try await fixture.requests(1)
        #expect(released.map(\.notificationId) == [kept])
        #expect(released.first?.format == .template)
        #expect(cancelled != kept)
    }

    @Test(
        "schedule times are checked",
        arguments: [nil, "tomorrow", RFC3339.format(Date().addingTimeInterval(8 * 24 * 3600)), RFC3339.format(Date().addingTimeInterval(-3600))])
    func badTimes(_ time: String?) async throws {
        let fixture = try await MessagingFixture()
        try await fixture.app.test(.router) { client in
            let response = try await client.execute(
                uri: "/myhub/schedulednotifications", method: .post, headers: Self.headers(scheduleTime: time),
                body: ByteBuffer(string: #"{"a":"b"}"#))
            #expect(response.status == .badRequest)
            #expect(response.text.contains("ServiceBusNotification-ScheduleTime"))
        }
    }
}
