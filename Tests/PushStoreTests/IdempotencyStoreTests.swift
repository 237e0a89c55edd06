import Foundation
import PushModel
import Testing

@testable import PushStore

@Suite("Idempotency keys and dispatch notes")
struct IdempotencyStoreTests {
    static func store(_ kind: StoreKind) async throws -> (SQLRegistrationStore, String) {
        let fixture = try await StoreFixture.make(kind)
        return (try #require(fixture.store as? SQLRegistrationStore), fixture.hub)
    }

    @Test("of 20 claims of one key at once, one sends; the others wait, then replay; another request is refused", arguments: StoreKind.available)
    func claims(_ kind: StoreKind) async throws {
        let (store, scope) = try await Self.store(kind)
        let now = Date()
        let claims = try await withThrowingTaskGroup(of: IdempotencyClaim.self) { group in
            for _ in 0..<20 {
                group.addTask {
                    try await store.claimIdempotencyKey(scope: scope, key: "k", fingerprint: "f", now: now, window: 86_400, pendingTimeout: 120)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let token = try #require(claims.compactMap(\.token).first)
        #expect(claims.compactMap(\.token).count == 1)
        #expect(claims.filter { $0 == .inProgress }.count == 19)
        #expect(try await store.completeIdempotencyKey(scope: scope, key: "k", token: token, notificationId: "n1", collection: "messages"))
        #expect(
            try await store.claimIdempotencyKey(scope: scope, key: "k", fingerprint: "f", now: now, window: 86_400, pendingTimeout: 120)
                == .replay(notificationId: "n1", collection: "messages"))
        #expect(
            try await store.claimIdempotencyKey(scope: scope, key: "k", fingerprint: "other", now: now, window: 86_400, pendingTimeout: 120)
                == .differentRequest)
        // Another scope's key of the same name is its own.
        #expect(
            try await store.claimIdempotencyKey(scope: scope + "-b", key: "k", fingerprint: "other", now: now, window: 86_400, pendingTimeout: 120)
                .token != nil)
        // Past the window the key is new again, whatever the request.
        let tomorrow = now.addingTimeInterval(86_401)
        #expect(
            try await store.claimIdempotencyKey(scope: scope, key: "k", fingerprint: "other", now: tomorrow, window: 86_400, pendingTimeout: 120)
                .token != nil)
    }

    @Test("a claim never completed is free again after its time-out; a released one at once", arguments: StoreKind.available)
    func abandoned(_ kind: StoreKind) async throws {
        let (store, scope) = try await Self.store(kind)
        let now = Date()
        func claim(_ key: String, at time: Date) async throws -> IdempotencyClaim {
            try await store.claimIdempotencyKey(scope: scope, key: key, fingerprint: "f", now: time, window: 86_400, pendingTimeout: 120)
        }
        let first = try #require(try await claim("gone", at: now).token)
        #expect(try await claim("gone", at: now.addingTimeInterval(60)) == .inProgress)
        let second = try #require(try await claim("gone", at: now.addingTimeInterval(121)).token, "abandoned, so claimed again")
        // The first claim's request, late, neither completes nor frees the second's.
        #expect(
            try await store.completeIdempotencyKey(scope: scope, key: "gone", token: first, notificationId: "late", collection: "messages") == false)
        try await store.releaseIdempotencyKey(scope: scope, key: "gone", token: first)
        #expect(try await claim("gone", at: now.addingTimeInterval(122)) == .inProgress)
        #expect(try await store.completeIdempotencyKey(scope: scope, key: "gone", token: second, notificationId: "n2", collection: "messages"))
        #expect(try await claim("gone", at: now.addingTimeInterval(123)) == .replay(notificationId: "n2", collection: "messages"))
        // A send the queue did not answer for certain: the same request sends under its id
        // again; another request under a new one.
        let failed = try #require(try await claim("unsure", at: now).token)
        try await store.failIdempotencyKey(scope: scope, key: "unsure", token: failed, notificationId: "n-unsure")
        let retry = try await claim("unsure", at: now)
        #expect(retry.token != nil && retry.reusing == "n-unsure")
        try await store.failIdempotencyKey(scope: scope, key: "unsure", token: try #require(retry.token), notificationId: "n-unsure")
        let changed = try await store.claimIdempotencyKey(
            scope: scope, key: "unsure", fingerprint: "g", now: now, window: 86_400, pendingTimeout: 120)
        #expect(changed.token != nil && changed.reusing == nil)
        let freed = try #require(try await claim("freed", at: now).token)
        try await store.releaseIdempotencyKey(scope: scope, key: "freed", token: freed)
        #expect(try await claim("freed", at: now).token != nil)
    }

