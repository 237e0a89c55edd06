import Foundation
import Logging
import PushModel
import Testing

@testable import PushStore

@Suite("Installation queries")
struct InstallationQueryTests {
    /// 40 installations: platforms in turn, users u0…u3, tags by index; every third Sports,
    /// every fifth Politics.
    static func populate(_ store: any RegistrationStore, hub: String) async throws -> [Installation] {
        var made: [Installation] = []
        let platforms: [Installation.InstallationPlatform] = [.apns, .fcmv1, .gcm, .wns]
        for index in 0..<40 {
            var tags = ["all"]
            if index % 3 == 0 { tags.append("Sports") }
            if index % 5 == 0 { tags.append("Politics") }
            let platform = platforms[index % 4]
            let channel = platform == .wns ? "https://wns.example/\(index)" : "handle-\(index)"
            let installation = Installation(
                installationId: String(format: "i%02d", index), userId: "u\(index % 4)", platform: platform, pushChannel: channel, tags: tags,
                templates: index % 2 == 0 ? ["t": .init(body: "{}", tags: ["Templated"])] : [:])
            made.append(try await store.upsertInstallation(installation, hub: hub))
        }
        return made
    }

    /// Every installation `filter` takes, page by page, and how many pages it took.
    static func all(_ store: any RegistrationStore, hub: String, _ filter: InstallationFilter, pageSize: Int = 7) async throws -> (
        ids: [String], pages: Int
    ) {
        var ids: [String] = []
        var cursor: InstallationCursor?
        var pages = 0
        repeat {
            let page = try await store.installations(hub: hub, matching: filter, after: cursor, limit: pageSize)
            ids += try page.installations().map(\.installationId)
            cursor = page.next
            pages += 1
        } while cursor != nil && pages < 100
        return (ids, pages)
    }

    static func filter(_ build: (inout InstallationFilter) -> Void) -> InstallationFilter {
        var filter = InstallationFilter()
        build(&filter)
        return filter
    }

    /// What each filter should take of `populate`'s installations.
    static func expectations(_ made: [Installation], now: Date) throws -> [(InstallationFilter, [String], String)] {
        let ids = made.map(\.installationId)
        func matching(_ test: (Int) -> Bool) -> [String] { ids.enumerated().filter { test($0.offset) }.map(\.element) }
        return [
            (InstallationFilter(), ids, "everything"),
            (filter { $0.tags = try! TagExpression.parse("Sports") }, matching { $0 % 3 == 0 }, "a tag"),
            (filter { $0.tags = try! TagExpression.parse("Sports && !Politics") }, matching { $0 % 3 == 0 && $0 % 5 != 0 }, "and not"),
            (filter { $0.tags = try! TagExpression.parse("Sports || Politics") }, matching { $0 % 3 == 0 || $0 % 5 == 0 }, "or"),
            (filter { $0.tags = try! TagExpression.parse("!Sports") }, matching { $0 % 3 != 0 }, "no driving tag"),
            (filter { $0.tags = try! TagExpression.parse("Templated") }, [], "a template's tag is not the installation's"),
            (filter { $0.tags = try! TagExpression.parse("$UserId:{u1}") }, matching { $0 % 4 == 1 }, "an implicit tag"),
            (filter { $0.platform = .wns }, matching { $0 % 4 == 3 }, "platform"),
            (filter { $0.userId = "u2" }, matching { $0 % 4 == 2 }, "user"),
            (
                filter {
                    $0.userId = "u0"
                    $0.tags = try! TagExpression.parse("Sports")
                }, matching { $0 % 4 == 0 && $0 % 3 == 0 }, "user and tag"
            ),
            (filter { $0.updatedAfter = now.addingTimeInterval(-3600) }, ids, "updated after"),
            (filter { $0.updatedBefore = now.addingTimeInterval(-3600) }, [], "updated before"),
            (filter { $0.pushChannelExpired = false }, ids, "not expired"),
        ]
    }

