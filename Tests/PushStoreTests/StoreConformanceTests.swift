import Foundation
import Logging
import PushModel
import PushStore
import Testing

@Suite("Registration store conformance (SQLite and PostgreSQL)", .timeLimit(.minutes(2)))
struct StoreConformanceTests {
    static func installation(_ id: String, user: String? = nil, tags: [String] = [], templates: [String: Template] = [:]) -> Installation {
        Installation(installationId: id, userId: user, platform: .apns, pushChannel: "token-\(id)", tags: tags, templates: templates)
    }

    @Test("delivery candidates are the pages of registrations, cut alike, holding what a delivery needs", arguments: StoreKind.available)
    func deliveryCandidatesMatchRegistrations(_ kind: StoreKind) async throws {
        let fixture = try await StoreFixture.make(kind)
        for index in 0..<23 {
            let platform: Installation.InstallationPlatform = [.apns, .fcmv1, .wns, .browser][index % 4]
            let channel: String
            var keys: WebPushKeys?
            switch platform {
            case .wns: channel = "https://wns.example/\(index)"
            case .browser:
                channel = "https://push.example/\(index)"
                keys = WebPushKeys(p256dh: "p\(index)", auth: "a\(index)")
            default: channel = "token-\(index)"
            }
            _ = try await fixture.store.upsertInstallation(
                Installation(
                    installationId: "c\(index)", userId: "u\(index % 3)", platform: platform, pushChannel: channel, webPush: keys,
                    tags: index % 2 == 0 ? ["even"] : ["odd"],
                    templates: index % 3 == 0
                        ? ["t": .init(name: "t", body: "{\"n\":\"$(n)\"}", headers: platform == .wns ? ["X-WNS-Type": "wns/raw"] : nil, expiry: "0")]
                        : [:],
                    expirationTime: index % 5 == 0 ? Date().addingTimeInterval(3600) : nil),
                hub: fixture.hub)
        }
        for query: RegistrationQuery in [.all, .tagExpression(.tag("even")), .tagExpression(try TagExpression.parse("even || odd")), .user("u1")] {
            var cursor: RegistrationCursor?
            var pages = 0
            repeat {
                let registrations = try await fixture.store.registrations(hub: fixture.hub, matching: query, after: cursor, limit: 5)
                let candidates = try await fixture.store.deliveryCandidates(hub: fixture.hub, matching: query, reaching: nil, after: cursor, limit: 5)
                #expect(candidates.candidates == registrations.registrations.map(DeliveryCandidate.init), "\(query)")
                #expect(candidates.next == registrations.next)
                cursor = registrations.next
                pages += 1
            } while cursor != nil && pages < 20
            #expect(pages > 1 || query == .user("u1"), "\(query) spans pages")
        }
    }

    @Test("candidates reaching a format are those a send of it is for, whole pages of them, chosen by the store", arguments: StoreKind.available)
    func deliveryCandidatesReachingAFormat(_ kind: StoreKind) async throws {
        let fixture = try await StoreFixture.make(kind)
        for index in 0..<30 {
            let platform: Installation.InstallationPlatform = [.apns, .fcmv1, .wns][index % 3]
            let channel = platform == .wns ? "https://wns.example/\(index)" : "token-\(index)"
            _ = try await fixture.store.upsertInstallation(
                Installation(
                    installationId: "c\(index)", userId: "u\(index % 2)", platform: platform, pushChannel: channel,
                    tags: index % 2 == 0 ? ["even"] : ["odd"], templates: index % 4 == 0 ? ["t": .init(body: "{}")] : [:]),
                hub: fixture.hub)
        }
        // Old GCM registrations are FCM's too.
        for index in 0..<4 {
            _ = try await fixture.store.upsertRegistration(
                Registration(
                    registrationId: "gcm\(index)", hub: fixture.hub, format: .gcm, handle: "gcm-\(index)", tags: ["even"], userId: "u0",
                    updatedAt: Date()),
                ifMatch: nil)
        }
        let queries: [RegistrationQuery] = [
            .all, .tagExpression(.tag("even")), .tagExpression(try TagExpression.parse("even || odd")),
            .tagExpression(try TagExpression.parse("!odd")), .user("u0"),
        ]
        for query in queries {
            var all: [DeliveryCandidate] = []
            var cursor: RegistrationCursor?
            repeat {
                let page = try await fixture.store.deliveryCandidates(hub: fixture.hub, matching: query, reaching: nil, after: cursor, limit: 7)
                all += page.candidates
                cursor = page.next
            } while cursor != nil
            for format: NotificationFormat in [.template, .apple, .fcmv1, .gcm, .windows, .browser] {
                let expected = all.filter { $0.isReached(by: format) }
                var reached: [DeliveryCandidate] = []
                var pageSizes: [Int] = []
                cursor = nil
                repeat {
                    let page = try await fixture.store.deliveryCandidates(
                        hub: fixture.hub, matching: query, reaching: format, after: cursor, limit: 3)
                    reached += page.candidates
                    pageSizes.append(page.candidates.count)
                    cursor = page.next
                } while cursor != nil && pageSizes.count < 100
                #expect(reached == expected, "\(query) reaching \(format)")
                if case .tagExpression = query { continue }  // pages from the tag index may be short
                // The database chose: every page but the last is full.
                #expect(pageSizes.dropLast().allSatisfy { $0 == 3 }, "\(query) reaching \(format): \(pageSizes)")
            }
            #expect(Set(all.filter { $0.isReached(by: .gcm) }.map(\.format)) == [.gcm, .fcmv1], "\(query)")
        }
    }