    @Test(
        "a notification id is dispatched once from one record; the same record again goes on; past the window it is new",
        arguments: StoreKind.available)
    func dispatchNotes(_ kind: StoreKind) async throws {
        let (store, _) = try await Self.store(kind)
        let id = UUID().uuidString
        let now = Date()
        #expect(try await store.claimDispatch(hub: "h", notificationId: id, source: "requests:0:7", now: now, window: 3600))
        #expect(try await store.claimDispatch(hub: "h", notificationId: id, source: "requests:0:7", now: now, window: 3600), "a redelivery")
        #expect(
            try await store.claimDispatch(hub: "h", notificationId: id, source: "requests:1:9", now: now, window: 3600) == false, "produced twice")
        #expect(try await store.claimDispatch(hub: "other", notificationId: id, source: "requests:1:9", now: now, window: 3600), "another hub's")
        // One that could not be dispatched is forgotten, so a corrected record may be.
        try await store.releaseDispatch(hub: "other", notificationId: id, source: "requests:1:9")
        #expect(try await store.claimDispatch(hub: "other", notificationId: id, source: "requests:2:1", now: now, window: 3600))
        #expect(try await store.claimDispatch(hub: "h", notificationId: id, source: "requests:1:9", now: now.addingTimeInterval(3601), window: 3600))
    }
}

