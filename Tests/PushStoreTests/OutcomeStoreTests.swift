import Foundation
import PushModel
import PushStore
import Testing

@Suite("Outcome store conformance (SQLite and PostgreSQL)")
struct OutcomeStoreTests {
    static func outcomes(_ kind: StoreKind) async throws -> (any RegistrationStore & OutcomeStore, String) {
        let fixture = try await StoreFixture.make(kind)
        return (fixture.store as! any RegistrationStore & OutcomeStore, fixture.hub)
    }

    static func results(_ id: String, _ hub: String, _ platform: Platform, _ outcomes: [(String, Outcome)]) -> ResultBatch {
        ResultBatch(notificationId: id, hub: hub, platform: platform, results: outcomes.map {
            DeliveryResult(registrationId: $0.0, handle: "h-\($0.0)", outcome: $0.1, pnsStatus: 200, attempts: 1, dwellMs: 5)
        })
    }

    @Test("Enqueued → Processing → Completed, with counts; a batch seen twice counts once", arguments: StoreKind.available)
    func lifecycle(_ kind: StoreKind) async throws {
        let (store, hub) = try await Self.outcomes(kind)
        let id = UUID().uuidString.lowercased()
        try await store.recordEnqueued(hub: hub, notificationId: id, at: Date())
        #expect(try await store.notification(hub: hub, id: id)?.state == .enqueued)

        try await store.recordOutcomes(ResultBatch(notificationId: id, hub: hub, dispatched: [.apns: 2, .fcm: 1, .wns: 0, .webpush: 0]), now: Date())
        #expect(try await store.notification(hub: hub, id: id)?.state == .processing)
        let apns = Self.results(id, hub, .apns, [("r1", .delivered), ("r2", .invalidHandle)])
        #expect(try await store.recordOutcomes(apns, now: Date()))
        #expect(try await store.recordOutcomes(apns, now: Date()) == false, "the same batch again changes nothing")
        #expect(try await store.notification(hub: hub, id: id)?.state == .processing)
        try await store.recordOutcomes(Self.results(id, hub, .fcm, [("r3", .delivered)]), now: Date())

        let outcome = try #require(try await store.notification(hub: hub, id: id))
        #expect(outcome.state == .completed)
        #expect(outcome.counts == [.apns: [.delivered: 1, .invalidHandle: 1], .fcm: [.delivered: 1]])
        #expect(outcome.expectedTargets == 3)
        #expect(outcome.startedAt != nil && outcome.endedAt != nil)
        #expect(try await store.notification(hub: hub + "-other", id: id) == nil, "only through its own hub")
    }

    @Test("results before the summary, no target, all expired, rejected", arguments: StoreKind.available)
    func otherEndings(_ kind: StoreKind) async throws {
        let (store, hub) = try await Self.outcomes(kind)
        let early = UUID().uuidString.lowercased()
        try await store.recordOutcomes(Self.results(early, hub, .wns, [("w1", .delivered)]), now: Date())
        #expect(try await store.notification(hub: hub, id: early)?.state == .processing, "no summary yet")
        try await store.recordOutcomes(ResultBatch(notificationId: early, hub: hub, dispatched: [.wns: 1]), now: Date())
        #expect(try await store.notification(hub: hub, id: early)?.state == .completed)

        let nobody = UUID().uuidString.lowercased()
        try await store.recordOutcomes(ResultBatch(notificationId: nobody, hub: hub, dispatched: [.apns: 0]), now: Date())
        #expect(try await store.notification(hub: hub, id: nobody)?.state == .noTargetFound)

        let stale = UUID().uuidString.lowercased()
        try await store.recordOutcomes(ResultBatch(notificationId: stale, hub: hub, dispatched: [.apns: 2]), now: Date())
        try await store.recordOutcomes(Self.results(stale, hub, .apns, [("a", .expired), ("b", .expired)]), now: Date())
        #expect(try await store.notification(hub: hub, id: stale)?.state == .abandoned)

        let refused = UUID().uuidString.lowercased()
        try await store.recordEnqueued(hub: hub, notificationId: refused, at: Date())
        try await store.recordOutcomes(
            ResultBatch(notificationId: refused, hub: hub, results: [DeliveryResult(registrationId: nil, handle: nil, outcome: .rejected, pnsReason: "bad", attempts: 0, dwellMs: 0)]),
            now: Date())
        #expect(try await store.notification(hub: hub, id: refused)?.state == .abandoned)
    }

    @Test("a dead handle: the registration goes; an installation is marked expired until a new channel", arguments: StoreKind.available)
    func pruning(_ kind: StoreKind) async throws {
        let (store, hub) = try await Self.outcomes(kind)
        _ = try await store.upsertRegistration(Registration(registrationId: "dead", hub: hub, format: .apple, handle: "x", tags: [], updatedAt: Date()), ifMatch: nil)
        try await store.pruneInvalidHandle(hub: hub, registrationId: "dead")
        #expect(try await store.registration(hub: hub, id: "dead") == nil)
        #expect(try await store.registrationIdState(hub: hub, id: "dead") == .unknown)

        _ = try await store.upsertInstallation(Installation(installationId: "i", platform: .fcmv1, pushChannel: "old", templates: ["t": .init(body: "{}")]), hub: hub)
        try await store.pruneInvalidHandle(hub: hub, registrationId: Registration.installationRegistrationId("i", template: nil))
        #expect(try await store.installation(hub: hub, id: "i")?.pushChannelExpired == true)
        #expect(try await store.all(hub: hub, matching: .installation("i")).isEmpty, "no more sends to the dead channel")
        _ = try await store.patchInstallation(hub: hub, id: "i", [.init(op: .replace, path: "/pushChannel", value: .string("new"))])
        #expect(try await store.installation(hub: hub, id: "i")?.pushChannelExpired == false)
        #expect(try await store.all(hub: hub, matching: .installation("i")).count == 2)
    }
}