    @Test("a page of template registrations reads each one's own template headers, alike or not", arguments: StoreKind.available)
    func templateHeadersPerRow(_ kind: StoreKind) async throws {
        let fixture = try await StoreFixture.make(kind)
        let kinds = ["wns/toast", "wns/badge", "wns/toast", "wns/tile", "wns/badge"]
        for (index, type) in kinds.enumerated() {
            _ = try await fixture.store.upsertInstallation(
                Installation(
                    installationId: "w\(index)", platform: .wns, pushChannel: "https://wns.example/\(index)", tags: ["tile"],
                    templates: ["t": .init(body: "<toast/>", headers: ["X-WNS-Type": type])]),
                hub: fixture.hub)
        }
        let page = try await fixture.store.registrations(hub: fixture.hub, matching: .tagExpression(.tag("tile")), after: nil, limit: 100)
        let read = Dictionary(
            uniqueKeysWithValues: page.registrations.compactMap { registration in
                registration.template.map { (registration.installationId ?? "", $0.headers ?? [:]) }
            })
        #expect(read.count == kinds.count)
        for (index, type) in kinds.enumerated() { #expect(read["w\(index)"] == ["X-WNS-Type": type]) }
    }

    @Test("an installation is stored as its registrations, with the implicit tags", arguments: StoreKind.available)
    func installationRoundTrip(_ kind: StoreKind) async throws {
        let fixture = try await StoreFixture.make(kind)
        let store = fixture.store
        let written = try await store.upsertInstallation(
            Self.installation(
                "phone-1", user: "alice", tags: ["Sports"],
                templates: [
                    "simple": .init(body: #"{"aps":{"alert":"$(messageParam)"}}"#, expiry: "0", tags: ["templated"])
                ]), hub: fixture.hub)
        #expect(written.lastUpdate != nil)
        let read = try #require(try await store.installation(hub: fixture.hub, id: "phone-1"))
        #expect(read == written)

        let registrations = try await store.all(hub: fixture.hub, matching: .installation("phone-1"))
        #expect(registrations.count == 2)
        let native = try #require(registrations.first { $0.template == nil })
        #expect(native.tags == ["$InstallationId:{phone-1}", "$UserId:{alice}", "Sports"])
        #expect(native.handle == "token-phone-1")
        #expect(native.format == .apple)
        let templated = try #require(registrations.first { $0.template != nil })
        #expect(templated.tags.contains("templated"))
        #expect(templated.template?.body == #"{"aps":{"alert":"$(messageParam)"}}"#)
        #expect(templated.template?.expiry == "0")

        #expect(try await store.deleteInstallation(hub: fixture.hub, id: "phone-1"))
        #expect(try await store.installation(hub: fixture.hub, id: "phone-1") == nil)
        #expect(try await store.all(hub: fixture.hub, matching: .installation("phone-1")).isEmpty)
        #expect(try await store.deleteInstallation(hub: fixture.hub, id: "phone-1") == false)
    }

    @Test(
        "an installation's registrations are stored column for column as the installation makes them, rewritten with versions, tags and templates",
        arguments: StoreKind.available)
    func installationRegistrationsExactly(_ kind: StoreKind) async throws {
        let fixture = try await StoreFixture.make(kind)
        var installation = Installation(
            installationId: "browser-1", userId: "bob", platform: .browser, pushChannel: "https://push.example/sub/1",
            webPush: WebPushKeys(p256dh: "key-p256dh", auth: "key-auth"), tags: ["b", "a"],
            templates: [
                "toast": Template(body: #"{"title":"$(t)"}"#, headers: ["X-Custom": "one", "X-Tag": "$(tag)"], expiry: "$(expiry)", tags: ["t1"]),
                // What the rows' JSON must escape (PostgreSQL's function takes them as JSON):
                // quotes, backslashes, a newline, a tab, and text beyond ASCII.
                "plain": Template(body: "{\n\t" + #""title":"$(t) \"é🚀\\""# + "}", headers: ["X-Quote": #"say "hi" \ ok"#]),
            ])
        installation.expirationTime = Date(timeIntervalSince1970: 1_900_000_000.125)
        func check(_ written: Installation, versions: [String: Int64], _ note: String) async throws {
            let stored = try await fixture.store.all(hub: fixture.hub, matching: .installation(written.installationId))
            var expected = written.registrations(hub: fixture.hub, now: try #require(written.lastUpdate))
            for index in expected.indices { expected[index].version = versions[expected[index].registrationId] ?? 1 }
            #expect(
                stored.sorted { $0.registrationId < $1.registrationId } == expected.sorted { $0.registrationId < $1.registrationId }, "\(note)")
        }
        let first = try await fixture.store.upsertInstallation(installation, hub: fixture.hub)
        try await check(first, versions: [:], "written")

        // Rewritten: a tag goes and one comes, a template goes, one changes, the key rotates.
        installation.tags = ["a", "c"]
        installation.templates = ["toast": Template(body: #"{"title":"$(t)","v":2}"#, headers: ["X-Custom": "two"])]
        installation.webPush = WebPushKeys(p256dh: "key-2", auth: "auth-2")
        installation.expirationTime = nil
        let second = try await fixture.store.upsertInstallation(installation, hub: fixture.hub)
        let native = Registration.installationRegistrationId("browser-1", template: nil)
        let toast = Registration.installationRegistrationId("browser-1", template: "toast")
        try await check(second, versions: [native: 2, toast: 2], "rewritten")
        #expect(try await fixture.store.all(hub: fixture.hub, matching: .tagExpression(.tag("b"))).isEmpty)
        #expect(try await fixture.store.all(hub: fixture.hub, matching: .tagExpression(.tag("t1"))).isEmpty)
        #expect(try await fixture.store.all(hub: fixture.hub, matching: .tagExpression(.tag("c"))).count == 2)
        #expect(
            try await fixture.store.registration(hub: fixture.hub, id: Registration.installationRegistrationId("browser-1", template: "plain")) == nil
        )
    }

    @Test(
        "an installation whose channel expired gets no registration back from a PATCH that leaves the channel; a new channel brings them",
        arguments: StoreKind.available)
    func patchExpiredInstallation(_ kind: StoreKind) async throws {
        let fixture = try await StoreFixture.make(kind)
        let store = try #require(fixture.store as? SQLRegistrationStore)
        _ = try await store.upsertInstallation(Self.installation("dead", tags: ["a"], templates: ["t": .init(body: "{}")]), hub: fixture.hub)
        try await store.pruneInvalidHandle(
            hub: fixture.hub, registrationId: Registration.installationRegistrationId("dead", template: nil), handle: "token-dead")
        #expect(try await fixture.store.all(hub: fixture.hub, matching: .installation("dead")).isEmpty)
        let patched = try await store.patchInstallation(
            hub: fixture.hub, id: "dead",
            [.init(op: .add, path: "/tags", value: .strings(["b"])), .init(op: .add, path: "/templates/u", value: .object(["body": .string("{}")]))])
        #expect(patched.pushChannelExpired && patched.tags == ["a", "b"])
        #expect(try await fixture.store.all(hub: fixture.hub, matching: .installation("dead")).isEmpty, "nothing sent to the dead handle")
        #expect(try await fixture.store.all(hub: fixture.hub, matching: .tagExpression(.tag("b"))).isEmpty)
        let renewed = try await store.patchInstallation(
            hub: fixture.hub, id: "dead", [.init(op: .replace, path: "/pushChannel", value: .string("new"))])
        #expect(!renewed.pushChannelExpired)
        let registrations = try await fixture.store.all(hub: fixture.hub, matching: .installation("dead"))
        #expect(registrations.count == 3 && registrations.allSatisfy { $0.handle == "new" && $0.tags.contains("b") })
    }

    @Test("patching an installation rewrites its registrations", arguments: StoreKind.available)
    func patchInstallation(_ kind: StoreKind) async throws {
        let fixture = try await StoreFixture.make(kind)
        var expired = Self.installation("tablet", tags: ["a"])
        expired.pushChannelExpired = true
        _ = try await fixture.store.upsertInstallation(expired, hub: fixture.hub)
        let patched = try await fixture.store.patchInstallation(
            hub: fixture.hub, id: "tablet",
            [
                .init(op: .add, path: "/tags", value: .strings(["b"])),
                .init(op: .replace, path: "/pushChannel", value: .string("new-token")),
                .init(op: .add, path: "/templates/t1", value: .object(["body": .string("{}")])),
            ])
        #expect(patched.tags == ["a", "b"])
        #expect(patched.pushChannel == "new-token")
        #expect(patched.pushChannelExpired == false)
        let registrations = try await fixture.store.all(hub: fixture.hub, matching: .installation("tablet"))
        #expect(registrations.count == 2)
        #expect(registrations.allSatisfy { $0.handle == "new-token" && $0.tags.contains("b") })

        await #expect(throws: StoreError.notFound("installation missing")) {
            _ = try await fixture.store.patchInstallation(hub: fixture.hub, id: "missing", [])
        }
        let invalid = await #expect(throws: StoreError.self) {
            _ = try await fixture.store.patchInstallation(
                hub: fixture.hub, id: "tablet", [.init(op: .add, path: "/tags/-", value: .string("bad tag!"))])
        }
        guard case .invalid(let error)? = invalid else {
            Issue.record("expected an invalid patch, got \(String(describing: invalid))")
            return
        }
        #expect(error.field == "tags")
        #expect(try await fixture.store.installation(hub: fixture.hub, id: "tablet")?.tags == ["a", "b"], "a refused patch changes nothing")
    }

    @Test("100 concurrent writes of one installation leave one consistent record", arguments: StoreKind.available)
    func concurrentInstallationWrites(_ kind: StoreKind) async throws {
        let fixture = try await StoreFixture.make(kind)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<100 {
                group.addTask {
                    let templates = Dictionary(uniqueKeysWithValues: (0..<(writer % 3)).map { ("t\($0)", Template(body: "{}")) })
                    _ = try await fixture.store.upsertInstallation(
                        Self.installation("shared", tags: ["writer-\(writer)"], templates: templates), hub: fixture.hub)
                }
            }
            try await group.waitForAll()
        }
        let final = try #require(try await fixture.store.installation(hub: fixture.hub, id: "shared"))
        let registrations = try await fixture.store.all(hub: fixture.hub, matching: .installation("shared"))
        #expect(registrations.count == 1 + final.templates.count, "one native registration and one per template")
        #expect(registrations.allSatisfy { $0.tags.contains(final.tags[0]) }, "every registration carries the final installation's tags")
        #expect(Set(registrations.flatMap(\.tags).filter { $0.hasPrefix("writer-") }).count == 1)
    }

    @Test("registrations: versions, If-Match, installation-owned ids, id states", arguments: StoreKind.available)
    func registrationLifecycle(_ kind: StoreKind) async throws {
        let fixture = try await StoreFixture.make(kind)
        let store = fixture.store
        let id = try await store.issueRegistrationId(hub: fixture.hub)
        #expect(try await store.registrationIdState(hub: fixture.hub, id: id) == .issued)

        let registration = Registration(
            registrationId: id, hub: fixture.hub, format: .gcm, handle: "fcm-token", tags: ["b", "a", "a"], updatedAt: Date())
        let first = try await store.upsertRegistration(registration, ifMatch: nil)
        #expect(first.version == 1)
        #expect(first.tags == ["a", "b"])
        #expect(try await store.registrationIdState(hub: fixture.hub, id: id) == .registered)
        let second = try await store.upsertRegistration(registration, ifMatch: 1)
        #expect(second.version == 2)
        await #expect(throws: StoreError.versionMismatch(expected: 1, actual: 2)) {
            _ = try await store.upsertRegistration(registration, ifMatch: 1)
        }
        #expect(try await store.registration(hub: fixture.hub, id: id)?.handle == "fcm-token")
        #expect(try await store.all(hub: fixture.hub, matching: .handle("fcm-token")).map(\.registrationId) == [id])

        await #expect(throws: StoreError.versionMismatch(expected: 7, actual: 2)) {
            _ = try await store.deleteRegistration(hub: fixture.hub, id: id, ifMatch: 7)
        }
        #expect(try await store.deleteRegistration(hub: fixture.hub, id: id, ifMatch: 2))
        #expect(try await store.registrationIdState(hub: fixture.hub, id: id) == .unknown, "a deleted id is gone")
        #expect(try await store.deleteRegistration(hub: fixture.hub, id: id, ifMatch: nil) == false)

        _ = try await store.upsertInstallation(Self.installation("owned"), hub: fixture.hub)
        let ownedId = Registration.installationRegistrationId("owned", template: nil)
        await #expect(throws: StoreError.belongsToInstallation(registrationId: ownedId, installationId: "owned")) {
            _ = try await store.deleteRegistration(hub: fixture.hub, id: ownedId, ifMatch: nil)
        }
        let invalidTags = Registration(registrationId: "x", hub: fixture.hub, format: .apple, handle: "t", tags: ["no spaces"], updatedAt: Date())
        await #expect(throws: StoreError.self) { _ = try await store.upsertRegistration(invalidTags, ifMatch: nil) }
    }

    @Test("tag expressions select exactly the registrations they match, page by page", arguments: StoreKind.available)
    func tagExpressionQueries(_ kind: StoreKind) async throws {
        let fixture = try await StoreFixture.make(kind)
        let vocabulary = ["a", "b", "c", "d"]
        var expected: [String: Set<String>] = [:]
        // 60 registrations with every combination of tags, some of them installations.
        for index in 0..<60 {
            let tags = vocabulary.enumerated().filter { index & (1 << $0.offset) != 0 }.map(\.element)
            if index % 5 == 0 {
                let installation = Installation(
                    installationId: "i\(index)", userId: "u\(index % 3)", platform: .fcmv1, pushChannel: "h\(index)", tags: tags)
                _ = try await fixture.store.upsertInstallation(installation, hub: fixture.hub)
                expected[Registration.installationRegistrationId("i\(index)", template: nil)] =
                    Set(tags + [Tags.installation("i\(index)"), Tags.user("u\(index % 3)")])
            } else {
                let id = "r\(index)"
                _ = try await fixture.store.upsertRegistration(
                    Registration(registrationId: id, hub: fixture.hub, format: .apple, handle: "h\(index)", tags: tags, updatedAt: Date()),
                    ifMatch: nil)
                expected[id] = Set(tags)
            }
        }
        // Another hub's registrations never show.
        _ = try await fixture.store.upsertRegistration(
            Registration(registrationId: "other", hub: fixture.hub + "-other", format: .apple, handle: "h", tags: ["a"], updatedAt: Date()),
            ifMatch: nil)

        for text in [
            "a", "a || b", "a && b", "a && !b", "!a", "(a || b) && !c", "a || b || c || d", "!(a && b) && d", "$InstallationId:{i15}",
            "$UserId:{u1} || d", "$UserId:{u1} && a", "$InstallationId:{i15} || $UserId:{u2}", "!$UserId:{u0} && b", "nothing",
        ] {
            let expression = try TagExpression.parse(text)
            let want = Set(expected.filter { expression.matches($0.value) }.keys)
            // Pages of 2 take a user's four registrations over several pages.
            for pageSize in [7, 2] {
                let found = try await fixture.store.all(hub: fixture.hub, matching: .tagExpression(expression), pageSize: pageSize)
                #expect(Set(found.map(\.registrationId)) == want, "\(text), pages of \(pageSize)")
                #expect(found.count == want.count, "\(text), pages of \(pageSize): no registration twice")
            }
        }
        #expect(try await fixture.store.all(hub: fixture.hub, matching: .all, pageSize: 13).count == 60)
        #expect(try await fixture.store.all(hub: fixture.hub, matching: .user("u1")).count == 4)
    }

    @Test("an import of more rows than one statement takes stores every registration with its columns and tags", arguments: StoreKind.available)
    func importManyRows(_ kind: StoreKind) async throws {
        let fixture = try await StoreFixture.make(kind)
        let now = RFC3339.truncated(Date())
        let count = 1_234
        let registrations = (0..<count).map { index in
            Registration(
                registrationId: "imported-\(index)", hub: fixture.hub, format: index % 2 == 0 ? .apple : .fcmv1, handle: "handle-\(index)",
                tags: index % 3 == 0 ? ["all", "even-3"] : ["all"],
                template: index % 7 == 0 ? Template(name: "t\(index)", body: "{\"aps\":{\"alert\":\"$(m)\"}}", headers: ["apns-priority": "5"]) : nil,
                userId: index % 11 == 0 ? "user-\(index)" : nil, updatedAt: now)
        }
        try await fixture.store.importRegistrations(registrations)

        let stored = try await fixture.store.all(hub: fixture.hub, matching: .all, pageSize: 500)
        #expect(stored.map(\.registrationId) == registrations.map(\.registrationId), "imported in order, each once")
        for (want, got) in zip(registrations, stored) where want != got {
            Issue.record("\(want.registrationId) stored as \(got)")
            break
        }
        #expect(
            try await fixture.store.all(hub: fixture.hub, matching: .tagExpression(try TagExpression.parse("even-3")), pageSize: 100).count == 412)
        #expect(try await fixture.store.all(hub: fixture.hub, matching: .tagExpression(try TagExpression.parse("all && !even-3"))).count == 822)
        #expect(try await fixture.store.all(hub: fixture.hub, matching: .user("user-22")).map(\.registrationId) == ["imported-22"])

        // A batch with one bad row writes nothing.
        let bad = Registration(registrationId: "imported-bad", hub: fixture.hub, format: .apple, handle: "h", tags: ["bad tag!"], updatedAt: now)
        await #expect(throws: StoreError.self) {
            try await fixture.store.importRegistrations([
                Registration(registrationId: "imported-new", hub: fixture.hub, format: .apple, handle: "h", tags: [], updatedAt: now), bad,
            ])
        }
        #expect(try await fixture.store.registration(hub: fixture.hub, id: "imported-new") == nil)
    }

    @Test("users and their password hashes", arguments: StoreKind.available)
    func users(_ kind: StoreKind) async throws {
        let fixture = try await StoreFixture.make(kind)
        let name = "user-\(fixture.hub)"
        #expect(try await fixture.store.passwordHash(user: name) == nil)
        try await fixture.store.setUser(name: name, passwordHash: "hash-1")
        try await fixture.store.setUser(name: name, passwordHash: "hash-2")
        #expect(try await fixture.store.passwordHash(user: name) == "hash-2")
    }
}