@Suite("Failed targets and feedback")
struct FeedbackStoreTests {
    @Test("failed targets are kept once each, in order; invalid handles of registrations are the feedback, paged", arguments: StoreKind.available)
    func kept(_ kind: StoreKind) async throws {
        let (store, hub) = try await IdempotencyStoreTests.store(kind)
        let id = UUID().uuidString.lowercased()
        let now = Date()
        try await store.recordOutcomes(ResultBatch(notificationId: id, hub: hub, dispatched: [.apns: 5]), now: now)
        let results = [
            DeliveryResult(registrationId: "r1", handle: "h1", outcome: .delivered, pnsStatus: 200, attempts: 1, dwellMs: 1),
            DeliveryResult(
                registrationId: "r2", handle: "h2", outcome: .invalidHandle, pnsStatus: 410, pnsReason: "Unregistered", attempts: 1, dwellMs: 1),
            DeliveryResult(
                registrationId: "r3", handle: "h3", outcome: .throttled, pnsStatus: 429, pnsReason: "TooManyRequests", attempts: 5, dwellMs: 1),
            DeliveryResult(
                registrationId: nil, handle: "h4", outcome: .invalidHandle, pnsStatus: 400, pnsReason: "BadDeviceToken", attempts: 1, dwellMs: 1),
            DeliveryResult(
                registrationId: "r5", handle: "h5", outcome: .invalidHandle, pnsStatus: 410, pnsReason: "Unregistered", attempts: 1, dwellMs: 1),
        ]
        let batch = ResultBatch(notificationId: id, hub: hub, platform: .apns, results: results)
        #expect(try await store.recordOutcomes(batch, now: now))
        #expect(try await store.recordOutcomes(batch, now: now) == false, "a repeat changes nothing")
        let failed = try await store.failedTargets(hub: hub, notificationId: id, after: nil, limit: 10)
        #expect(failed.map(\.target) == failed.map(\.target).sorted(), "in target order")
        #expect(Set(failed.compactMap(\.result.handle)) == ["h2", "h3", "h4", "h5"])
        let throttled = try #require(failed.first { $0.result.handle == "h3" })
        #expect(
            throttled.result.outcome == .throttled && throttled.result.pnsStatus == 429 && throttled.result.pnsReason == "TooManyRequests"
                && throttled.result.attempts == 5)
        #expect(try await store.failedTargets(hub: hub + "x", notificationId: id, after: nil, limit: 10).isEmpty, "another hub's")
        let firstTwo = try await store.failedTargets(hub: hub, notificationId: id, after: nil, limit: 2)
        let rest = try await store.failedTargets(hub: hub, notificationId: id, after: firstTwo.last?.target, limit: 10)
        #expect((firstTwo + rest).map(\.target) == failed.map(\.target))
        // The feedback: registrations' dead handles only (a direct send's has nothing to prune).
        let feedback = try await store.prunedHandles(hub: hub, since: now.addingTimeInterval(-1), after: nil, limit: 10)
        #expect(feedback.map(\.handle) == ["h2", "h5"])
        #expect(feedback.first?.registrationId == "r2" && feedback.first?.notificationId == id && feedback.first?.pnsReason == "Unregistered")
        let page = try await store.prunedHandles(hub: hub, since: now.addingTimeInterval(-1), after: feedback.first?.sequence, limit: 10)
        #expect(page.map(\.handle) == ["h5"])
        #expect(try await store.prunedHandles(hub: hub, since: now.addingTimeInterval(1), after: nil, limit: 10).isEmpty)
    }

    @Test("a batch of many failures is kept whole, each once", arguments: StoreKind.available)
    func many(_ kind: StoreKind) async throws {
        let (store, hub) = try await IdempotencyStoreTests.store(kind)
        let id = UUID().uuidString.lowercased()
        try await store.recordOutcomes(ResultBatch(notificationId: id, hub: hub, dispatched: [.fcm: 60]), now: Date())
        let results = (0..<60).map {
            DeliveryResult(
                registrationId: "r\($0)", handle: "h\($0)", outcome: .invalidHandle, pnsStatus: 404, pnsReason: "UNREGISTERED", attempts: 1,
                dwellMs: 1)
        }
        try await store.recordOutcomes(ResultBatch(notificationId: id, hub: hub, platform: .fcm, results: results), now: Date())
        #expect(try await store.failedTargets(hub: hub, notificationId: id, after: nil, limit: 100).count == 60)
        #expect(
            Set(
                try await store.prunedHandles(hub: hub, since: .distantPast, after: nil, limit: 1000).filter { $0.notificationId == id }.map(\.handle)
            ).count == 60)
    }

    @Test(
        "the sweep deletes error details and rich payloads after a week, feedback after a month, unused registration ids after a day, keys and notes after theirs",
        arguments: StoreKind.available)
    func swept(_ kind: StoreKind) async throws {
        // A database of its own: the sweep is by age, whatever the hub.
        let store = try await SQLRegistrationStore.open(try await StoreFixture.ownDatabase(kind)())
        let id = UUID().uuidString.lowercased()
        let now = Date()
        try await store.recordOutcomes(ResultBatch(notificationId: id, hub: "h", dispatched: [.apns: 1]), now: now)
        try await store.recordOutcomes(
            ResultBatch(
                notificationId: id, hub: "h", platform: .apns,
                results: [DeliveryResult(registrationId: "r", handle: "x", outcome: .invalidHandle, pnsStatus: 410, attempts: 1, dwellMs: 1)]),
            now: now)
        _ = try await store.claimIdempotencyKey(scope: "s", key: "k", fingerprint: "f", now: now, window: 86_400, pendingTimeout: 120)
        #expect(try await store.claimDispatch(hub: "h", notificationId: id, source: "a", now: now, window: 3600))
        let issued = try await store.issueRegistrationId(hub: "h")
        let rich = try await store.storeRichPayload(
            RichPayload(hub: "h", sender: "s", recipient: "r", contentType: "image/png", richType: "img", message: "m", bytes: Data([1, 2, 3])),
            quota: RichPayloadQuota())
        try await store.sweepExpired(now: now.addingTimeInterval(2 * 3600), keys: 86_400, dispatches: 3600)
        #expect(try await store.claimDispatch(hub: "h", notificationId: id, source: "b", now: now, window: 3600), "its note was deleted")
        #expect(
            try await store.claimIdempotencyKey(scope: "s", key: "k", fingerprint: "f", now: now, window: 86_400, pendingTimeout: 120) == .inProgress)
        try await store.sweepExpired(now: now.addingTimeInterval(23 * 3600), keys: 86_400, dispatches: 3600)
        #expect(try await store.registrationIdState(hub: "h", id: issued) == .issued, "issued 23 hours ago")
        try await store.sweepExpired(now: now.addingTimeInterval(25 * 3600), keys: 86_400, dispatches: 3600)
        #expect(try await store.registrationIdState(hub: "h", id: issued) == .unknown, "issued over a day ago and never used")
        #expect(try await store.richPayload(hub: "h", id: rich.id, retention: 365 * 86_400) != nil, "a rich payload a day old")
        try await store.sweepExpired(now: now.addingTimeInterval(8 * 86_400), keys: 86_400, dispatches: 3600)
        #expect(
            try await store.richPayload(hub: "h", id: rich.id, retention: 365 * 86_400) == nil,
            "past its week, deleted though its sender stored no other")
        #expect(try await store.failedTargets(hub: "h", notificationId: id, after: nil, limit: 10).isEmpty)
        #expect(try await store.prunedHandles(hub: "h", since: now.addingTimeInterval(-1), after: nil, limit: 10).count == 1)
        #expect(
            try await store.claimIdempotencyKey(scope: "s", key: "k", fingerprint: "f", now: now, window: 86_400, pendingTimeout: 120).token != nil)
        try await store.sweepExpired(now: now.addingTimeInterval(31 * 86_400), keys: 86_400, dispatches: 3600)
        #expect(try await store.prunedHandles(hub: "h", since: now.addingTimeInterval(-1), after: nil, limit: 10).isEmpty)
        await store.close()
    }

    @Test(
        "the sweep deletes registrations past their ExpirationTime, an installation's with it, a transaction at a time; the rest stay",
        arguments: StoreKind.available)
    func expiredRegistrationsSwept(_ kind: StoreKind) async throws {
        // A database of its own: the sweep is by time, whatever the hub.
        let store = try await SQLRegistrationStore.open(try await StoreFixture.ownDatabase(kind)())
        let now = Date()
        func registration(_ id: String, expiresAt: Date?) -> Registration {
            Registration(registrationId: id, hub: "h", format: .apple, handle: "t-\(id)", tags: ["Sports"], expiresAt: expiresAt, updatedAt: now)
        }
        for (id, expiry) in [("old", now.addingTimeInterval(-60)), ("older", now.addingTimeInterval(-120)), ("fresh", now.addingTimeInterval(3600))] {
            _ = try await store.upsertRegistration(registration(id, expiresAt: expiry), ifMatch: nil)
        }
        _ = try await store.upsertRegistration(registration("forever", expiresAt: nil), ifMatch: nil)
        for (id, expiry) in [
            ("gone", now.addingTimeInterval(-60)), ("kept", now.addingTimeInterval(3600)), ("renewed", now.addingTimeInterval(3600)),
            ("orphan", now.addingTimeInterval(-60)),
        ] {
            _ = try await store.upsertInstallation(
                Installation(installationId: id, platform: .apns, pushChannel: "t-\(id)", tags: ["Sports"], expirationTime: expiry), hub: "h")
        }
        try await store.database.write { connection in
            // Registrations whose expiry says past while their installation's document says
            // otherwise (as a renewal between the sweep's read and its lock leaves them): they
            // stay, and the sweep goes past them. And an installation row gone from under its
            // registrations.
            try await connection.execute(
                "UPDATE registrations SET expires_at = ? WHERE hub = 'h' AND installation_id = 'renewed'", [SQLValue(now.addingTimeInterval(-600))])
            try await connection.execute("DELETE FROM installations WHERE hub = 'h' AND installation_id = 'orphan'", [])
        }
        func sports() async throws -> (page: Set<String>, count: Int64?) {
            let page = try await store.registrations(hub: "h", matching: .tagExpression(.tag("Sports")), after: nil, limit: 100)
            // SQLite keeps each tag's count for its planner (PostgreSQL has its statistics).
            guard kind == .sqlite else { return (Set(page.registrations.map { $0.installationId ?? $0.registrationId }), nil) }
            let count = try await store.database.read { connection in
                try await connection.query("SELECT registrations FROM tag_counts WHERE hub = ? AND tag = ?", [.text("h"), .text("Sports")]).first?
                    .integer("registrations")
            }
            return (Set(page.registrations.map { $0.installationId ?? $0.registrationId }), count)
        }
        #expect(try await sports().page.count == 8)
        #expect(try await sports().count == (kind == .sqlite ? 8 : nil))

        // One a transaction: the sweep goes on past its first.
        try await store.sweepExpired(now: now, keys: 86_400, dispatches: 3600, rowsPerTransaction: 1)

        for id in ["old", "older"] { #expect(try await store.registration(hub: "h", id: id) == nil, "\(id) expired") }
        for id in ["fresh", "forever"] { #expect(try await store.registration(hub: "h", id: id) != nil, "\(id) stays") }
        #expect(try await store.installation(hub: "h", id: "gone") == nil, "an expired installation goes with its registrations")
        var byTag = InstallationFilter()
        byTag.tags = .tag("Sports")
        let installations = try await store.installations(hub: "h", matching: byTag, after: nil, limit: 10).installations()
        #expect(Set(installations.map(\.installationId)) == ["kept", "renewed"], "and its tag rows")
        let after = try await sports()
        #expect(after.page == ["fresh", "forever", "kept", "renewed"], "the orphan's registration went alone")
        #expect(after.count == (kind == .sqlite ? 4 : nil), "the tag's count follows")
        await store.close()
    }

    @Test(
        "a round's sweep of expired registrations goes on where the last stopped, so rows it passes hold up none behind them; past the last it starts again",
        arguments: StoreKind.available)
    func expiredSweepGoesOn(_ kind: StoreKind) async throws {
        let store = try await SQLRegistrationStore.open(try await StoreFixture.ownDatabase(kind)())
        let now = Date()
        // Five installations whose registrations say expired while their documents do not (the
        // sweep passes them), expired before three registrations that did expire.
        for index in 0..<5 {
            _ = try await store.upsertInstallation(
                Installation(
                    installationId: "renewed-\(index)", platform: .apns, pushChannel: "t-\(index)", expirationTime: now.addingTimeInterval(3600)),
                hub: "h")
        }
        try await store.database.write { connection in
            try await connection.execute("UPDATE registrations SET expires_at = ? WHERE hub = 'h'", [SQLValue(now.addingTimeInterval(-600))])
        }
        for id in ["a", "b", "c"] {
            _ = try await store.upsertRegistration(
                Registration(
                    registrationId: id, hub: "h", format: .apple, handle: "t-\(id)", tags: [], expiresAt: now.addingTimeInterval(-60), updatedAt: now),
                ifMatch: nil)
        }
        func left() async throws -> [String] {
            var ids: [String] = []
            for id in ["a", "b", "c"] where try await store.registration(hub: "h", id: id) != nil { ids.append(id) }
            return ids
        }
        // Four a round, two a transaction: the first round looks at four of the five it passes.
        try await store.sweepExpired(now: now, keys: 86_400, dispatches: 3600, rowsPerTransaction: 2, registrationsPerRound: 4)
        #expect(try await left() == ["a", "b", "c"])
        #expect(store.expiryCursor.withLock { $0 } != nil, "it stopped within the index")
        // A registration written with an expiry before where the first stopped.
        _ = try await store.upsertRegistration(
            Registration(
                registrationId: "d", hub: "h", format: .apple, handle: "t-d", tags: [], expiresAt: now.addingTimeInterval(-900), updatedAt: now),
            ifMatch: nil)
        // The second goes on from there: the fifth, then the three; the earlier one waits.
        try await store.sweepExpired(now: now, keys: 86_400, dispatches: 3600, rowsPerTransaction: 2, registrationsPerRound: 4)
        #expect(try await left() == [], "the second round went on past the rows the first passed")
        #expect(try await store.registration(hub: "h", id: "d") != nil)
        // The third reaches the last, and goes on from the first in the same round.
        try await store.sweepExpired(now: now, keys: 86_400, dispatches: 3600, rowsPerTransaction: 2, registrationsPerRound: 4)
        #expect(try await store.registration(hub: "h", id: "d") == nil)
        for index in 0..<5 { #expect(try await store.installation(hub: "h", id: "renewed-\(index)") != nil, "renewed installations stay") }
        await store.close()
    }

    @Test(
        "an installation whose push channel expired goes once past its ExpirationTime, though no registration is left to carry it; one renewed stays",
        arguments: StoreKind.available)
    func prunedInstallationsExpire(_ kind: StoreKind) async throws {
        let store = try await SQLRegistrationStore.open(try await StoreFixture.ownDatabase(kind)())
        let now = Date()
        let hour: TimeInterval = 3600
        func install(_ id: String, channel: String, expiry: Date?) async throws {
            _ = try await store.upsertInstallation(
                Installation(installationId: id, platform: .apns, pushChannel: channel, tags: ["Sports"], expirationTime: expiry), hub: "h")
        }
        func prune(_ id: String) async throws {
            try await store.pruneInvalidHandle(hub: "h", registrationId: Registration.installationRegistrationId(id, template: nil))
        }
        func sweep(at time: Date) async throws {
            try await store.sweepExpired(now: time, keys: 86_400, dispatches: 3600, rowsPerTransaction: 2)
        }
        func left() async throws -> [String] {
            var ids: [String] = []
            for id in ["a", "b", "c", "never", "renewed", "later", "past"] where try await store.installation(hub: "h", id: id) != nil {
                ids.append(id)
            }
            return ids
        }
        // Three that expire in an hour (two a transaction: the sweep goes on past its first),
        // one that never does, one given a new channel after its prune (its registrations
        // carry its expiry again, five hours on), one whose expiry moved to five hours on
        // while its channel stayed expired, and one pruned after its expiry passed.
        for id in ["a", "b", "c", "renewed", "later"] { try await install(id, channel: "t-\(id)", expiry: now.addingTimeInterval(hour)) }
        try await install("never", channel: "t-never", expiry: nil)
        try await install("past", channel: "t-past", expiry: now.addingTimeInterval(-hour))
        for id in ["a", "b", "c", "never", "renewed", "later", "past"] { try await prune(id) }
        #expect(try await store.installation(hub: "h", id: "a")?.pushChannelExpired == true)
        try await install("renewed", channel: "t-renewed-2", expiry: now.addingTimeInterval(5 * hour))
        // Its document given a later expiry, its channel still expired (the hub API has no
        // such write; an import or an older build might).
        var later = try #require(try await store.installation(hub: "h", id: "later"))
        later.expirationTime = now.addingTimeInterval(5 * hour)
        let document = SQLRegistrationStore.document(later)
        try await store.database.write { connection in
            try await connection.execute("UPDATE installations SET document = ? WHERE hub = 'h' AND installation_id = 'later'", [.text(document)])
        }

        try await sweep(at: now)
        #expect(try await left() == ["a", "b", "c", "never", "renewed", "later"], "only the one past its expiry went")
        try await sweep(at: now.addingTimeInterval(2 * hour))
        #expect(try await left() == ["never", "renewed", "later"])
        try await sweep(at: now.addingTimeInterval(6 * hour))
        // The renewed one's registrations carried its expiry: it went with them.
        #expect(try await left() == ["never"])
        let rows = try await store.database.read { try await $0.query("SELECT installation_id FROM installation_expiries", []) }
        #expect(rows.isEmpty, "the list is empty again")
        await store.close()
    }

    @Test(
        "a sweep with more expired rows than one transaction deletes goes on until none is left, and only those",
        arguments: StoreKind.available)
    func sweptPastOneTransaction(_ kind: StoreKind) async throws {
        let store = try await SQLRegistrationStore.open(try await StoreFixture.ownDatabase(kind)())
        let old = Date().addingTimeInterval(-3 * 86_400)
        let now = Date()
        func claim(_ key: String, at time: Date) async throws -> IdempotencyClaim {
            try await store.claimIdempotencyKey(scope: "s", key: key, fingerprint: "f", now: time, window: 86_400, pendingTimeout: 120)
        }
        // 25 expired keys (three transactions of 10: 10, 10 and 5), 20 expired dispatch notes
        // (a multiple: 10, 10, then one that finds none), and 3 of each still kept.
        for index in 0..<25 { _ = try #require(try await claim("old-\(index)", at: old).token) }
        for index in 0..<3 { _ = try #require(try await claim("new-\(index)", at: now).token) }
        for index in 0..<20 { #expect(try await store.claimDispatch(hub: "h", notificationId: "old-\(index)", source: "a", now: old, window: 3600)) }
        for index in 0..<3 { #expect(try await store.claimDispatch(hub: "h", notificationId: "new-\(index)", source: "a", now: now, window: 3600)) }

        try await store.sweepExpired(now: now, keys: 86_400, dispatches: 3600, rowsPerTransaction: 10)

        // Asked at the time they were made, a row still there would be in its window.
        for index in 0..<25 { #expect(try await claim("old-\(index)", at: old).token != nil, "expired key \(index) was deleted") }
        for index in 0..<3 { #expect(try await claim("new-\(index)", at: now) == .inProgress, "kept key \(index) stays") }
        for index in 0..<20 {
            #expect(
                try await store.claimDispatch(hub: "h", notificationId: "old-\(index)", source: "b", now: old, window: 3600),
                "expired note \(index) was deleted")
        }
        for index in 0..<3 {
            #expect(
                try await store.claimDispatch(hub: "h", notificationId: "new-\(index)", source: "b", now: now, window: 3600) == false,
                "kept note \(index) stays")
        }
        await store.close()
    }
}
