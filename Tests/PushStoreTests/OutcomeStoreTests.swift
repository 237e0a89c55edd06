import Foundation
import PushModel
import Testing

@testable import PushStore

@Suite("Outcome store conformance (SQLite and PostgreSQL)")
struct OutcomeStoreTests {
    static func outcomes(_ kind: StoreKind) async throws -> (any RegistrationStore & OutcomeStore, String) {
        let fixture = try await StoreFixture.make(kind)
        return (fixture.store as! any RegistrationStore & OutcomeStore, fixture.hub)
    }

    static func results(_ id: String, _ hub: String, _ platform: Platform, _ outcomes: [(String, Outcome)]) -> ResultBatch {
        ResultBatch(
            notificationId: id, hub: hub, platform: platform,
            results: outcomes.map {
                DeliveryResult(registrationId: $0.0, handle: "h-\($0.0)", outcome: $0.1, pnsStatus: 200, attempts: 1, dwellMs: 5)
            })
    }

    static func request(_ id: String, _ hub: String, at enqueuedAt: Date = Date()) -> SendRequest {
        SendRequest(notificationId: id, hub: hub, audience: .broadcast, format: .apple, body: "{}", enqueuedAt: enqueuedAt)
    }

    @Test("Enqueued → Processing → Completed, with counts; a batch seen twice counts once", arguments: StoreKind.available)
    func lifecycle(_ kind: StoreKind) async throws {
        let (store, hub) = try await Self.outcomes(kind)
        let id = UUID().uuidString.lowercased()
        try await store.recordEnqueued(Self.request(id, hub), deadline: Date().addingTimeInterval(1800), keep: false, now: Date())
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

    @Test(
        "a target counts once however its results are batched: a send dispatched twice, cut differently, and rejected records",
        arguments: StoreKind.available)
    func targetsCountOnce(_ kind: StoreKind) async throws {
        let (store, hub) = try await Self.outcomes(kind)
        let id = UUID().uuidString.lowercased()
        try await store.recordOutcomes(ResultBatch(notificationId: id, hub: hub, dispatched: [.apns: 4]), now: Date())
        // First attempt: two of a batch of four finished, two were handed back; then a crash.
        #expect(try await store.recordOutcomes(Self.results(id, hub, .apns, [("a", .delivered), ("b", .delivered)]), now: Date()))
        // Published again: the summary again, and the whole batch at once, cut differently.
        #expect(try await store.recordOutcomes(ResultBatch(notificationId: id, hub: hub, dispatched: [.apns: 4]), now: Date()) == false)
        #expect(
            try await store.recordOutcomes(
                Self.results(id, hub, .apns, [("a", .delivered), ("b", .throttled), ("c", .delivered), ("d", .invalidHandle)]), now: Date()))
        let outcome = try #require(try await store.notification(hub: hub, id: id))
        #expect(outcome.state == .completed)
        #expect(outcome.counts == [.apns: [.delivered: 3, .invalidHandle: 1]], "a and b as first reported")
        #expect(try await store.recordOutcomes(Self.results(id, hub, .apns, [("c", .delivered)]), now: Date()) == false)

        // Rejected records name no target: a rejected batch delivered twice counts once.
        let refused = UUID().uuidString.lowercased()
        let rejected = ResultBatch(
            notificationId: refused, hub: hub,
            results: [
                DeliveryResult(registrationId: nil, handle: nil, outcome: .rejected, pnsReason: "bad", attempts: 0, dwellMs: 0),
                DeliveryResult(registrationId: nil, handle: nil, outcome: .rejected, pnsReason: "bad", attempts: 0, dwellMs: 0),
            ])
        #expect(try await store.recordOutcomes(rejected, now: Date()))
        #expect(try await store.recordOutcomes(rejected, now: Date()) == false)
        #expect(try await store.notification(hub: hub, id: refused)?.state == .abandoned)
    }