@Suite("SQLite store on disk")
struct SQLiteStoreTests {
    @Test("data and schema survive closing and reopening the file")
    func reopen() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-\(UUID().uuidString).sqlite").path
        let first = try await SQLRegistrationStore.open(SQLiteDatabase(path: path))
        _ = try await first.upsertInstallation(Installation(installationId: "kept", platform: .wns, pushChannel: "https://wns/1"), hub: "myhub")
        await first.close()
        let second = try await SQLRegistrationStore.open(SQLiteDatabase(path: path))
        #expect(try await second.installation(hub: "myhub", id: "kept")?.pushChannel == "https://wns/1")
        await second.close()
    }
}

@Suite("Migrations")
struct MigrationTests {
    @Test("stores opened at the same moment on one database migrate it once", arguments: StoreKind.available)
    func concurrentOpen(_ kind: StoreKind) async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-\(UUID().uuidString).sqlite").path
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    switch kind {
                    case .sqlite: _ = try await SQLRegistrationStore.open(SQLiteDatabase(path: path))
                    case .postgres:
                        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
                        let store = try await SQLRegistrationStore.open(PostgresDatabase(url: StoreKind.postgresURL!, logger: logger))
                        await store.close()
                    }
                }
            }
            try await group.waitForAll()
        }
        // Each step is recorded once, whoever applied it.
        let database: any SQLDatabase
        switch kind {
        case .sqlite: database = try SQLiteDatabase(path: path)
        case .postgres:
            database = try await PostgresDatabase(url: StoreKind.postgresURL!, logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
        }
        let applied = try await database.read { try await $0.query("SELECT version FROM schema_migrations ORDER BY version", []) }
        let versions = applied.compactMap { $0.integer("version") }
        #expect(!versions.isEmpty && versions == Array(Set(versions)).sorted(), "\(versions)")
        #expect(versions.last == Int64(Migrations.latest), "\(versions)")
    }
}

