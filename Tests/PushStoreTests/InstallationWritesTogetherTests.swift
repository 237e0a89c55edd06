import Foundation
import PushModel
import Testing

@testable import PushStore

/// PostgreSQL's installation writes that arrive together go to the server in one call
/// (`PostgresInstallationWrites`, `pushhub_write_installations`): each lands as it would alone,
/// and one the server refuses fails alone, the others of its call written.
@Suite("PostgreSQL installation writes taken together", .timeLimit(.minutes(2)))
struct InstallationWritesTogetherTests {
    /// A store on a database of the test's own (its triggers are the test's), or nil without
    /// PostgreSQL.
    static func ownStore() async throws -> SQLRegistrationStore? {
        guard StoreKind.available.contains(.postgres) else { return nil }
        return try await SQLRegistrationStore.open(StoreFixture.ownDatabase(.postgres)())
    }

    static func installation(_ index: Int, id: String? = nil, round: Int = 0) -> Installation {
        Installation(
            installationId: id ?? "i\(index)", userId: index % 3 == 0 ? nil : "u\(index)", platform: index % 2 == 0 ? .apns : .fcmv1,
            pushChannel: "channel-\(index)-\(round)", tags: ["together", "t\(index % 5)", "round\(round)"],
            templates: index % 4 == 0 ? ["greeting": Template(body: "{\"aps\":{\"alert\":\"$(message)\"}}", tags: ["tt\(index)"])] : [:])
    }

    /// Writes `installations` all at once, each its own task; the outcome of each by id.
    static func writeAtOnce(_ installations: [Installation], to store: SQLRegistrationStore, hub: String) async -> [String: Bool] {
        await withTaskGroup(of: (String, Bool).self) { group in
            for installation in installations {
                group.addTask {
                    do {
                        _ = try await store.upsertInstallation(installation, hub: hub)
                        return (installation.installationId, true)
                    } catch is SQLError {
                        // What the server said of the write alone, as a lone write's failure.
                        return (installation.installationId, false)
                    } catch { return (installation.installationId, true) }
                }
            }
            return await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
        }
    }