    @Test(
        "a batch of several statements' worth of results: keys repeated within it and across its chunks count once, the rest all",
        arguments: StoreKind.available)
    func repeatsAcrossChunks(_ kind: StoreKind) async throws {
        let (store, hub) = try await Self.outcomes(kind)
        let id = UUID().uuidString.lowercased()
        try await store.recordOutcomes(ResultBatch(notificationId: id, hub: hub, dispatched: [.apns: 400]), now: Date())
        // 128 new; then 128 of which 40 repeat the first chunk's and 20 repeat each other (the
        // first of each counts, throttled, the repeat delivered); then 144 new.
        var outcomes: [(String, Outcome)] = (0..<128).map { ("a\($0)", .delivered) }
        outcomes += (0..<40).map { ("a\($0)", .invalidHandle) }
        for index in 0..<20 { outcomes += [("b\(index)", .throttled), ("b\(index)", .delivered)] }
        outcomes += (0..<48).map { ("c\($0)", .delivered) }
        outcomes += (0..<144).map { ("d\($0)", .delivered) }
        #expect(try await store.recordOutcomes(Self.results(id, hub, .apns, outcomes), now: Date()))
        var outcome = try #require(try await store.notification(hub: hub, id: id))
        #expect(outcome.counts == [.apns: [.delivered: 128 + 48 + 144, .throttled: 20]])
        #expect(outcome.state == .processing, "340 of 400")
        // The rest, with repeats of every earlier kind among them.
        let rest: [(String, Outcome)] = [("a1", .delivered), ("b1", .delivered), ("d1", .delivered)] + (0..<60).map { ("e\($0)", .delivered) }
        #expect(try await store.recordOutcomes(Self.results(id, hub, .apns, rest), now: Date()))
        outcome = try #require(try await store.notification(hub: hub, id: id))
        #expect(outcome.counts == [.apns: [.delivered: 128 + 48 + 144 + 60, .throttled: 20]])
        #expect(outcome.state == .completed)
    }

    @Test(
        "batches of several notifications in one call, in any order, each said new or not; a summary recorded as the send is accepted; a send not published is forgotten",
        arguments: StoreKind.available)
    func manyAtOnce(_ kind: StoreKind) async throws {
        let (store, hub) = try await Self.outcomes(kind)
        let (first, second) = ("b" + UUID().uuidString.lowercased(), "a" + UUID().uuidString.lowercased())
        try await store.recordEnqueued(
            Self.request(first, hub), deadline: Date().addingTimeInterval(1800), keep: true, dispatched: [.apns: 2], now: Date())
        #expect(try await store.notification(hub: hub, id: first)?.state == .processing, "its summary came with it")
        #expect(try await store.notification(hub: hub, id: first)?.expectedTargets == 2)
        let fresh = try await store.recordOutcomes(
            [
                Self.results(first, hub, .apns, [("r1", .delivered)]),
                ResultBatch(notificationId: first, hub: hub, dispatched: [.apns: 2]),
                Self.results(second, hub, .fcm, [("f1", .delivered)]),
                Self.results(first, hub, .apns, [("r1", .delivered), ("r2", .throttled)]),
                ResultBatch(notificationId: second, hub: hub, dispatched: [.fcm: 1]),
            ], now: Date())
        #expect(fresh == [true, false, true, true, true], "a second summary and a target seen twice change nothing")
        let outcome = try #require(try await store.notification(hub: hub, id: first))
        #expect(outcome.state == .completed)
        #expect(outcome.counts == [.apns: [.delivered: 1, .throttled: 1]])
        #expect(try await store.notification(hub: hub, id: second)?.state == .completed)

        // A send with no targets ends as it is accepted.
        let nobody = UUID().uuidString.lowercased()
        try await store.recordEnqueued(Self.request(nobody, hub), deadline: Date().addingTimeInterval(1800), keep: true, dispatched: [:], now: Date())
        #expect(try await store.notification(hub: hub, id: nobody)?.state == .noTargetFound)

        // One whose batches Kafka would not take is forgotten, summary and all.
        let refused = UUID().uuidString.lowercased()
        try await store.recordEnqueued(
            Self.request(refused, hub), deadline: Date().addingTimeInterval(1800), keep: true, dispatched: [.fcm: 1], now: Date())
        try await store.forgetEnqueued(hub: hub, notificationId: refused)
        #expect(try await store.notification(hub: hub, id: refused)?.state == .processing, "only an Enqueued one, unless resolved")
        try await store.forgetEnqueued(hub: hub, notificationId: refused, resolved: true)
        #expect(try await store.notification(hub: hub, id: refused) == nil)
        // Recorded again under the same id, its summary counts anew.
        try await store.recordEnqueued(
            Self.request(refused, hub), deadline: Date().addingTimeInterval(1800), keep: false, dispatched: [.fcm: 1], now: Date())
        #expect(try await store.notification(hub: hub, id: refused)?.expectedTargets == 1)
    }

