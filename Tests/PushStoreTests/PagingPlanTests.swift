import Foundation
import PushModel
import Testing

@testable import PushStore

@Suite("Paging plans: the rarest driving tags", .timeLimit(.minutes(2)))
struct PagingPlanTests {
    /// 200 registrations: `common` on all, `mid` on every fifth, `rare` on every fiftieth.
    static func seed(_ store: SQLRegistrationStore, hub: String) async throws {
        try await store.importRegistrations(
            (0..<200).map { index in
                var tags = ["common"]
                if index % 5 == 0 { tags.append("mid") }
                if index % 50 == 0 { tags.append("rare") }
                return Registration(
                    registrationId: "r\(index)", hub: hub, format: .apple, handle: "h\(index)", tags: tags.sorted(), updatedAt: Date())
            })
    }

    @Test("an && is paged from its side whose tags the fewest registrations carry, whichever side it is", arguments: StoreKind.available)
    func rarestSide(_ kind: StoreKind) async throws {
        let fixture = try await StoreFixture.make(kind)
        let store = try #require(fixture.store as? SQLRegistrationStore)
        try await Self.seed(store, hub: fixture.hub)
        try await store.refreshStatistics()
        for (text, driving, matches) in [
            ("common && rare", ["rare"], 4),
            ("rare && common", ["rare"], 4),
            ("common && mid", ["mid"], 40),
            ("(common || mid) && rare", ["rare"], 4),
            ("common && (rare || mid)", ["mid", "rare"], 40),
            ("common && !mid", ["common"], 160),
        ] {
            let expression = try TagExpression.parse(text)
            #expect(try await store.drivingTags(of: expression, hub: fixture.hub) == Set(driving), "\(text)")
            let found = try await store.all(hub: fixture.hub, matching: .tagExpression(expression), pageSize: 7)
            #expect(found.count == matches, "\(text)")
            #expect(Set(found.map(\.registrationId)).count == matches, "\(text): none twice")
        }
    }

    /// The tags of registration `index` of `rangesAndCandidates`: `near` on four in five of the
    /// first 150 and on every 40th after (candidates dense among the rows, then sparse, on
    /// either database), `far` on every 97th,
    /// `pair` on every third (a second driving tag beside `near`), `odd` on the odd ones.
    static func rangeTags(_ index: Int) -> Set<String> {
        var tags: Set<String> = []
        if (index < 150 && index % 5 != 4) || index % 40 == 0 { tags.insert("near") }
        if index % 97 == 0 { tags.insert("far") }
        if index % 3 == 0 { tags.insert("pair") }
        if index % 2 == 1 { tags.insert("odd") }
        return tags
    }