    @Test("a call's argument carries each write's parameters, its document and rows as JSON as they are")
    func argument() throws {
        let installations = [Self.installation(4), Self.installation(1, id: "q\"\\é")]
        let writes = try installations.map { try SQLRegistrationStore.InstallationWrite($0, hub: "h\u{1}") }
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(PostgresInstallationWrites.argument(writes).utf8)) as? [[String: Any]])
        #expect(parsed.count == 2)
        for (object, write) in zip(parsed, writes) {
            #expect(object["hub"] as? String == "h\u{1}" && object["installation_id"] as? String == write.installationId)
            #expect(object["updated_at"] as? Int64 == { if case .integer(let n) = write.updatedAt { n } else { nil } }())
            let document = try JSONSerialization.data(withJSONObject: try #require(object["document"]), options: [.sortedKeys])
            let expected = try JSONSerialization.data(
                withJSONObject: JSONSerialization.jsonObject(with: Data(write.document.utf8)), options: [.sortedKeys])
            #expect(document == expected)
            let rows = try #require(object["registrations"] as? [[String: Any]])
            #expect(rows.map { $0["registration_id"] as? String } == write.registrations.map(\.registration.registrationId))
            let queried = ["platform", "user_id", "expired", "tags"].map { name -> SQLValue in
                switch object[name] {
                case let text as String: .text(text)
                case let number as Int64: .integer(number)
                default: .null
                }
            }
            #expect(queried == write.queried)
            #expect(write.argumentBytes >= PostgresInstallationWrites.argument([write]).utf8.count)
        }
    }

    @Test("installations written at once land as each would alone, new and again")
    func landAsAlone() async throws {
        guard let store = try await Self.ownStore() else { return }
        let writes = try #require(store.installationWrites)
        let hub = "together"
        for round in 0..<2 {
            let outcomes = await Self.writeAtOnce((0..<96).map { Self.installation($0, round: round) }, to: store, hub: hub)
            #expect(outcomes.count == 96 && outcomes.values.allSatisfy { $0 }, "round \(round)")
            for index in 0..<96 {
                let expected = Self.installation(index, round: round)
                let stored = try #require(try await store.installation(hub: hub, id: expected.installationId), "i\(index)")
                #expect(stored.pushChannel == expected.pushChannel && stored.userId == expected.userId, "i\(index)")
                #expect(Set(stored.tags) == Set(expected.tags) && stored.templates.count == expected.templates.count, "i\(index)")
                let registrations = try await store.all(hub: hub, matching: .tagExpression(.tag("$InstallationId:{i\(index)}")))
                #expect(registrations.count == 1 + expected.templates.count, "i\(index)")
                #expect(registrations.allSatisfy { $0.handle == expected.pushChannel && $0.tags.contains("round\(round)") }, "i\(index)")
            }
            // The second round rewrote every installation: none of the first round's tags left.
            #expect(try await store.all(hub: hub, matching: .tagExpression(.tag("round\(round)"))).count == 96 + 24)
            #expect(try await store.all(hub: hub, matching: .tagExpression(.tag("round\(1 - round)"))).count == 0)
        }
        #expect(try await TagRowTests.differences(store, hub: hub).isEmpty)
        // The columns the installation queries read, as the call wrote them.
        var filter = InstallationFilter()
        filter.platform = .fcmv1
        filter.userId = "u7"
        let found = try await store.installations(hub: hub, matching: filter, after: nil, limit: 10)
        #expect(try found.installations().map(\.installationId) == ["i7"])
        filter = InstallationFilter()
        filter.pushChannelExpired = false
        filter.platform = .apns
        #expect(try await store.installations(hub: hub, matching: filter, after: nil, limit: 100).installations().count == 48)
        #expect(writes.counts.sharedCalls > 0, "no call carried more than one write: the path was not taken")
        #expect(writes.counts.refusedCalls == 0)
        await store.close()
    }

    @Test("writes of one installation at once leave one of them whole")
    func oneInstallation() async throws {
        guard let store = try await Self.ownStore() else { return }
        let writes = try #require(store.installationWrites)
        let hub = "together-one"
        let rounds = (0..<40).map { Self.installation(4, id: "same", round: $0) }
        let outcomes = await withTaskGroup(of: Bool.self) { group in
            for installation in rounds {
                group.addTask { (try? await store.upsertInstallation(installation, hub: hub)) != nil }
            }
            return await group.reduce(into: 0) { $0 += $1 ? 1 : 0 }
        }
        #expect(outcomes == 40)
        let stored = try #require(try await store.installation(hub: hub, id: "same"))
        let round = try #require(stored.tags.first { $0.hasPrefix("round") })
        #expect(stored.pushChannel == "channel-4-\(round.dropFirst(5))")
        let registrations = try await store.all(hub: hub, matching: .tagExpression(.tag("$InstallationId:{same}")))
        #expect(registrations.count == 2 && registrations.allSatisfy { $0.tags.contains(round) && $0.handle == stored.pushChannel })
        #expect(try await TagRowTests.differences(store, hub: hub).isEmpty)
        #expect(writes.counts.sharedCalls > 0 && writes.counts.refusedCalls == 0)
        await store.close()
    }

    @Test("a value PostgreSQL cannot take (U+0000 in text) is a permanent refusal the server answered")
    func refusedValuesArePermanent() async throws {
        guard let store = try await Self.ownStore() else { return }
        do {
            _ = try await store.database.read { connection in try await connection.query("SELECT ? AS v", [.text("a\u{0}b")]) }
            Issue.record("PostgreSQL took U+0000 in text")
        } catch let error as SQLError {
            #expect(error.isPermanent && error.isServerAnswer, "\(error)")
        }
        await store.close()
    }

    @Test("a write the server refuses fails alone; the others of its call are written")
    func refusedAlone() async throws {
        guard let store = try await Self.ownStore() else { return }
        let writes = try #require(store.installationWrites)
        let hub = "together-refused"
        try await store.database.writeStatement { connection in
            try await connection.execute(
                "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$", [])
            try await connection.execute(
                """
                CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON installations FOR EACH ROW
                WHEN (NEW.installation_id LIKE 'refused%') EXECUTE FUNCTION refuse()
                """, [])
        }
        let installations = (0..<64).map { Self.installation($0, id: $0 % 16 == 5 ? "refused\($0)" : nil) }
        let outcomes = await Self.writeAtOnce(installations, to: store, hub: hub)
        for installation in installations {
            let refused = installation.installationId.hasPrefix("refused")
            #expect(outcomes[installation.installationId] == !refused, "\(installation.installationId)")
            let stored = try await store.installation(hub: hub, id: installation.installationId)
            #expect((stored == nil) == refused, "\(installation.installationId)")
            let registrations = try await store.all(hub: hub, matching: .tagExpression(.tag("$InstallationId:{\(installation.installationId)}")))
            #expect(registrations.count == (refused ? 0 : 1 + installation.templates.count), "\(installation.installationId)")
        }
        #expect(try await TagRowTests.differences(store, hub: hub).isEmpty)
        #expect(writes.counts.refusedCalls > 0, "no call was refused: the refused writes went alone")
        await store.close()
    }
}