    @Test(
        "a send noted with the audience it resolved: the store it is given reads in that transaction; targets make it Processing, none Enqueued, a failure notes nothing",
        arguments: StoreKind.available)
    func resolvedAsNoted(_ kind: StoreKind) async throws {
        let (store, hub) = try await Self.outcomes(kind)
        let tag = "t" + UUID().uuidString.lowercased().prefix(8)
        for (id, format) in [("a1", NativeFormat.apple), ("f1", .gcm)] {
            _ = try await store.upsertRegistration(
                Registration(registrationId: "\(tag)-\(id)", hub: hub, format: format, handle: "h-\(tag)-\(id)", tags: [tag], updatedAt: Date()),
                ifMatch: nil)
        }
        let resolved = UUID().uuidString.lowercased()
        let targets = try await store.recordEnqueued(
            Self.request(resolved, hub), deadline: Date().addingTimeInterval(1800), keep: true, now: Date()
        ) { registrations in
            let page = try await registrations.deliveryCandidates(hub: hub, matching: .tagExpression(.tag(tag)), reaching: nil, after: nil, limit: 10)
            var targets: [Platform: [DeliveryBatch.Target]] = [:]
            for candidate in page.candidates {
                targets[candidate.platform, default: []].append(
                    DeliveryBatch.Target(registrationId: candidate.registrationId, handle: candidate.handle))
            }
            return targets
        }
        #expect(targets?[.apns]?.map(\.handle) == ["h-\(tag)-a1"] && targets?[.fcm]?.map(\.handle) == ["h-\(tag)-f1"])
        let outcome = try #require(try await store.notification(hub: hub, id: resolved))
        #expect(outcome.state == .processing)
        #expect(outcome.expectedTargets == 2, "its summary is what it resolved")

        let large = UUID().uuidString.lowercased()
        #expect(
            try await store.recordEnqueued(Self.request(large, hub), deadline: Date().addingTimeInterval(1800), keep: false, now: Date()) { _ in nil }
                == nil)
        #expect(try await store.notification(hub: hub, id: large)?.state == .enqueued, "left to the dispatcher")

