import Foundation
import PushModel
import Testing

@testable import PushStore

/// A hub's tag rows are exactly the tags of its rows, whichever way a registration or an
/// installation changes or goes: on PostgreSQL they are found by their key from the row's
/// `tags` column and deleted with a registration by a trigger (version 19), on SQLite by the
/// foreign key's cascade.
@Suite("Tag rows follow their rows", .timeLimit(.minutes(2)))
struct TagRowTests {
    /// The differences between a hub's tag rows and the tags its rows carry: rows with no
    /// such tag (left behind), and tags with no row (missing), for registrations and for
    /// installations.
    static func differences(_ store: SQLRegistrationStore, hub: String) async throws -> [String] {
        try await store.database.read { connection in
            var differences: [String] = []
            for (tags, rows, key) in [
                ("registration_tags", "registrations", "seq"), ("installation_tags", "installations", "installation_id"),
            ] {
                var carried: Set<String> = []
                for row in try await connection.query("SELECT \(key) AS key, tags FROM \(rows) WHERE hub = ?", [.text(hub)]) {
                    let owner = row.text("key") ?? "?"
                    // Implicit tags have no tag rows (version 20).
                    for tag in SQLRegistrationStore.StoredRow.splitTags(row.text("tags")) where Tags.implicit(tag) == nil {
                        carried.insert("\(owner) \(tag)")
                    }
                }
                var stored: Set<String> = []
                for row in try await connection.query("SELECT \(key) AS key, tag FROM \(tags) WHERE hub = ?", [.text(hub)]) {
                    stored.insert("\(row.text("key") ?? "?") \(row.text("tag") ?? "?")")
                }
                differences += stored.subtracting(carried).sorted().map { "\(tags) left behind: \($0)" }
                differences += carried.subtracting(stored).sorted().map { "\(tags) missing: \($0)" }
            }
            return differences
        }
    }

    static func registration(_ id: String, hub: String, tags: [String]) -> Registration {
        Registration(registrationId: id, hub: hub, format: .apple, handle: "handle-\(id)", tags: tags, updatedAt: Date())
    }

    @Test("every write and delete leaves the tag rows the tags of the rows", arguments: StoreKind.available)
    func everyWay(_ kind: StoreKind) async throws {
        let fixture = try await StoreFixture.make(kind)
        let store = try #require(fixture.store as? SQLRegistrationStore)
        let hub = fixture.hub
        func check(_ step: String) async throws {
            let found = try await Self.differences(store, hub: hub)
            #expect(found.isEmpty, "\(kind) after \(step): \(found)")
        }

        for (id, tags) in [("r1", ["a", "b"]), ("r2", ["b"]), ("r3", ["c"]), ("r4", ["d"])] {
            _ = try await store.upsertRegistration(Self.registration(id, hub: hub, tags: tags), ifMatch: nil)
        }
        let templated = Installation(
            installationId: "i1", userId: "u1", platform: .apns, pushChannel: "channel-1", tags: ["a", "b"],
            templates: ["t1": Template(body: "{}", tags: ["tt"])])
        _ = try await store.upsertInstallation(templated, hub: hub)
        _ = try await store.upsertInstallation(Installation(installationId: "i2", platform: .fcmv1, pushChannel: "channel-2", tags: ["a"]), hub: hub)
        try await check("the first writes")

        _ = try await store.upsertRegistration(Self.registration("r1", hub: hub, tags: ["b", "e"]), ifMatch: nil)
        try await check("a registration's tags changed")
        #expect(try await store.deleteRegistration(hub: hub, id: "r2", ifMatch: nil))
        try await check("a registration deleted")

        var changed = templated
        changed.tags = ["b", "c"]
        changed.templates = [:]
        _ = try await store.upsertInstallation(changed, hub: hub)
        try await check("an installation's tags changed and its template removed")
        _ = try await store.patchInstallation(hub: hub, id: "i2", [.init(op: .add, path: "/tags", value: .strings(["f"]))])
        try await check("an installation patched")
        #expect(try await store.deleteInstallation(hub: hub, id: "i2"))
        try await check("an installation deleted")
        try await store.pruneInvalidHandle(hub: hub, registrationId: Registration.installationRegistrationId("i1", template: nil))
        try await check("an installation's channel pruned")
        var renewed = changed
        renewed.pushChannel = "channel-3"
        _ = try await store.upsertInstallation(renewed, hub: hub)
        try await check("an installation renewed")

        let now = Date()
        let job = NotificationHubJob(jobId: RandomID.make(), hub: hub, type: .importUpsertRegistrations, createdAt: now, updatedAt: now)
        #expect(try await store.createJob(job, inputPath: "/dev/null", inputSize: 0, maximumUnfinished: 8))
        let runner = RandomID.make()
        _ = try #require(try await store.claimJob(runner: runner, hubs: [hub], lease: 60, now: Date()))
        var position = JobPosition()
        let upsert = JobLine(line: 1, registration: .success(Self.registration("r4", hub: hub, tags: ["d", "g"])))
        let delete = JobLine(line: 2, registration: .success(Self.registration("r3", hub: hub, tags: [])))
        for (type, lines) in [(NotificationHubJob.JobType.importUpsertRegistrations, [upsert]), (.importDeleteRegistrations, [delete])] {
            position = try await store.applyImportChunk(
                hub: hub, id: job.jobId, runner: runner, type: type, lines: lines, next: position, progress: 50, lease: 60
            ) { results in (Int64(results.count), 0) }
        }
        try await check("an import's upsert and delete")
        #expect(try await store.registration(hub: hub, id: "r3") == nil)
        #expect(try await store.registration(hub: hub, id: "r4")?.tags == ["d", "g"])

        // What the hub holds at the end, so a check that compared nothing would not pass.
        let counts = try await store.database.read { connection in
            try await connection.query(
                "SELECT (SELECT count(*) FROM registration_tags WHERE hub = ?) AS registrations, (SELECT count(*) FROM installation_tags WHERE hub = ?) AS installations",
                [.text(hub), .text(hub)]
            ).first
        }
        // r1 (b, e), r4 (d, g); i1's native registration (b, c; its two implicit tags have no
        // rows); i1's installation rows the same two.
        #expect(counts?.integer("registrations") == 6 && counts?.integer("installations") == 2, "\(String(describing: counts))")
    }