extension MigrationTests {
    /// The store on `open`'s database taken back to before `version` (`undo` takes out what it
    /// made, and it is no longer recorded as applied), then opened again, running it.
    static func reopened(
        _ open: @Sendable () async throws -> any SQLDatabase, before version: Int,
        undo: @escaping @Sendable (any SQLConnection) async throws -> Void
    ) async throws -> SQLRegistrationStore {
        let database = try await open()
        try await database.write { connection in
            try await undo(connection)
            try await connection.execute("DELETE FROM schema_migrations WHERE version = ?", [.integer(Int64(version))])
        }
        await database.close()
        return try await SQLRegistrationStore.open(try open())
    }

    @Test("SQLite at version 8: the counted targets of an open send survive result_targets' rebuild as one B-tree")
    func resultTargetsRebuilt() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-\(UUID().uuidString).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let id = UUID().uuidString.lowercased()
        func results(_ targets: [String]) -> ResultBatch {
            ResultBatch(
                notificationId: id, hub: "myhub", platform: .apns,
                results: targets.map { DeliveryResult(registrationId: $0, handle: "h", outcome: .delivered, pnsStatus: 200, attempts: 1, dwellMs: 1) }
            )
        }
        var store = try await SQLRegistrationStore.open(SQLiteDatabase(path: path))
        try await store.recordOutcomes(ResultBatch(notificationId: id, hub: "myhub", dispatched: [.apns: 4]), now: Date())
        #expect(try await store.recordOutcomes(results(["a", "b"]), now: Date()))
        await store.close()
        // Back to version 8's shape: the rowid table with its rows, no sweep table.
        let database = try SQLiteDatabase(path: path)
        try await database.write { connection in
            for statement in [
                "CREATE TABLE old_targets (notification_id TEXT NOT NULL, target TEXT NOT NULL, PRIMARY KEY (notification_id, target))",
                "INSERT INTO old_targets SELECT notification_id, target FROM result_targets", "DROP TABLE result_targets",
                "ALTER TABLE old_targets RENAME TO result_targets", "DROP TABLE ended_sends_with_targets",
                "DELETE FROM schema_migrations WHERE version = 9",
            ] {
                try await connection.execute(statement, [])
            }
        }
        await database.close()
        store = try await SQLRegistrationStore.open(SQLiteDatabase(path: path))
        #expect(try await store.recordOutcomes(results(["a", "b"]), now: Date()) == false, "still counted")
        #expect(try await store.recordOutcomes(results(["b", "c", "d"]), now: Date()))
        let outcome = try #require(try await store.notification(hub: "myhub", id: id))
        #expect(outcome.state == .completed && outcome.counts == [.apns: [.delivered: 4]])
        await store.close()
    }
}