        struct Refused: Error {}
        let failed = UUID().uuidString.lowercased()
        await #expect(throws: Refused.self) {
            try await store.recordEnqueued(Self.request(failed, hub), deadline: Date().addingTimeInterval(1800), keep: true, now: Date()) { _ in
                throw Refused()
            }
        }
        #expect(try await store.notification(hub: hub, id: failed) == nil)
    }

    @Test(
        "a send that ends with many counted targets leaves them to the sweep, which deletes them a transaction at a time; a late result still counts nothing",
        arguments: StoreKind.available)
    func endedTargetsSwept(_ kind: StoreKind) async throws {
        let (store, hub) = try await Self.outcomes(kind)
        while try await store.sweepEndedTargets(limit: 100_000) {}
        // Small: its ending deletes its targets itself.
        let small = UUID().uuidString.lowercased()
        try await store.recordOutcomes(ResultBatch(notificationId: small, hub: hub, dispatched: [.apns: 2]), now: Date())
        try await store.recordOutcomes(Self.results(small, hub, .apns, [("a", .delivered), ("b", .delivered)]), now: Date())
        #expect(try await store.notification(hub: hub, id: small)?.state == .completed)
        #expect(try await store.sweepEndedTargets(limit: 1_000) == false)

        let id = UUID().uuidString.lowercased()
        try await store.recordOutcomes(ResultBatch(notificationId: id, hub: hub, dispatched: [.apns: 2_500]), now: Date())
        for start in stride(from: 0, to: 2_500, by: 500) {
            try await store.recordOutcomes(Self.results(id, hub, .apns, (start..<start + 500).map { ("r\($0)", .delivered) }), now: Date())
        }
        #expect(try await store.notification(hub: hub, id: id)?.state == .completed)
        let late = Self.results(id, hub, .apns, [("r7", .invalidHandle), ("r2600", .delivered)])
        #expect(try await store.recordOutcomes(late, now: Date()) == false)
        // 1,000 went as it ended; 1,500 are left: two sweeps, then none.
        #expect(try await store.sweepEndedTargets(limit: 1_000))
        #expect(try await store.sweepEndedTargets(limit: 1_000))
        #expect(try await store.sweepEndedTargets(limit: 1_000) == false)
        #expect(try await store.recordOutcomes(late, now: Date()) == false)
        let outcome = try #require(try await store.notification(hub: hub, id: id))
        #expect(outcome.state == .completed && outcome.counts == [.apns: [.delivered: 2_500]])
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
        try await store.recordEnqueued(Self.request(refused, hub), deadline: Date().addingTimeInterval(1800), keep: false, now: Date())
        try await store.recordOutcomes(
            ResultBatch(
                notificationId: refused, hub: hub,
                results: [DeliveryResult(registrationId: nil, handle: nil, outcome: .rejected, pnsReason: "bad", attempts: 0, dwellMs: 0)]),
            now: Date())
        #expect(try await store.notification(hub: hub, id: refused)?.state == .abandoned)
    }

    @Test(
        "results naming another hub, or none, under a send's id change nothing; a result with no hub starts no send",
        arguments: StoreKind.available)
    func otherHubsResults(_ kind: StoreKind) async throws {
        let (store, hub) = try await Self.outcomes(kind)
        let id = UUID().uuidString.lowercased()
        try await store.recordEnqueued(Self.request(id, hub), deadline: Date().addingTimeInterval(1800), keep: false, now: Date())
        let rejected = [
            DeliveryResult(registrationId: nil, handle: nil, outcome: .rejected, pnsReason: "garbage keyed by the id", attempts: 0, dwellMs: 0)
        ]
        // Another hub's producer under this send's id, and a garbage record keyed by it.
        #expect(try await store.recordOutcomes(ResultBatch(notificationId: id, hub: hub + "-other", dispatched: [.apns: 1]), now: Date()) == false)
        #expect(try await store.recordOutcomes(Self.results(id, hub + "-other", .apns, [("x", .delivered)]), now: Date()) == false)
        #expect(try await store.recordOutcomes(ResultBatch(notificationId: id, hub: "", results: rejected), now: Date()) == false)
        let untouched = try #require(try await store.notification(hub: hub, id: id))
        #expect(untouched.state == .enqueued && untouched.counts.isEmpty && untouched.expectedTargets == nil, "\(untouched)")
        // Its own hub's still count.
        #expect(try await store.recordOutcomes(ResultBatch(notificationId: id, hub: hub, dispatched: [.apns: 1]), now: Date()))
        #expect(try await store.recordOutcomes(Self.results(id, hub, .apns, [("x", .delivered)]), now: Date()))
        #expect(try await store.notification(hub: hub, id: id)?.state == .completed)
        let unknown = UUID().uuidString.lowercased()
        #expect(try await store.recordOutcomes(ResultBatch(notificationId: unknown, hub: "", results: rejected), now: Date()) == false)
        #expect(try await store.notification(hub: "", id: unknown) == nil)
    }

    @Test("a dead handle: the registration goes; an installation is marked expired until a new channel", arguments: StoreKind.available)
    func pruning(_ kind: StoreKind) async throws {
        let (store, hub) = try await Self.outcomes(kind)
        _ = try await store.upsertRegistration(
            Registration(registrationId: "dead", hub: hub, format: .apple, handle: "x", tags: [], updatedAt: Date()), ifMatch: nil)
        try await store.pruneInvalidHandle(hub: hub, registrationId: "dead")
        #expect(try await store.registration(hub: hub, id: "dead") == nil)
        #expect(try await store.registrationIdState(hub: hub, id: "dead") == .unknown)

        _ = try await store.upsertInstallation(
            Installation(installationId: "i", platform: .fcmv1, pushChannel: "old", templates: ["t": .init(body: "{}")]), hub: hub)
        try await store.pruneInvalidHandle(hub: hub, registrationId: Registration.installationRegistrationId("i", template: nil))
        #expect(try await store.installation(hub: hub, id: "i")?.pushChannelExpired == true)
        #expect(try await store.all(hub: hub, matching: .installation("i")).isEmpty, "no more sends to the dead channel")
        _ = try await store.patchInstallation(hub: hub, id: "i", [.init(op: .replace, path: "/pushChannel", value: .string("new"))])
        #expect(try await store.installation(hub: hub, id: "i")?.pushChannelExpired == false)
        #expect(try await store.all(hub: hub, matching: .installation("i")).count == 2)
    }

    @Test("a dead handle prunes its registration only while it still holds that handle", arguments: StoreKind.available)
    func pruningByHandle(_ kind: StoreKind) async throws {
        let (store, hub) = try await Self.outcomes(kind)
        let native = Registration(registrationId: "moved", hub: hub, format: .apple, handle: "new", tags: [], updatedAt: Date())
        _ = try await store.upsertRegistration(native, ifMatch: nil)
        try await store.pruneInvalidHandle(hub: hub, registrationId: "moved", handle: "old")
        #expect(try await store.registration(hub: hub, id: "moved") != nil, "the device moved to a new handle before the old one's result came")
        try await store.pruneInvalidHandle(hub: hub, registrationId: "moved", handle: "new")
        #expect(try await store.registration(hub: hub, id: "moved") == nil)

        _ = try await store.upsertInstallation(Installation(installationId: "j", platform: .fcmv1, pushChannel: "second"), hub: hub)
        let installationRegistration = Registration.installationRegistrationId("j", template: nil)
        try await store.pruneInvalidHandle(hub: hub, registrationId: installationRegistration, handle: "first")
        #expect(try await store.installation(hub: hub, id: "j")?.pushChannelExpired == false, "registered again under a new channel")
        #expect(try await store.all(hub: hub, matching: .installation("j")).count == 1)
        try await store.pruneInvalidHandle(hub: hub, registrationId: installationRegistration, handle: "second")
        #expect(try await store.installation(hub: hub, id: "j")?.pushChannelExpired == true)
        #expect(try await store.all(hub: hub, matching: .installation("j")).isEmpty)
    }
}