    @Test("a PostgreSQL store of version 18 is brought to 19: stray tag rows gone, and a registration's rows deleted with it")
    func migratedFrom18() async throws {
        guard StoreKind.available.contains(.postgres) else { return }
        let open = try await StoreFixture.ownDatabase(.postgres)
        let hub = "myhub"
        var store = try await SQLRegistrationStore.open(open())
        for (id, tags) in [("r1", ["a", "b"]), ("r2", ["b"])] {
            _ = try await store.upsertRegistration(Self.registration(id, hub: hub, tags: tags), ifMatch: nil)
        }
        _ = try await store.upsertInstallation(Installation(installationId: "i1", platform: .apns, pushChannel: "c1", tags: ["x"]), hub: hub)
        await store.close()
        // Version 18's schema, with a row of each table that its row's tags do not name, as a
        // race of an earlier version could leave.
        let database = try await open()
        try await database.write { connection in
            for statement in [
                "DROP TRIGGER registration_tags_deleted ON registrations", "DROP FUNCTION pushhub_registration_deleted()",
                "ALTER TABLE registration_tags ADD CONSTRAINT registration_tags_seq_fkey FOREIGN KEY (seq) REFERENCES registrations (seq) ON DELETE CASCADE",
                "CREATE INDEX registration_tags_by_registration ON registration_tags (seq)",
                "CREATE INDEX installation_tags_by_installation ON installation_tags (hub, installation_id)",
                "INSERT INTO registration_tags (hub, tag, seq) SELECT hub, 'stray', seq FROM registrations WHERE registration_id = 'r1'",
                "INSERT INTO installation_tags (hub, tag, installation_id) VALUES ('myhub', 'stray', 'i1'), ('myhub', 'x', 'gone')",
                "DELETE FROM schema_migrations WHERE version = 19",
            ] {
                try await connection.execute(statement, [])
            }
        }
        await database.close()
        store = try await SQLRegistrationStore.open(open())
        #expect(try await Self.differences(store, hub: hub).isEmpty)
        let left = try await store.database.read { connection in
            try await connection.query(
                """
                SELECT (SELECT count(*) FROM pg_indexes WHERE indexname IN ('registration_tags_by_registration', 'installation_tags_by_installation')) AS indexes,
                    (SELECT count(*) FROM pg_constraint WHERE conname = 'registration_tags_seq_fkey') AS keys
                """, []
            ).first
        }
        #expect(left?.integer("indexes") == 0 && left?.integer("keys") == 0)
        // The trigger in the foreign key's place: a registration's rows go with it.
        #expect(try await store.deleteRegistration(hub: hub, id: "r1", ifMatch: nil))
        #expect(try await Self.differences(store, hub: hub).isEmpty)
        #expect(try await store.all(hub: hub, matching: .tagExpression(.tag("a"))).isEmpty)
        #expect(try await store.all(hub: hub, matching: .tagExpression(.tag("b"))).map(\.registrationId) == ["r2"])
        await store.close()
    }