extension MigrationTests {
    @Test("a store whose jobs table first shipped without attempts gets it, its jobs kept", arguments: StoreKind.available)
    func jobAttemptsAdded(_ kind: StoreKind) async throws {
        let open = try await StoreFixture.ownDatabase(kind)
        let hub = "myhub"
        await (try await SQLRegistrationStore.open(try open())).close()
        let database = try await open()
        let now = Int64(Date().timeIntervalSince1970)
        // Version 13 as it first shipped, with a job waiting, and no later step applied.
        try await database.write { connection in
            for statement in [
                "DROP TABLE jobs",
                "CREATE TABLE jobs (hub TEXT NOT NULL, job_id TEXT NOT NULL, type TEXT NOT NULL, status TEXT NOT NULL, import_file_uri TEXT, output_container_uri TEXT, input_path TEXT, input_size BIGINT NOT NULL DEFAULT 0, input_offset BIGINT NOT NULL DEFAULT 0, line BIGINT NOT NULL DEFAULT 0, output_bytes BIGINT NOT NULL DEFAULT 0, failed_bytes BIGINT NOT NULL DEFAULT 0, export_cursor TEXT, export_total BIGINT NOT NULL DEFAULT 0, succeeded BIGINT NOT NULL DEFAULT 0, failed BIGINT NOT NULL DEFAULT 0, progress BIGINT NOT NULL DEFAULT 0, failure TEXT, runner TEXT, lease_until BIGINT, created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL, PRIMARY KEY (hub, job_id))",
                "INSERT INTO jobs (hub, job_id, type, status, created_at, updated_at) VALUES ('\(hub)', 'j1', 'ExportRegistrations', 'Started', \(now), \(now))",
                "DELETE FROM schema_migrations WHERE version = 15",
            ] {
                try await connection.execute(statement, [])
            }
        }
        await database.close()
        let store = try await SQLRegistrationStore.open(try open())
        let job = try #require(try await store.job(hub: hub, id: "j1"), "the job was kept")
        #expect(job.job.status == .started)
        // The column is there: a failure that may pass is counted against the job.
        #expect(try await store.claimJob(runner: "r", hubs: [hub], lease: 30, now: Date()) != nil)
        #expect(try await store.deferJob(hub: hub, id: "j1", runner: "r", failure: "x", maximumAttempts: 10) == false)
        await store.close()
    }
}