/// Keeping, claiming and abandoning sends: these look across hubs, so they run one at a time.
@Suite("Recovery store conformance (SQLite and PostgreSQL)", .serialized)
struct RecoveryStoreTests {
    /// A time long past (1973 to 2001), different for each run. Recovery looks across hubs and
    /// PostgreSQL is shared by every test: these tests run one at a time, in times before any
    /// other test's deadlines, and look only at their own hub's sends.
    static func era() -> Date {
        Date(timeIntervalSince1970: 100_000_000 + Double(Int.random(in: 0..<900_000)) * 1_000)
    }

    /// Claims with a grace of 60 s (each test's own hub only; the limit is large, as earlier
    /// runs on a shared PostgreSQL leave sends behind).
    static func claim(_ store: any OutcomeStore, _ hub: String, now: Date, grace: TimeInterval = 60, maximumPublishes: Int = 10) async throws
        -> [SendRequest]
    {
        try await store.claimUnfinished(now: now, grace: grace, maximumPublishes: maximumPublishes, limit: 10_000).filter { $0.hub == hub }
    }

    /// Abandons with a grace of 120 s and 30 minutes for sends without a deadline.
    static func abandon(_ store: any OutcomeStore, _ hub: String, now: Date) async throws -> [AbandonedSend] {
        try await store.abandonStalled(now: now, grace: 120, abandonAfter: 1800, limit: 10_000).filter { $0.hub == hub }
    }

