import Foundation
import Logging
import PushModel
import PushStore

/// The stores the conformance suite runs against. PostgreSQL takes part when
/// `PUSHHUB_TEST_POSTGRES_URL` names a database (`make test` starts a throwaway server).
enum StoreKind: String, CaseIterable, Sendable, CustomStringConvertible {
    case sqlite
    case postgres

    static let postgresURL = ProcessInfo.processInfo.environment["PUSHHUB_TEST_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }

    /// Both stores; PostgreSQL only when a server is named. Under `make test`
    /// (`PUSHHUB_REQUIRE_POSTGRES=1`) a missing server fails the run instead of shrinking it.
    static var available: [StoreKind] {
        if postgresURL == nil, ProcessInfo.processInfo.environment["PUSHHUB_REQUIRE_POSTGRES"] == "1" {
            fatalError("PUSHHUB_REQUIRE_POSTGRES=1 but PUSHHUB_TEST_POSTGRES_URL names no server: run the tests through scripts/with-postgres.sh")
        }
        return postgresURL == nil ? [.sqlite] : [.sqlite, .postgres]
    }

    var description: String { rawValue }
}

/// A store with a hub of its own, so tests can share one PostgreSQL database.
struct StoreFixture {
    let store: any RegistrationStore
    let hub: String

    static func make(_ kind: StoreKind) async throws -> StoreFixture {
        let hub = "hub-\(UUID().uuidString.prefix(8).lowercased())"
        switch kind {
        case .sqlite:
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-\(UUID().uuidString).sqlite").path
            return StoreFixture(store: try await SQLRegistrationStore.open(SQLiteDatabase(path: path)), hub: hub)
        case .postgres:
            return StoreFixture(store: try await SharedPostgres.shared.store(), hub: hub)
        }
    }
}

extension StoreFixture {
    /// Opens a database of the test's own (an SQLite file, or a new PostgreSQL database on the
    /// test server), for tests whose changes are not a hub's: a schema taken back a version,
    /// a sweep by age.
    static func ownDatabase(_ kind: StoreKind) async throws -> @Sendable () async throws -> any SQLDatabase {
        let logger = Logger(label: "pushhub.tests.own") { _ in SwiftLogNoOpLogHandler() }
        switch kind {
        case .sqlite:
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-\(UUID().uuidString).sqlite").path
            return { try SQLiteDatabase(path: path) }
        case .postgres:
            guard let url = StoreKind.postgresURL else { throw StoreError.notFound("PUSHHUB_TEST_POSTGRES_URL") }
            let name = "own_\(UUID().uuidString.prefix(8).lowercased())"
            let server = try PostgresDatabase(url: url, logger: logger)
            try await server.writeStatement { try await $0.execute("CREATE DATABASE \(name)", []) }
            await server.close()
            let own = String(url[..<url.lastIndex(of: "/")!]) + "/" + name
            return { try PostgresDatabase(url: own, logger: logger) }
        }
    }
}

/// One PostgreSQL store for the whole test run, opened once by whichever test asks first.
actor SharedPostgres {
    static let shared = SharedPostgres()
    private var opening: Task<SQLRegistrationStore, any Error>?

    func store() async throws -> SQLRegistrationStore {
        if opening == nil {
            opening = Task {
                guard let url = StoreKind.postgresURL else { throw StoreError.notFound("PUSHHUB_TEST_POSTGRES_URL") }
                let logger = Logger(label: "pushhub.tests.postgres") { _ in SwiftLogNoOpLogHandler() }
                return try await SQLRegistrationStore.open(PostgresDatabase(url: url, logger: logger))
            }
        }
        return try await opening!.value
    }
}

extension RegistrationStore {
    /// Every registration matching `query`, page by page.
    func all(hub: String, matching query: RegistrationQuery, pageSize: Int = 7) async throws -> [Registration] {
        var result: [Registration] = []
        var cursor: RegistrationCursor?
        repeat {
            let page = try await registrations(hub: hub, matching: query, after: cursor, limit: pageSize)
            result += page.registrations
            cursor = page.next
        } while cursor != nil
        return result
    }
}