extension MigrationTests {
    @Test(
        "version 22 gives a send that ended under an older build its end as its deadline, so the sweep of ended sends finds it",
        arguments: StoreKind.available)
    func endedSendsGetTheirDeadline(_ kind: StoreKind) async throws {
        let open = try await StoreFixture.ownDatabase(kind)
        var store = try await SQLRegistrationStore.open(try open())
        let t0 = Date(timeIntervalSince1970: 1_700_000_000)
        try await store.recordEnqueued(OutcomeStoreTests.request("n", "h", at: t0), deadline: t0.addingTimeInterval(1_000_000), keep: false, now: t0)
        try await store.recordOutcomes(ResultBatch(notificationId: "n", hub: "h", dispatched: [.apns: 0]), now: t0.addingTimeInterval(10))
        await store.close()
        // As an older build left it: ended, its deadline what it was given; version 22 not applied.
        store = try await Self.reopened(open, before: 22) { connection in
            try await connection.execute(
                "UPDATE notifications SET deadline = ? WHERE notification_id = 'n'", [SQLValue(t0.addingTimeInterval(1_000_000))])
            try await connection.execute("DROP INDEX registration_ids_by_age", [])
        }
        #expect(try await store.sweepEndedSends(endedBefore: t0.addingTimeInterval(100), limit: 10) == 1, "ended at t0 + 10")
        #expect(try await store.notification(hub: "h", id: "n") == nil)
        await store.close()
    }