    @Test("a kept send is claimed again once quiet for the grace, by one replica, and forgotten when it ends", arguments: StoreKind.available)
    func unfinishedClaims(_ kind: StoreKind) async throws {
        let (store, hub) = try await OutcomeStoreTests.outcomes(kind)
        let t0 = Self.era()
        func at(_ seconds: TimeInterval) -> Date { t0.addingTimeInterval(seconds) }
        let kept = OutcomeStoreTests.request(UUID().uuidString.lowercased(), hub, at: t0)
        let unkept = OutcomeStoreTests.request(UUID().uuidString.lowercased(), hub, at: t0)
        try await store.recordEnqueued(kept, deadline: at(10_000), keep: true, now: t0)
        try await store.recordEnqueued(unkept, deadline: at(10_000), keep: false, now: t0)
        #expect(try await Self.claim(store, hub, now: at(10)).isEmpty, "published 10 s ago")

        // Two replicas look at once: the send goes to exactly one of them.
        async let first = Self.claim(store, hub, now: at(61))
        async let second = Self.claim(store, hub, now: at(61))
        let claimed = try await first + second
        #expect(claimed == [kept], "the kept request as accepted, once; the send not kept never")
        // Published twice now: the next wait is two graces.
        #expect(try await Self.claim(store, hub, now: at(150)).isEmpty, "the second wait is 120 s")
        #expect(try await Self.claim(store, hub, now: at(182)).map(\.notificationId) == [kept.notificationId])

        // Progress holds it back; results that stop short of the summary let it go again.
        try await store.recordOutcomes(ResultBatch(notificationId: kept.notificationId, hub: hub, dispatched: [.apns: 2]), now: at(200))
        #expect(try await Self.claim(store, hub, now: at(410)).isEmpty, "3 publishes: the next wait is 240 s")
        try await store.recordOutcomes(OutcomeStoreTests.results(kept.notificationId, hub, .apns, [("r1", .delivered)]), now: at(415))
        #expect(try await Self.claim(store, hub, now: at(440)).isEmpty, "it progressed 25 s ago")
        #expect(try await Self.claim(store, hub, now: at(480)).map(\.notificationId) == [kept.notificationId])
        try await store.recordOutcomes(OutcomeStoreTests.results(kept.notificationId, hub, .apns, [("r2", .delivered)]), now: at(490))
        #expect(try await store.notification(hub: hub, id: kept.notificationId)?.state == .completed)
        #expect(try await Self.claim(store, hub, now: at(9000)).isEmpty, "ended: no longer kept")

        // At most `maximumPublishes` publishes, the first included.
        let stuck = OutcomeStoreTests.request(UUID().uuidString.lowercased(), hub, at: t0)
        try await store.recordEnqueued(stuck, deadline: at(100_000), keep: true, now: at(1000))
        #expect(try await Self.claim(store, hub, now: at(1100), maximumPublishes: 2).count == 1)
        #expect(try await Self.claim(store, hub, now: at(5000), maximumPublishes: 2).isEmpty, "published twice: no more")

        // A send that could not be queued is forgotten with its kept request.
        let failed = OutcomeStoreTests.request(UUID().uuidString.lowercased(), hub, at: t0)
        try await store.recordEnqueued(failed, deadline: at(10_000), keep: true, now: at(5))
        try await store.forgetEnqueued(hub: hub, notificationId: failed.notificationId)
        #expect(try await store.notification(hub: hub, id: failed.notificationId) == nil)
        #expect(try await Self.claim(store, hub, now: at(9000), maximumPublishes: 100).map(\.notificationId) == [stuck.notificationId])
    }