    @Test("each filter, alone and together, pages through what it should in id order, and counts it", arguments: StoreKind.available)
    func filters(_ kind: StoreKind) async throws {
        let fixture = try await StoreFixture.make(kind)
        let made = try await Self.populate(fixture.store, hub: fixture.hub)
        for (filter, expected, name) in try Self.expectations(made, now: Date()) {
            let (ids, _) = try await Self.all(fixture.store, hub: fixture.hub, filter)
            #expect(ids == expected, "\(name)")
            #expect(try await fixture.store.countInstallations(hub: fixture.hub, matching: filter) == expected.count, "\(name)")
        }
        // A dead handle: the installation's push channel expired, and it is found as such
        // (its registrations are gone, its tags are not).
        let store = try #require(fixture.store as? SQLRegistrationStore)
        try await store.pruneInvalidHandle(hub: fixture.hub, registrationId: Registration.installationRegistrationId("i03", template: nil))
        var expired = InstallationFilter()
        expired.pushChannelExpired = true
        #expect(try await Self.all(store, hub: fixture.hub, expired).ids == ["i03"])
        expired.tags = try TagExpression.parse("all")
        #expect(try await store.countInstallations(hub: fixture.hub, matching: expired) == 1)
        // Changed and deleted installations are found as they are now.
        var changed = made[6]
        changed.tags = ["Chess"]
        _ = try await store.upsertInstallation(changed, hub: fixture.hub)
        _ = try await store.deleteInstallation(hub: fixture.hub, id: "i09")
        let sports = try await Self.all(store, hub: fixture.hub, Self.filter { $0.tags = try! TagExpression.parse("Sports") }).ids
        #expect(sports == ["i00", "i03", "i12", "i15", "i18", "i21", "i24", "i27", "i30", "i33", "i36", "i39"])
        #expect(try await Self.all(store, hub: fixture.hub, Self.filter { $0.tags = try! TagExpression.parse("Chess") }).ids == ["i06"])
        // Another hub's installations are not this one's.
        #expect(try await store.countInstallations(hub: fixture.hub + "x", matching: InstallationFilter()) == 0)
    }

    /// Back to version 9's shape on `database`, as a store of before this change left it.
    static func revertToVersion9(_ database: any SQLDatabase) async throws {
        let postgres = database.dialect == .postgres
        try await database.write { connection in
            var statements = [
                "DROP INDEX installations_by_platform", "DROP INDEX installations_by_user", "DROP INDEX installations_by_expired",
                "DROP INDEX installations_by_update", "DROP TABLE installation_tags",
            ]
            statements += ["platform", "user_id", "expired", "tags"].map { "ALTER TABLE installations DROP COLUMN \($0)" }
            if postgres {
                statements += [
                    "DROP FUNCTION pushhub_write_installation(TEXT, TEXT, TEXT, BIGINT, TEXT, TEXT, TEXT, BIGINT, TEXT)",
                    Migrations.postgresWriteInstallation(queried: false),
                ]
            }
            statements.append("DELETE FROM schema_migrations WHERE version = 10")
            for statement in statements { try await connection.execute(statement, []) }
        }
    }

    @Test("a store of version 9 is brought to 10 with its installations' columns and tags filled in", arguments: StoreKind.available)
    func migrated(_ kind: StoreKind) async throws {
        let open = try await StoreFixture.ownDatabase(kind)
        let hub = "myhub"
        var store = try await SQLRegistrationStore.open(open())
        let made = try await Self.populate(store, hub: hub)
        await store.close()
        let database = try await open()
        try await Self.revertToVersion9(database)
        await database.close()
        store = try await SQLRegistrationStore.open(open())
        for (filter, expected, name) in try Self.expectations(made, now: Date()) {
            #expect(try await Self.all(store, hub: hub, filter).ids == expected, "\(name)")
        }
        // And it is written as a new one is.
        var changed = made[1]
        changed.tags = ["Chess"]
        _ = try await store.upsertInstallation(changed, hub: hub)
        #expect(try await Self.all(store, hub: hub, Self.filter { $0.tags = try! TagExpression.parse("Chess") }).ids == ["i01"])
        if kind == .postgres {
            // An ingress of version 9, still running while the deployment is upgraded, calls
            // the function as it was, and its writes keep the queries right.
            var old = made[2]
            old.tags = ["Go"]
            old.userId = "u9"
            let document = String(decoding: old.wireJSON(), as: UTF8.self)
            let id = old.installationId
            let database = try await open()
            try await database.write { connection in
                _ = try await connection.query(
                    "SELECT pushhub_write_installation(?, ?, ?, ?, ?) AS written",
                    [.text(hub), .text(id), .text(document), SQLValue(Date()), .text("[]")])
            }
            await database.close()
            #expect(try await Self.all(store, hub: hub, Self.filter { $0.tags = try! TagExpression.parse("Go && $UserId:{u9}") }).ids == ["i02"])
            #expect(try await Self.all(store, hub: hub, Self.filter { $0.userId = "u9" }).ids == ["i02"])
        }
        await store.close()
    }
}