    @Test(
        "an installation whose push channel expired under an older build is swept past its ExpirationTime once version 26 ran",
        arguments: StoreKind.available)
    func prunedInstallationsGetTheirExpiry(_ kind: StoreKind) async throws {
        let open = try await StoreFixture.ownDatabase(kind)
        var store = try await SQLRegistrationStore.open(try open())
        let now = Date()
        for (id, expiry) in [("dated", now.addingTimeInterval(3600)), ("undated", nil)] {
            _ = try await store.upsertInstallation(
                Installation(installationId: id, platform: .apns, pushChannel: "t-\(id)", expirationTime: expiry), hub: "h")
            try await store.pruneInvalidHandle(hub: "h", registrationId: Registration.installationRegistrationId(id, template: nil))
        }
        await store.close()
        // As an older build left them: version 26 not applied; beside them, expired
        // installations whose documents do not read or whose times are none, which the
        // migration passes over rather than failing on.
        let unreadable = [
            "month 13": "2026-13-01T00:00:00Z", "February 30": "2026-02-30T00:00:00Z", "hour 25": "2026-01-01T25:00:00Z",
            "a word": "tomorrow", "not JSON": nil,
        ]
        store = try await Self.reopened(open, before: 26) { connection in
            try await connection.execute("DROP TABLE installation_expiries", [])
            for (id, expiry) in unreadable {
                let document =
                    expiry.map {
                        #"{"installationId":"\#(id)","platform":"apns","pushChannel":"t","pushChannelExpired":true,"expirationTime":"\#($0)"}"#
                    }
                    ?? "{not json"
                try await connection.execute(
                    "INSERT INTO installations (hub, installation_id, document, updated_at, platform, expired) VALUES (?, ?, ?, ?, 'apns', 1)",
                    [.text("h"), .text(id), .text(document), SQLValue(now)])
            }
        }
        try await store.sweepExpired(now: now.addingTimeInterval(7200), keys: 86_400, dispatches: 3600)
        #expect(try await store.installation(hub: "h", id: "dated") == nil, "expired an hour ago")
        #expect(try await store.installation(hub: "h", id: "undated") != nil, "no ExpirationTime")
        await store.close()
        let database = try await open()
        let left = try await database.read { connection in
            try await connection.query("SELECT installation_id FROM installations WHERE hub = 'h' ORDER BY installation_id", [])
                .compactMap { $0.text("installation_id") }
        }
        await database.close()
        // (February 30 may read as March 2 where a parser is lenient, and go then.)
        #expect(Set(left).isSuperset(of: ["month 13", "hour 25", "a word", "not JSON", "undated"]), "what does not read stays: \(left)")
        #expect(!left.contains("dated"))
    }
}

@Suite("Paging while registrations change")
struct PagingStabilityTests {
    @Test("a registration or installation updated mid-paging is met once", arguments: StoreKind.available)
    func updatesKeepTheirPlace(_ kind: StoreKind) async throws {
        let fixture = try await StoreFixture.make(kind)
        for index in 0..<10 {
            _ = try await fixture.store.upsertRegistration(
                Registration(registrationId: "r\(index)", hub: fixture.hub, format: .apple, handle: "h\(index)", tags: ["all"], updatedAt: Date()),
                ifMatch: nil)
        }
        _ = try await fixture.store.upsertInstallation(
            Installation(installationId: "inst", platform: .apns, pushChannel: "hi", tags: ["all"], templates: ["t": .init(body: "{}")]),
            hub: fixture.hub)
        let audience = RegistrationQuery.tagExpression(.tag("all"))
        let first = try await fixture.store.registrations(hub: fixture.hub, matching: audience, after: nil, limit: 5)
        // Everything already met changes while the rest is still to come.
        for registration in first.registrations {
            _ = try await fixture.store.upsertRegistration(
                Registration(
                    registrationId: registration.registrationId, hub: fixture.hub, format: .apple, handle: "moved", tags: ["all"], updatedAt: Date()),
                ifMatch: nil)
        }
        _ = try await fixture.store.upsertInstallation(
            Installation(installationId: "inst", platform: .apns, pushChannel: "hi2", tags: ["all"], templates: ["t": .init(body: "{}")]),
            hub: fixture.hub)
        var met = first.registrations.map(\.registrationId)
        var cursor = first.next
        while let position = cursor {
            let page = try await fixture.store.registrations(hub: fixture.hub, matching: audience, after: position, limit: 5)
            met += page.registrations.map(\.registrationId)
            cursor = page.next
        }
        #expect(met.count == 12, "\(met)")
        #expect(Set(met).count == 12, "no registration is met twice")
        #expect(
            try await fixture.store.registration(hub: fixture.hub, id: Registration.installationRegistrationId("inst", template: "t"))?.version == 2)
    }
}

