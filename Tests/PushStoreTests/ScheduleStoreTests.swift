import Foundation
import PushModel
import PushStore
import Testing

@Suite("Schedule store conformance (SQLite and PostgreSQL)")
struct ScheduleStoreTests {
    static func request(_ hub: String) -> SendRequest {
        SendRequest(notificationId: UUID().uuidString.lowercased(), hub: hub, audience: .broadcast, format: .apple, body: "{}", enqueuedAt: Date())
    }

    @Test("due sends are claimed once; cancelled ones never; a stale claim is taken over", arguments: StoreKind.available)
    func claims(_ kind: StoreKind) async throws {
        let fixture = try await StoreFixture.make(kind)
        let store = fixture.store as! SQLRegistrationStore
        let now = Date()
        let soon = Self.request(fixture.hub)
        let cancelled = Self.request(fixture.hub)
        try await store.schedule(soon, dueAt: now.addingTimeInterval(10))
        try await store.schedule(cancelled, dueAt: now.addingTimeInterval(10))
        #expect(try await store.notification(hub: fixture.hub, id: soon.notificationId)?.state == .enqueued)

        #expect(try await store.claimDueScheduled(now: now, claimant: "a", limit: 10, staleAfter: 60).isEmpty, "not due yet")
        #expect(try await store.cancelScheduled(hub: fixture.hub, notificationId: cancelled.notificationId))
        #expect(try await store.cancelScheduled(hub: fixture.hub, notificationId: cancelled.notificationId) == false)
        #expect(try await store.notification(hub: fixture.hub, id: cancelled.notificationId)?.state == .cancelled)

        let later = now.addingTimeInterval(11)
        // Two replicas race for the due sends: each send goes to exactly one.
        async let first = store.claimDueScheduled(now: later, claimant: "a", limit: 10, staleAfter: 60)
        async let second = store.claimDueScheduled(now: later, claimant: "b", limit: 10, staleAfter: 60)
        let claimed = try await first + second
        #expect(claimed.map(\.notificationId).filter { [soon.notificationId, cancelled.notificationId].contains($0) } == [soon.notificationId])
        #expect(try await store.cancelScheduled(hub: fixture.hub, notificationId: soon.notificationId) == false, "claimed sends cannot be cancelled")

        // Replica a died before publishing: after the stale time replica c takes it over.
        #expect(try await store.claimDueScheduled(now: later.addingTimeInterval(30), claimant: "c", limit: 10, staleAfter: 60).isEmpty)
        let retaken = try await store.claimDueScheduled(now: later.addingTimeInterval(61), claimant: "c", limit: 10, staleAfter: 60)
        #expect(retaken.map(\.notificationId) == [soon.notificationId])
        try await store.markReleased(soon, deadline: later.addingTimeInterval(1800), keep: false, now: later.addingTimeInterval(61))
        #expect(try await store.claimDueScheduled(now: later.addingTimeInterval(200), claimant: "d", limit: 10, staleAfter: 60).isEmpty)
    }
}
