import Foundation
import PushModel
import PushStore
import Testing

@Suite("Console store conformance (SQLite and PostgreSQL)")
struct ConsoleStoreTests {
    @Test(
        "device counts, recent sends newest first and paged, a day's activity, one target's failures; handle prefixes", arguments: StoreKind.available
    )
    func consoleReads(_ kind: StoreKind) async throws {
        let fixture = try await StoreFixture.make(kind)
        let store = fixture.store as! any RegistrationStore & OutcomeStore & ConsoleStore
        let hub = fixture.hub
        for (id, platform, channel) in [("i1", Installation.InstallationPlatform.apns, "ab01"), ("i2", .fcmv1, "ab02"), ("i3", .apns, "cd03")] {
            _ = try await store.upsertInstallation(Installation(installationId: id, platform: platform, pushChannel: channel, tags: ["t"]), hub: hub)
        }
        let counts = try await store.deviceCounts(hub: hub)
        #expect(counts.registrations == [.apns: 2, .fcm: 1])
        #expect(counts.installations == ["apns": 2, "fcmv1": 1])
        #expect(try await store.deviceCounts(hub: hub + "-other") == DeviceCounts())

        let prefixed = try await store.registrations(hub: hub, matching: .handlePrefix("ab0"), after: nil, limit: 10).registrations
        #expect(Set(prefixed.map(\.installationId)) == ["i1", "i2"])
        #expect(try await store.registrations(hub: hub, matching: .handlePrefix("AB0"), after: nil, limit: 10).registrations.isEmpty, "exact case")
        #expect(try await store.registrations(hub: hub, matching: .handlePrefix("ab0%"), after: nil, limit: 10).registrations.isEmpty, "no wildcards")

        let start = Date().addingTimeInterval(-6_600)
        var ids: [String] = []
        for index in 0..<5 {
            let id = "n\(index)-\(UUID().uuidString.prefix(6))"
            ids.append(id)
            let request = SendRequest(
                notificationId: id, hub: hub, audience: .tags("t"), format: .apple, body: "{}",
                enqueuedAt: RFC3339.truncated(start.addingTimeInterval(Double(index) * 1_200)))
            try await store.recordEnqueued(request, deadline: Date().addingTimeInterval(600), keep: false, now: Date())
        }
        let recent = try await store.recentNotifications(hub: hub, before: nil, limit: 3)
        #expect(recent.map(\.notificationId) == [ids[4], ids[3], ids[2]])
        let older = try await store.recentNotifications(hub: hub, before: recent.last.map { ($0.enqueuedAt, $0.notificationId) }, limit: 3)
        #expect(older.map(\.notificationId) == [ids[1], ids[0]])
        #expect(try await store.recentNotifications(hub: hub + "-other", before: nil, limit: 3).isEmpty)

        let dead = try #require(try await store.registration(hub: hub, id: "installation.i3"))
        let live = try #require(try await store.registration(hub: hub, id: "installation.i1"))
        try await store.recordOutcomes(ResultBatch(notificationId: ids[4], hub: hub, dispatched: [.apns: 2]), now: Date())
        try await store.recordOutcomes(
            ResultBatch(
                notificationId: ids[4], hub: hub, platform: .apns,
                results: [
                    DeliveryResult(registrationId: "installation.i1", handle: "ab01", outcome: .delivered, pnsStatus: 200, attempts: 1, dwellMs: 1),
                    DeliveryResult(
                        registrationId: "installation.i3", handle: "cd03", outcome: .invalidHandle, pnsStatus: 410, pnsReason: "Unregistered",
                        attempts: 1,
                        dwellMs: 1),
                ]), now: Date())
        let hour = try await store.activity(hub: hub, since: Date().addingTimeInterval(-3_600))
        let day = try await store.activity(hub: hub, since: Date().addingTimeInterval(-86_400))
        #expect(hour.sends == 2 && day.sends == 5, "sends by when they were accepted: \(hour.sends), \(day.sends)")
        #expect(day.outcomes == [.delivered: 1, .invalidHandle: 1])
        #expect(day.pruned == 1)

        let failures = try await store.failures(hub: hub, of: dead, notificationIds: [ids[4], ids[3]])
        #expect(failures[ids[4]]?.outcome == .invalidHandle && failures[ids[4]]?.pnsReason == "Unregistered")
        #expect(try await store.failures(hub: hub, of: live, notificationIds: [ids[4]]).isEmpty, "a delivery is no failure")
        #expect(try await store.failures(hub: hub + "-other", of: dead, notificationIds: [ids[4]]).isEmpty)
    }
}