    @Test(
        "pages read as a range of rows, where candidates are dense, or candidate by candidate hold what matches, in order, once each",
        arguments: StoreKind.available)
    func rangesAndCandidates(_ kind: StoreKind) async throws {
        let fixture = try await StoreFixture.make(kind)
        let store = try #require(fixture.store as? SQLRegistrationStore)
        // Every fourth registration is followed by one of another hub with every tag, so a
        // range of rows holds rows that are not the hub's. Every other one is a template
        // registration.
        var registrations: [Registration] = []
        for index in 0..<600 {
            registrations.append(
                Registration(
                    registrationId: "r\(index)", hub: fixture.hub, format: index % 4 == 0 ? .fcmv1 : .apple, handle: "h\(index)",
                    tags: Self.rangeTags(index).sorted(), template: index % 2 == 1 ? Template(body: "{}") : nil, updatedAt: Date()))
            guard index % 4 == 3 else { continue }
            registrations.append(
                Registration(
                    registrationId: "o\(index)", hub: fixture.hub + "-other", format: .apple, handle: "o\(index)",
                    tags: ["far", "near", "odd", "pair"], updatedAt: Date()))
        }
        try await store.importRegistrations(registrations)
        try await store.refreshStatistics()
        for text in [
            "near", "far", "near || far", "far || near || pair", "near && !odd", "pair && (near || far)", "(near || far) && !pair && odd",
            "odd && !near",
        ] {
            let expression = try TagExpression.parse(text)
            let matching = (0..<600).filter { expression.matches(Self.rangeTags($0)) }
            for pageSize in [1, 7, 50] {
                var found: [String] = []
                var cursor: RegistrationCursor?
                repeat {
                    let page = try await store.registrations(hub: fixture.hub, matching: .tagExpression(expression), after: cursor, limit: pageSize)
                    #expect(page.registrations.count <= pageSize, "\(text), pages of \(pageSize)")
                    // Every candidate of a disjunction matches, so a page that is not the last is
                    // full, a registration with two of its tags counted once.
                    if expression.isDisjunctionOfTags, page.next != nil {
                        #expect(page.registrations.count == pageSize, "\(text), pages of \(pageSize)")
                    }
                    found += page.registrations.map(\.registrationId)
                    cursor = page.next
                } while cursor != nil
                #expect(found == matching.map { "r\($0)" }, "\(text), pages of \(pageSize)")
            }
            for format in [NotificationFormat.template, .fcmv1] {
                var found: [String] = []
                var cursor: RegistrationCursor?
                repeat {
                    let page = try await store.deliveryCandidates(
                        hub: fixture.hub, matching: .tagExpression(expression), reaching: format, after: cursor, limit: 7)
                    found += page.candidates.map(\.registrationId)
                    cursor = page.next
                } while cursor != nil
                let reached = matching.filter { format == .template ? $0 % 2 == 1 : $0 % 4 == 0 }
                #expect(found == reached.map { "r\($0)" }, "\(text), reaching \(format)")
            }
        }
    }

    @Test(
        "a page read ahead where the next page ends, on PostgreSQL; that bound is used for the pages it was read for and no other",
        arguments: StoreKind.available)
    func lookahead(_ kind: StoreKind) async throws {
        let fixture = try await StoreFixture.make(kind)
        let store = try #require(fixture.store as? SQLRegistrationStore)
        try await store.importRegistrations(
            (0..<600).map { index in
                Registration(
                    registrationId: "r\(index)", hub: fixture.hub, format: .apple, handle: "h\(index)", tags: Self.rangeTags(index).sorted(),
                    updatedAt: Date())
            })
        try await store.refreshStatistics()
        for text in ["near", "near || pair", "near && !odd"] {
            let query = RegistrationQuery.tagExpression(try TagExpression.parse(text))
            // The same pages through cursors that carry their lookahead and through their text.
            var carried: [[String]] = []
            var fromText: [[String]] = []
            var readAhead = 0
            var cursor: RegistrationCursor?
            repeat {
                let page = try await store.deliveryCandidates(hub: fixture.hub, matching: query, reaching: nil, after: cursor, limit: 7)
                carried.append(page.candidates.map(\.registrationId))
                if page.next?.lookahead != nil { readAhead += 1 }
                cursor = page.next
            } while cursor != nil
            repeat {
                let page = try await store.deliveryCandidates(
                    hub: fixture.hub, matching: query, reaching: nil, after: cursor.flatMap { RegistrationCursor($0.description) }, limit: 7)
                fromText.append(page.candidates.map(\.registrationId))
                cursor = page.next
            } while cursor != nil
            #expect(carried == fromText, "\(text)")
            #expect(carried.count > 10, "\(text)")
            // The dense pages (the first 150 registrations) are read ahead where reads run in
            // parallel; SQLite's are not.
            #expect(kind == .postgres ? readAhead >= 5 : readAhead == 0, "\(text): \(readAhead) pages read ahead")
        }
        // A lookahead is taken as the next page's bound for its own pages; for a page size or
        // tags it was not read for, the bound is read again.
        let near = RegistrationQuery.tagExpression(.tag("near"))
        let first = try await store.deliveryCandidates(hub: fixture.hub, matching: near, reaching: nil, after: nil, limit: 7)
        let position = try #require(first.next).position
        let key = SQLRegistrationStore.lookaheadKey(hub: fixture.hub, driving: ["near"], limit: 7)
        let owned = RegistrationCursor(position: position, lookahead: .init(key: key, bound: position + 3))
        let short = try await store.deliveryCandidates(hub: fixture.hub, matching: near, reaching: nil, after: owned, limit: 7)
        #expect(short.next?.position == position + 3)
        #expect(short.candidates.count < 7 && !short.candidates.isEmpty)
        // A lookahead that found no bound (fewer than a page left then) is read again: rows may
        // have come since, and a page still holds at most its size.
        let empty = RegistrationCursor(position: position, lookahead: .init(key: key, bound: nil))
        let again = try await store.deliveryCandidates(hub: fixture.hub, matching: near, reaching: nil, after: empty, limit: 7)
        #expect(again.candidates.count == 7 && again.next != nil)
        for other in [
            SQLRegistrationStore.lookaheadKey(hub: fixture.hub, driving: ["near"], limit: 8),
            SQLRegistrationStore.lookaheadKey(hub: fixture.hub, driving: ["pair"], limit: 7),
        ] {
            let foreign = RegistrationCursor(position: position, lookahead: .init(key: other, bound: position + 3))
            let page = try await store.deliveryCandidates(hub: fixture.hub, matching: near, reaching: nil, after: foreign, limit: 7)
            #expect(page.candidates.count == 7)
            #expect(page.next != nil && page.next?.position != position + 3)
        }
    }

