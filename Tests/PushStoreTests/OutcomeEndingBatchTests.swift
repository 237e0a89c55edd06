import Foundation
import PushModel
import Testing

@testable import PushStore

@Suite("A send resolved as it was accepted, counted to its end (SQLite and PostgreSQL)")
struct OutcomeEndingBatchTests {
    static func targetRows(_ store: any RegistrationStore, _ id: String, table: String = "result_targets") async throws -> Int64 {
        let database = try #require(store as? SQLRegistrationStore).database
        return try await database.read { connection in
            try await connection.query("SELECT count(*) AS n FROM \(table) WHERE notification_id = ?", [.text(id)]).first?.integer("n") ?? -1
        }
    }

    /// A send noted as the ingress notes one it resolved: Processing with its summary.
    static func enqueue(
        _ store: any RegistrationStore & OutcomeStore, _ hub: String, keep: Bool, dispatched: [Platform: Int]
    ) async throws -> String {
        let id = RandomID.timeOrdered()
        try await store.recordEnqueued(
            OutcomeStoreTests.request(id, hub), deadline: Date().addingTimeInterval(600), keep: keep, dispatched: dispatched, now: Date())
        return id
    }

    @Test("a dispatch summary's counts as the dispatched column keeps them: a JSON object, platforms in the order of their names")
    func dispatchedText() throws {
        #expect(SQLRegistrationStore.dispatchedText([.wns: 3, .apns: 0, .webpush: 12, .fcm: 1]) == #"{"apns":0,"fcm":1,"webpush":12,"wns":3}"#)
        #expect(SQLRegistrationStore.dispatchedText([:]) == "{}")
        let every = Dictionary(uniqueKeysWithValues: Platform.allCases.enumerated().map { ($0.element, 1_000 * $0.offset) })
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(SQLRegistrationStore.dispatchedText(every).utf8)) as? [String: Int])
        #expect(object == Dictionary(uniqueKeysWithValues: every.map { ($0.key.rawValue, $0.value) }))
        #expect(SQLRegistrationStore.dispatchedText(every).hasPrefix(#"{"adm":5000,"apns":0,"baidu":7000,"#))
    }

    @Test(
        "every target in one batch: Completed, counts and failures kept, counted targets and kept request gone; again, nothing changes",
        arguments: StoreKind.available)
    func oneBatchEnds(_ kind: StoreKind) async throws {
        let (store, hub) = try await OutcomeStoreTests.outcomes(kind)
        let id = try await Self.enqueue(store, hub, keep: true, dispatched: [.apns: 2, .fcm: 0])
        let before = try #require(try await store.notification(hub: hub, id: id))
        #expect(before.state == .processing && before.expectedTargets == 2)
        let batch = OutcomeStoreTests.results(id, hub, .apns, [("r1", .delivered), ("r2", .invalidHandle)])
        #expect(try await store.recordOutcomes(batch, now: Date()))
        let after = try #require(try await store.notification(hub: hub, id: id))
        #expect(after.state == .completed && after.endedAt != nil)
        #expect(after.counts == [.apns: [.delivered: 1, .invalidHandle: 1]])
        #expect(try await store.failedTargets(hub: hub, notificationId: id, after: nil, limit: 10).count == 1)
        #expect(try await Self.targetRows(store, id) == 0, "an ended send keeps no counted targets")
        #expect(try await Self.targetRows(store, id, table: "unfinished_sends") == 0, "nor its kept request")
        #expect(try await store.recordOutcomes(batch, now: Date()) == false, "the same batch again changes nothing")
        #expect(try await store.notification(hub: hub, id: id)?.counts == after.counts)
    }

    @Test(
        "a batch naming one target twice, a batch after others, results before the summary: each target once, rows gone at the end",
        arguments: StoreKind.available)
    func otherBatches(_ kind: StoreKind) async throws {
        let (store, hub) = try await OutcomeStoreTests.outcomes(kind)
        // The same target twice in a batch of two, for a send of two: one counted, still open.
        let twice = try await Self.enqueue(store, hub, keep: false, dispatched: [.apns: 2])
        #expect(try await store.recordOutcomes(OutcomeStoreTests.results(twice, hub, .apns, [("r1", .delivered), ("r1", .delivered)]), now: Date()))
        let open = try #require(try await store.notification(hub: hub, id: twice))
        #expect(open.state == .processing && open.counts == [.apns: [.delivered: 1]])
        #expect(try await Self.targetRows(store, twice) == 1)
        // Its second target, in a batch of its own after the first: Completed, the rows gone.
        #expect(try await store.recordOutcomes(OutcomeStoreTests.results(twice, hub, .apns, [("r2", .expired)]), now: Date()))
        let ended = try #require(try await store.notification(hub: hub, id: twice))
        #expect(ended.state == .completed && ended.counts == [.apns: [.delivered: 1, .expired: 1]])
        #expect(try await Self.targetRows(store, twice) == 0)

        // Results before the summary: rows kept until the summary says how many.
        let early = RandomID.timeOrdered()
        #expect(try await store.recordOutcomes(OutcomeStoreTests.results(early, hub, .fcm, [("a", .delivered)]), now: Date()))
        #expect(try await Self.targetRows(store, early) == 1)
        #expect(try await store.recordOutcomes(ResultBatch(notificationId: early, hub: hub, dispatched: [.fcm: 1]), now: Date()))
        #expect(try await store.notification(hub: hub, id: early)?.state == .completed)
        #expect(try await Self.targetRows(store, early) == 0)
    }

    @Test(
        "targets whose keys differ only in Unicode normalization are two targets, also in a batch that repeats one of them",
        arguments: StoreKind.available)
    func keysAsBytes(_ kind: StoreKind) async throws {
        let (store, hub) = try await OutcomeStoreTests.outcomes(kind)
        let id = try await Self.enqueue(store, hub, keep: false, dispatched: [.apns: 2])
        // "é" as one scalar and as "e" with a combining accent: equal to Swift's `==`, two rows
        // to the database. The repeat sends the count through its slower path.
        let batch = OutcomeStoreTests.results(id, hub, .apns, [("r-\u{E9}", .delivered), ("r-e\u{301}", .delivered), ("r-\u{E9}", .delivered)])
        #expect(try await store.recordOutcomes(batch, now: Date()))
        let ended = try #require(try await store.notification(hub: hub, id: id))
        #expect(ended.state == .completed && ended.counts == [.apns: [.delivered: 2]])
    }

    @Test(
        "a push service's reason with U+0000 is kept printable, and a target keyed by a long id and handle is counted once",
        arguments: StoreKind.available)
    func hostileResults(_ kind: StoreKind) async throws {
        let (store, hub) = try await OutcomeStoreTests.outcomes(kind)
        let id = try await Self.enqueue(store, hub, keep: false, dispatched: [.webpush: 2])
        // An id of 256 two-byte characters and a handle of 2,048 random bytes' worth: over
        // PostgreSQL's index-row limit together, and not compressible.
        var state: UInt64 = 7
        func next(_ count: UInt64) -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return (state >> 33) % count
        }
        let longId = String((0..<256).map { _ in Character(Unicode.Scalar(UInt32(0xC0 + next(0x190)))!) })
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        let longHandle = "https://push.example.com/" + String((0..<2_000).map { _ in alphabet[Int(next(36))] })
        let results = [
            DeliveryResult(
                registrationId: longId, handle: longHandle, outcome: .invalidHandle, pnsStatus: 410, pnsReason: "gone\u{0}\u{7}x", attempts: 1,
                dwellMs: 5),
            DeliveryResult(registrationId: "short", handle: "h-short", outcome: .delivered, pnsStatus: 201, attempts: 1, dwellMs: 5),
        ]
        let batch = ResultBatch(notificationId: id, hub: hub, platform: .webpush, results: results)
        #expect(try await store.recordOutcomes(batch, now: Date()))
        _ = try await store.recordOutcomes(batch, now: Date())
        let ended = try #require(try await store.notification(hub: hub, id: id))
        #expect(ended.state == .completed && ended.counts == [.webpush: [.invalidHandle: 1, .delivered: 1]])
        let failed = try await store.failedTargets(hub: hub, notificationId: id, after: nil, limit: 10)
        #expect(failed.count == 1)
        #expect(failed.first?.result.pnsReason == "gone  x" && failed.first?.result.handle == longHandle)
        #expect(failed.first?.target.utf8.count ?? 0 < 100)
    }
}