    @Test(
        "a send quiet past its deadline ends Abandoned with its reason; unreported targets expire; later results change nothing",
        arguments: StoreKind.available)
    func abandonment(_ kind: StoreKind) async throws {
        let (store, hub) = try await OutcomeStoreTests.outcomes(kind)
        let t0 = Self.era()
        func at(_ seconds: TimeInterval) -> Date { t0.addingTimeInterval(seconds) }
        let lost = OutcomeStoreTests.request(UUID().uuidString.lowercased(), hub, at: t0)
        let partial = OutcomeStoreTests.request(UUID().uuidString.lowercased(), hub, at: t0)
        let moving = OutcomeStoreTests.request(UUID().uuidString.lowercased(), hub, at: t0)
        for request in [lost, partial, moving] { try await store.recordEnqueued(request, deadline: at(1800), keep: true, now: t0) }
        try await store.recordOutcomes(
            ResultBatch(notificationId: partial.notificationId, hub: hub, dispatched: [.apns: 3, .fcm: 2, .wns: 0]), now: at(10))
        try await store.recordOutcomes(OutcomeStoreTests.results(partial.notificationId, hub, .apns, [("r1", .delivered)]), now: at(20))
        try await store.recordOutcomes(ResultBatch(notificationId: moving.notificationId, hub: hub, dispatched: [.apns: 2]), now: at(10))
        try await store.recordOutcomes(OutcomeStoreTests.results(moving.notificationId, hub, .apns, [("m1", .delivered)]), now: at(1950))

        #expect(try await Self.abandon(store, hub, now: at(1900)).isEmpty, "within the grace")
        async let first = Self.abandon(store, hub, now: at(2000))
        async let second = Self.abandon(store, hub, now: at(2000))
        let abandoned = try await (first + second).sorted { $0.unreported < $1.unreported }
        #expect(abandoned.map(\.notificationId) == [lost.notificationId, partial.notificationId], "each once; the send still moving is left")
        #expect(abandoned.map(\.unreported) == [0, 4])
        #expect(abandoned[0].reason.contains("never dispatched"), "\(abandoned[0].reason)")
        #expect(abandoned[1].reason.contains("4 of 5 targets"), "\(abandoned[1].reason)")

        let ended = try #require(try await store.notification(hub: hub, id: partial.notificationId))
        #expect(ended.state == .abandoned)
        #expect(ended.reason == abandoned[1].reason)
        #expect(ended.endedAt != nil)
        #expect(ended.counts == [.apns: [.delivered: 1, .expired: 2], .fcm: [.expired: 2]])
        try await store.recordOutcomes(
            OutcomeStoreTests.results(partial.notificationId, hub, .fcm, [("f1", .delivered), ("f2", .delivered)]), now: at(2100))
        #expect(try await store.notification(hub: hub, id: partial.notificationId) == ended, "given up: later results change nothing")
        #expect(try await store.notification(hub: hub, id: lost.notificationId)?.state == .abandoned)
        #expect(try await store.notification(hub: hub, id: moving.notificationId)?.state == .processing)
        #expect(
            try await Self.claim(store, hub, now: at(2200), grace: 100).map(\.notificationId) == [moving.notificationId],
            "abandoned sends are no longer kept")