@Suite("Concurrent writes")
struct ConcurrentWriteTests {
    @Test(
        "an installation upserted, patched, pruned and deleted at once: no write fails, and no registration outlives its installation",
        arguments: StoreKind.available)
    func installationRaces(_ kind: StoreKind) async throws {
        let fixture = try await StoreFixture.make(kind)
        let store = try #require(fixture.store as? SQLRegistrationStore)
        let native = Registration.installationRegistrationId("racer", template: nil)
        for round in 0..<30 {
            let installation = Installation(
                installationId: "racer", platform: .apns, pushChannel: "token-\(round)", tags: ["round-\(round)"],
                templates: ["t": Template(body: #"{"aps":{"alert":"$(m)"}}"#)])
            _ = try await store.upsertInstallation(installation, hub: fixture.hub)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { _ = try await store.upsertInstallation(installation, hub: fixture.hub) }
                group.addTask { try await store.pruneInvalidHandle(hub: fixture.hub, registrationId: native) }
                group.addTask {
                    do {
                        _ = try await store.patchInstallation(
                            hub: fixture.hub, id: "racer", [InstallationPatchOperation(op: .add, path: "/tags", value: .string("patched"))])
                    } catch StoreError.notFound {}
                }
                if round % 2 == 0 { group.addTask { _ = try await store.deleteInstallation(hub: fixture.hub, id: "racer") } }
                do { try await group.waitForAll() } catch {
                    // What the database said, whole (PostgreSQL's errors hide it otherwise).
                    Issue.record("round \(round): \(String(reflecting: error))")
                    throw error
                }
            }
            let stored = try await store.all(hub: fixture.hub, matching: .installation("racer"))
            if try await store.installation(hub: fixture.hub, id: "racer") == nil {
                #expect(stored.isEmpty, "round \(round): registrations without their installation: \(stored.map(\.registrationId))")
            } else {
                #expect(stored.isEmpty || stored.count == 2, "round \(round): \(stored.map(\.registrationId))")
            }
            let differences = try await TagRowTests.differences(store, hub: fixture.hub)
            #expect(differences.isEmpty, "round \(round): \(differences)")
        }
    }

    @Test(
        "a registration upserted with new tags while it is deleted and pruned: its tag rows stay its tags",
        arguments: StoreKind.available)
    func registrationRaces(_ kind: StoreKind) async throws {
        let fixture = try await StoreFixture.make(kind)
        let store = try #require(fixture.store as? SQLRegistrationStore)
        for round in 0..<40 {
            let first = Registration(
                registrationId: "racer", hub: fixture.hub, format: .apple, handle: "h", tags: ["round-\(round)"], updatedAt: Date())
            _ = try await store.upsertRegistration(first, ifMatch: nil)
            let next = Registration(
                registrationId: "racer", hub: fixture.hub, format: .apple, handle: "h", tags: ["next-\(round)", "both"], updatedAt: Date())
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { _ = try await store.upsertRegistration(next, ifMatch: nil) }
                group.addTask { _ = try await store.deleteRegistration(hub: fixture.hub, id: "racer", ifMatch: nil) }
                if round % 2 == 1 { group.addTask { try await store.pruneInvalidHandle(hub: fixture.hub, registrationId: "racer") } }
                do { try await group.waitForAll() } catch {
                    Issue.record("round \(round): \(String(reflecting: error))")
                    throw error
                }
            }
            let differences = try await TagRowTests.differences(store, hub: fixture.hub)
            #expect(differences.isEmpty, "round \(round): \(differences)")
        }
    }

    @Test("writes that fail among concurrent writes change nothing; the others all land", arguments: StoreKind.available)
    func failuresStayAlone(_ kind: StoreKind) async throws {
        let fixture = try await StoreFixture.make(kind)
        let base = Registration(registrationId: "x", hub: fixture.hub, format: .apple, handle: "hx", tags: ["keep"], updatedAt: Date())
        _ = try await fixture.store.upsertRegistration(base, ifMatch: nil)
        let outcomes = try await withThrowingTaskGroup(of: (Int, Bool).self) { group in
            for index in 0..<40 {
                group.addTask {
                    if index % 2 == 0 {
                        var stale = base
                        stale.tags = ["changed-\(index)"]
                        do {
                            _ = try await fixture.store.upsertRegistration(stale, ifMatch: 99)
                            return (index, true)
                        } catch StoreError.versionMismatch {
                            return (index, false)
                        }
                    }
                    _ = try await fixture.store.upsertRegistration(
                        Registration(
                            registrationId: "n\(index)", hub: fixture.hub, format: .gcm, handle: "h\(index)", tags: ["new"], updatedAt: Date()),
                        ifMatch: nil)
                    return (index, true)
                }
            }
            return try await group.reduce(into: [Int: Bool]()) { $0[$1.0] = $1.1 }
        }
        #expect(outcomes.filter { $0.value }.keys.sorted() == stride(from: 1, to: 40, by: 2).map { $0 })
        let current = try #require(try await fixture.store.registration(hub: fixture.hub, id: "x"))
        #expect(current.tags == ["keep"])
        #expect(current.version == 1)
        #expect(try await fixture.store.all(hub: fixture.hub, matching: .tagExpression(.tag("new"))).count == 20)
    }
}