    @Test("SQLite's tag counts follow every write: updates, deletes, installations and imports")
    func sqliteCountsFollowWrites() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-\(UUID().uuidString).sqlite").path
        let hub = "counts"
        var store = try await SQLRegistrationStore.open(SQLiteDatabase(path: path))
        try await Self.seed(store, hub: hub)
        #expect(try await store.drivingTags(of: try TagExpression.parse("mid && rare"), hub: hub) == ["rare"])
        // `rare` goes on 30 more registrations through updates and an installation's
        // templates, and off most of `mid` through deletes: the choice turns round.
        for index in 1..<21 {
            _ = try await store.upsertRegistration(
                Registration(
                    registrationId: "r\(index)", hub: hub, format: .apple, handle: "h\(index)", tags: ["common", "rare"], updatedAt: Date()),
                ifMatch: nil)
        }
        let templates = (0..<10).map { ("t\($0)", Template(body: "{}")) }
        _ = try await store.upsertInstallation(
            Installation(
                installationId: "i", platform: .apns, pushChannel: "c", tags: ["rare"], templates: Dictionary(uniqueKeysWithValues: templates)),
            hub: hub)
        for index in stride(from: 25, to: 200, by: 5) where index % 50 != 0 {
            #expect(try await store.deleteRegistration(hub: hub, id: "r\(index)", ifMatch: nil))
        }
        try await store.importRegistrations(
            (0..<28).map { Registration(registrationId: "x\($0)", hub: hub, format: .apple, handle: "x\($0)", tags: ["band"], updatedAt: Date()) })
        // A store opened anew remembers no count.
        await store.close()
        store = try await SQLRegistrationStore.open(SQLiteDatabase(path: path))
        #expect(try await store.all(hub: hub, matching: .tagExpression(try TagExpression.parse("rare"))).count == 4 + 20 + 11)
        #expect(try await store.drivingTags(of: try TagExpression.parse("mid && rare"), hub: hub) == ["mid"], "mid 4, rare 35")
        #expect(try await store.drivingTags(of: try TagExpression.parse("rare && band"), hub: hub) == ["band"], "rare 35, band 28")
        // The installation deleted takes its eleven registrations' tags with it (a cascade).
        #expect(try await store.deleteInstallation(hub: hub, id: "i"))
        await store.close()
        store = try await SQLRegistrationStore.open(SQLiteDatabase(path: path))
        #expect(try await store.drivingTags(of: try TagExpression.parse("band && rare"), hub: hub) == ["rare"], "rare 24, band 28")
        await store.close()
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    }
}