        // Seen first through its results (produced straight into Kafka): no deadline of its own,
        // given up 30 minutes after it was first seen.
        let direct = UUID().uuidString.lowercased()
        try await store.recordOutcomes(OutcomeStoreTests.results(direct, hub, .fcm, [("d1", .delivered)]), now: at(3000))
        #expect(
            try await Self.abandon(store, hub, now: at(4900)).filter { $0.notificationId == direct }.isEmpty, "30 minutes and the grace not yet past")
        let late = try await Self.abandon(store, hub, now: at(5000)).filter { $0.notificationId == direct }
        #expect(late.first?.reason.contains("1 targets reported, but the dispatcher never said") == true, "\(late)")
    }

    @Test(
        "sends ended before the cutoff go with everything kept for them, a limit at a time, whatever their deadline; open and later ones stay",
        arguments: StoreKind.available)
    func endedSendsSwept(_ kind: StoreKind) async throws {
        // A database of its own: the sweep is by the time a send ended, whatever its hub.
        let store = try await SQLRegistrationStore.open(try await StoreFixture.ownDatabase(kind)())
        let hub = "h"
        let t0 = Date(timeIntervalSince1970: 1_700_000_000)
        func at(_ seconds: TimeInterval) -> Date { t0.addingTimeInterval(seconds) }
        /// Rows kept for `id` in each table a send has rows in.
        func rows(of id: String) async throws -> [String: Int64] {
            try await store.database.read { connection in
                var counts: [String: Int64] = [:]
                for table in [
                    "notifications", "notification_counts", "failed_targets", "scheduled_notifications", "unfinished_sends",
                ] {
                    counts[table] =
                        try await connection.query("SELECT count(*) AS n FROM \(table) WHERE notification_id = ?", [.text(id)]).first?.integer("n")
                }
                return counts.filter { $0.value > 0 }
            }
        }
        // Ended at t0 + 2, well before its deadline: kept, counted, one target failed (error
        // details and feedback).
        let first = OutcomeStoreTests.request("first", hub, at: t0)
        try await store.recordEnqueued(first, deadline: at(1_000_000), keep: true, now: t0)
        try await store.recordOutcomes(ResultBatch(notificationId: "first", hub: hub, dispatched: [.apns: 2]), now: at(1))
        try await store.recordOutcomes(OutcomeStoreTests.results("first", hub, .apns, [("r1", .delivered), ("r2", .invalidHandle)]), now: at(2))
        #expect(try await store.notification(hub: hub, id: "first")?.state == .completed)
        #expect(
            try await rows(of: "first") == ["notifications": 1, "notification_counts": 2, "failed_targets": 1],
            "what a send keeps; its kept request went as it ended")
        // Ended at t0 + 100, and one still open.
        try await store.recordOutcomes(ResultBatch(notificationId: "second", hub: hub, dispatched: [.fcm: 0]), now: at(100))
        try await store.recordEnqueued(OutcomeStoreTests.request("open", hub, at: t0), deadline: at(1800), keep: true, now: t0)
        try await store.recordOutcomes(ResultBatch(notificationId: "open", hub: hub, dispatched: [.apns: 2]), now: at(1))

        #expect(try await store.sweepEndedSends(endedBefore: at(50), limit: 10) == 1, "the send that ended before the cutoff, not its deadline")
        #expect(try await rows(of: "first") == ["failed_targets": 1], "every row of the send ended before the cutoff but its error details")
        #expect(try await store.notification(hub: hub, id: "first") == nil)
        #expect(try await store.failedTargets(hub: hub, notificationId: "first", after: nil, limit: 10).isEmpty)
        #expect(
            try await store.prunedHandles(hub: hub, since: .distantPast, after: nil, limit: 10).map(\.handle) == ["h-r2"],
            "the hub's feedback is kept for its own month")
        #expect(try await store.notification(hub: hub, id: "second")?.state == .noTargetFound, "ended after the cutoff")
        #expect(try await store.notification(hub: hub, id: "open")?.state == .processing)

        // More than a limit, and more than a statement's ids: 230 ended at t0 + 200, oldest first.
        let many = (0..<230).map { String(format: "many-%03d", $0) }
        try await store.recordOutcomes(many.map { ResultBatch(notificationId: $0, hub: hub, dispatched: [.apns: 0]) }, now: at(200))
        var swept: [Int] = []
        while true {
            let count = try await store.sweepEndedSends(endedBefore: at(300), limit: 150)
            swept.append(count)
            if count < 150 { break }
        }
        #expect(swept == [150, 81], "the second send and the 230")
        #expect(try await store.notification(hub: hub, id: "second") == nil, "the oldest end went in the first transaction")
        for id in many where try await !rows(of: id).isEmpty { Issue.record("\(id) was left") }
        #expect(try await rows(of: "open") == ["notifications": 1, "unfinished_sends": 1], "an open send stays whole")
        #expect(try await store.sweepEndedSends(endedBefore: at(10_000_000), limit: 150) == 0, "nothing open goes, however old")

        // A scheduled send cancelled ends now, and goes with its schedule.
        try await store.schedule(OutcomeStoreTests.request("scheduled", hub, at: t0), dueAt: Date().addingTimeInterval(3600))
        #expect(try await store.cancelScheduled(hub: hub, notificationId: "scheduled"))
        #expect(try await store.sweepEndedSends(endedBefore: Date().addingTimeInterval(-60), limit: 150) == 0)
        #expect(try await rows(of: "scheduled") == ["notifications": 1, "scheduled_notifications": 1])
        #expect(try await store.sweepEndedSends(endedBefore: Date().addingTimeInterval(60), limit: 150) == 1)
        #expect(try await rows(of: "scheduled").isEmpty)
        await store.close()
    }

}