    @Test("a store of version 19 is brought to 20: implicit tags' rows gone, and what carries them still found", arguments: StoreKind.available)
    func migratedFrom19(_ kind: StoreKind) async throws {
        let open = try await StoreFixture.ownDatabase(kind)
        let hub = "myhub"
        var store = try await SQLRegistrationStore.open(open())
        _ = try await store.upsertRegistration(Self.registration("r1", hub: hub, tags: ["x"]), ifMatch: nil)
        for (id, user) in [("i1", "alice"), ("i2", "bob"), ("i3", nil), ("i4", "alice")] {
            _ = try await store.upsertInstallation(
                Installation(installationId: id, userId: user, platform: .apns, pushChannel: "c-\(id)", tags: ["x"]), hub: hub)
        }
        await store.close()
        // The rows version 19 wrote for the implicit tags.
        let database = try await open()
        try await database.write { connection in
            for statement in [
                "INSERT INTO registration_tags (hub, tag, seq) SELECT hub, '$InstallationId:{' || installation_id || '}', seq FROM registrations WHERE installation_id IS NOT NULL",
                "INSERT INTO registration_tags (hub, tag, seq) SELECT hub, '$UserId:{' || user_id || '}', seq FROM registrations WHERE user_id IS NOT NULL",
                "INSERT INTO installation_tags (hub, tag, installation_id) SELECT hub, '$InstallationId:{' || installation_id || '}', installation_id FROM installations",
                "INSERT INTO installation_tags (hub, tag, installation_id) SELECT hub, '$UserId:{' || user_id || '}', installation_id FROM installations WHERE user_id IS NOT NULL",
                "DELETE FROM schema_migrations WHERE version = 20",
            ] {
                try await connection.execute(statement, [])
            }
        }
        await database.close()
        store = try await SQLRegistrationStore.open(open())
        #expect(try await Self.differences(store, hub: hub).isEmpty)
        let implicit = try await store.database.read { connection in
            try await connection.query(
                """
                SELECT (SELECT count(*) FROM registration_tags WHERE substr(tag, 1, 1) = '$') AS registrations,
                    (SELECT count(*) FROM installation_tags WHERE substr(tag, 1, 1) = '$') AS installations
                """, []
            ).first
        }
        #expect(implicit?.integer("registrations") == 0 && implicit?.integer("installations") == 0)
        // A registration imported with a user id, past twenty others so that its page is read
        // by candidates, not as a range: a send to the user reaches it, `$UserId:{…}`, which it
        // does not carry, does not.
        try await store.importRegistrations(
            (0..<20).map { Self.registration("f\($0)", hub: hub, tags: []) }
                + [
                    Registration(
                        registrationId: "r2", hub: hub, format: .apple, handle: "h-r2", tags: [], userId: "alice", updatedAt: Date())
                ])
        #expect(try await store.all(hub: hub, matching: .user("alice")).map(\.registrationId).contains("r2"))
        // Found by the columns they name, alone, together and beside an explicit tag.
        for (text, want) in [
            ("$UserId:{alice}", ["i1", "i4"]), ("$InstallationId:{i3}", ["i3"]), ("$UserId:{alice} || $UserId:{bob}", ["i1", "i2", "i4"]),
            ("x && !$UserId:{bob}", ["i1", "i3", "i4", "r1"]), ("$InstallationId:{i2} || $UserId:{alice} || x", ["i1", "i2", "i3", "i4", "r1"]),
            ("$InstallationId:{i2} || $InstallationId:{i3} || $UserId:{alice} || $UserId:{bob}", ["i1", "i2", "i3", "i4"]),
        ] {
            let expression = try TagExpression.parse(text)
            let found = try await store.all(hub: hub, matching: .tagExpression(expression), pageSize: 1)
            #expect(found.map { $0.installationId ?? $0.registrationId }.sorted() == want, "\(text)")
            var filter = InstallationFilter()
            filter.tags = expression
            let installations = try await InstallationQueryTests.all(store, hub: hub, filter, pageSize: 1).ids
            #expect(installations == want.filter { $0.hasPrefix("i") }, "\(text)")
            #expect(try await store.countInstallations(hub: hub, matching: filter) == installations.count, "\(text)")
        }
        // A user id that starts with a combining mark is implicit to the store's writers as it
        // is to the SQL that deleted the rows: no tag row for it, on either database.
        _ = try await store.upsertInstallation(
            Installation(installationId: "i5", userId: "\u{301}carol", platform: .apns, pushChannel: "c-i5", tags: ["x"]), hub: hub)
        #expect(try await Self.differences(store, hub: hub).isEmpty)
        let after = try await store.database.read { connection in
            try await connection.query(
                "SELECT (SELECT count(*) FROM registration_tags WHERE substr(tag, 1, 1) = '$') + (SELECT count(*) FROM installation_tags WHERE substr(tag, 1, 1) = '$') AS n",
                []
            ).first?.integer("n")
        }
        #expect(after == 0)
        await store.close()
    }
}
