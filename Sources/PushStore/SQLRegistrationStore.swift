import Foundation
import Logging
import PushModel
import Synchronization

/// The registration store on any `SQLDatabase`.
public final class SQLRegistrationStore: RegistrationStore {
    let database: any SQLDatabase
    private let remembered: TagCounts
    /// PostgreSQL's installation writes taken together; none inside a transaction (`within`),
    /// nor on SQLite, whose one writer takes writes together already.
    let installationWrites: PostgresInstallationWrites?
    /// Where the last sweep of expired registrations stopped (`sweepExpired`); nil to start
    /// from the first.
    let expiryCursor = Mutex<ExpiryCursor?>(nil)

    private init(database: any SQLDatabase, remembered: TagCounts = TagCounts(), installationWrites: PostgresInstallationWrites? = nil) {
        self.database = database
        self.remembered = remembered
        self.installationWrites = installationWrites
    }

    /// This store inside a transaction that is open on `connection`: what it reads and writes
    /// runs there.
    func within(_ connection: any SQLConnection) -> SQLRegistrationStore {
        SQLRegistrationStore(database: OpenTransaction(connection: connection, dialect: database.dialect), remembered: remembered)
    }

    /// Opens the store on `database`, running its migrations first.
    public static func open(_ database: any SQLDatabase) async throws -> SQLRegistrationStore {
        try await Migrations.run(on: database)
        return SQLRegistrationStore(
            database: database,
            installationWrites: database.dialect == .postgres
                ? PostgresInstallationWrites(database: database, logger: (database as? PostgresDatabase)?.logger ?? Logger(label: "pushhub.store"))
                : nil)
    }

    public func close() async {
        await database.close()
    }

    // MARK: Installations

    public func upsertInstallation(_ installation: Installation, hub: String) async throws -> Installation {
        do { try installation.validate() } catch { throw StoreError.invalid(error) }
        var stored = installation
        stored.lastUpdate = RFC3339.truncated(Date())
        // Made before the write: on SQLite one writer runs every write of the database in turn.
        let write = try InstallationWrite(stored, hub: hub)
        if let installationWrites {
            try await installationWrites.write(write)
            return stored
        }
        let dialect = database.dialect
        // PostgreSQL writes it with one statement (`pushhub_write_installation`).
        try await database.writeStatement { connection in
            try await Self.writeInstallation(write, dialect: dialect, on: connection)
        }
        return stored
    }

    /// Whether the database answers a trivial query (readiness checks).
    public func isReachable() async -> Bool {
        (try? await database.read { connection in try await connection.query("SELECT 1", []).count }) == 1
    }

    public func installation(hub: String, id: String) async throws -> Installation? {
        try await database.read { connection in try await Self.readInstallation(hub: hub, id: id, on: connection) }
    }

    public func patchInstallation(hub: String, id: String, _ operations: [InstallationPatchOperation]) async throws -> Installation {
        let dialect = database.dialect
        return try await database.write { connection in
            // Locked as it is read, on PostgreSQL: two patches, or a patch and an upsert, of one
            // installation take turns instead of one undoing the other.
            guard let current = try await Self.readInstallation(hub: hub, id: id, forUpdate: dialect == .postgres, on: connection) else {
                throw StoreError.notFound("installation \(id)")
            }
            var patched: Installation
            do { patched = try current.applying(operations) } catch let error as WireError { throw StoreError.invalid(error) }
            patched.lastUpdate = RFC3339.truncated(Date())
            try await Self.writeInstallation(try InstallationWrite(patched, hub: hub), dialect: dialect, on: connection)
            return patched
        }
    }

    public func deleteInstallation(hub: String, id: String) async throws -> Bool {
        try await database.write { connection in try await Self.deleteInstallation(hub: hub, id: id, on: connection) }
    }

    /// Deletes an installation with its tag rows and registrations; says whether there was one.
    static func deleteInstallation(hub: String, id: String, on connection: any SQLConnection) async throws -> Bool {
        // The installation row first, as every writer of an installation takes it: on
        // PostgreSQL its lock orders them, and the registrations are then read after any
        // writer before has committed.
        let deleted = try await connection.query(
            "DELETE FROM installations WHERE hub = ? AND installation_id = ? RETURNING tags", [.text(hub), .text(id)])
        // Its tag rows by their key, the tags it had naming them (PostgreSQL has no index by
        // installation, version 19).
        let tags = StoredRow.splitTags(deleted.first?.text("tags"))
        if !tags.isEmpty {
            try await connection.execute(
                "DELETE FROM installation_tags WHERE hub = ? AND tag IN (" + Self.placeholders(tags.count)
                    + ") AND installation_id = ?",
                [.text(hub)] + tags.map(SQLValue.text) + [.text(id)])
        }
        try await connection.execute("DELETE FROM registrations WHERE hub = ? AND installation_id = ?", [.text(hub), .text(id)])
        try await connection.execute("DELETE FROM installation_expiries WHERE hub = ? AND installation_id = ?", [.text(hub), .text(id)])
        return !deleted.isEmpty
    }

    /// Where a sweep of expired registrations got to: the last row it looked at, in the
    /// order of the index it reads (expiry, then `seq`).
    struct ExpiryCursor: Sendable, Equatable {
        var expiresAt: Int64
        var seq: Int64
    }

    /// Looks at up to `limit` registrations past their `ExpirationTime`, after `cursor`, in
    /// one transaction, and deletes them as Azure deletes them; says how many it looked at and
    /// the last. A registration of an installation goes with its installation (whose
    /// `expirationTime` its registrations carry) once the installation, read under its lock,
    /// has expired too: a renewal that came meanwhile keeps it. One whose installation row is
    /// gone goes alone. What stays (a renewal, a document that no longer reads) is passed, not
    /// looked at again by the same sweep. Sends pass expired registrations over already; they
    /// no longer fill their tags' pages and counts for ever.
    func sweepExpiredRegistrations(now: Date, limit: Int, after cursor: ExpiryCursor?) async throws -> (looked: Int, last: ExpiryCursor?) {
        let lock = database.dialect == .postgres
        return try await database.write { connection in
            let from = cursor ?? ExpiryCursor(expiresAt: .min, seq: .min)
            let found = try await connection.query(
                """
                SELECT seq, expires_at, hub, registration_id, installation_id FROM registrations
                WHERE expires_at IS NOT NULL AND expires_at < ? AND expires_at >= ? AND NOT (expires_at = ? AND seq <= ?)
                ORDER BY expires_at, seq LIMIT ?
                """,
                [SQLValue(now), .integer(from.expiresAt), .integer(from.expiresAt), .integer(from.seq), .integer(Int64(max(1, limit)))])
            var standalone: [[String]] = []
            var installations = Set<[String]>()
            for row in found {
                guard let hub = row.text("hub"), let id = row.text("registration_id") else { continue }
                if let installation = row.text("installation_id") {
                    installations.insert([hub, installation])
                } else {
                    standalone.append([hub, id])
                }
            }
            // In the order of their ids, as an import locks registrations, so neither waits on
            // the other's rows in the opposite order.
            for key in standalone.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
                // Expired still as it is deleted: one renewed meanwhile stays.
                try await connection.execute(
                    "DELETE FROM registrations WHERE hub = ? AND registration_id = ? AND installation_id IS NULL AND expires_at < ?",
                    [.text(key[0]), .text(key[1]), SQLValue(now)])
            }
            for key in installations.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
                let (hub, id) = (key[0], key[1])
                let installation: Installation
                switch try await Self.sweptInstallation(hub: hub, id: id, lock: lock, on: connection) {
                case .unreadable: continue  // left as it is
                case .gone:
                    // Its installation is gone: the registrations that expired go alone.
                    try await connection.execute(
                        "DELETE FROM registrations WHERE hub = ? AND installation_id = ? AND expires_at < ?", [.text(hub), .text(id), SQLValue(now)])
                    continue
                case .found(let found): installation = found
                }
                guard let expiry = installation.expirationTime, expiry < now else { continue }
                _ = try await Self.deleteInstallation(hub: hub, id: id, on: connection)
            }
            let last = found.last.flatMap { row in
                row.integer("expires_at").flatMap { expiry in row.integer("seq").map { ExpiryCursor(expiresAt: expiry, seq: $0) } }
            }
            return (found.count, last)
        }
    }

    /// Looks at up to `limit` installations whose push channel expired (their registrations
    /// gone with it) and whose ExpirationTime passed, in one transaction, and deletes them as
    /// Azure deletes an expired installation; says how many it looked at. Each is read again
    /// under its lock: one given a new channel since (its registrations carry its expiry
    /// again), without an expiry now, or gone, leaves the list; one whose expiry moved on moves
    /// with it; one whose document does not read leaves the list and stays.
    func sweepExpiredInstallations(now: Date, limit: Int) async throws -> Int {
        let lock = database.dialect == .postgres
        return try await database.write { connection in
            let found = try await connection.query(
                "SELECT hub, installation_id FROM installation_expiries WHERE expires_at < ? ORDER BY expires_at LIMIT ?",
                [SQLValue(now), .integer(Int64(max(1, limit)))])
            let keys = found.compactMap { row in row.text("hub").flatMap { hub in row.text("installation_id").map { [hub, $0] } } }
            // In the order of their keys, as other writers of several installations lock them.
            for key in keys.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
                let (hub, id) = (key[0], key[1])
                guard case .found(let installation) = try await Self.sweptInstallation(hub: hub, id: id, lock: lock, on: connection),
                    installation.pushChannelExpired, let expiry = installation.expirationTime
                else {
                    try await connection.execute("DELETE FROM installation_expiries WHERE hub = ? AND installation_id = ?", [.text(hub), .text(id)])
                    continue
                }
                guard expiry < now else {
                    try await connection.execute(
                        "UPDATE installation_expiries SET expires_at = ? WHERE hub = ? AND installation_id = ?",
                        [SQLValue(expiry), .text(hub), .text(id)])
                    continue
                }
                // Its row in the list goes with it.
                _ = try await Self.deleteInstallation(hub: hub, id: id, on: connection)
            }
            return found.count
        }
    }

    /// An installation as a sweep reads it, under its lock: found, gone, or with a document
    /// that does not read (a failure of the store's is thrown).
    private enum SweptInstallation {
        case found(Installation)
        case gone
        case unreadable
    }

    private static func sweptInstallation(hub: String, id: String, lock: Bool, on connection: any SQLConnection) async throws
        -> SweptInstallation
    {
        do {
            guard let installation = try await readInstallation(hub: hub, id: id, forUpdate: lock, on: connection) else { return .gone }
            return .found(installation)
        } catch let error as SQLError {
            throw error
        } catch {
            return .unreadable
        }
    }

    private static func readInstallation(hub: String, id: String, forUpdate: Bool = false, on connection: any SQLConnection) async throws
        -> Installation?
    {
        let rows = try await connection.query(
            "SELECT document FROM installations WHERE hub = ? AND installation_id = ?" + (forUpdate ? " FOR UPDATE" : ""), [.text(hub), .text(id)])
        guard let document = rows.first?.text("document") else { return nil }
        return try installation(document: document)
    }

    /// An installation's write, made ready before the writer runs it: its rows' binds, and its
    /// registrations' columns.
    struct InstallationWrite: Sendable {
        let hub: String
        let installationId: String
        let document: String
        let updatedAt: SQLValue
        /// What installations are queried by (`installations(hub:matching:)`): platform, user,
        /// whether its channel expired, and its tags.
        let queried: [SQLValue]
        /// Its explicit and implicit tags, as its tag rows and its native registration carry them.
        let tags: [String]
        /// Its registrations with their columns, `version` 1 until a stored row says otherwise.
        let registrations: [(registration: Registration, columns: [SQLValue])]
        /// About the bytes it adds to `pushhub_write_installations`' argument.
        let argumentBytes: Int

        init(_ installation: Installation, hub: String) throws {
            let now = installation.lastUpdate ?? Date()
            self.hub = hub
            installationId = installation.installationId
            document = SQLRegistrationStore.document(installation)
            tags = installation.queriedTags
            updatedAt = SQLValue(now)
            queried = [
                .text(installation.platform.rawValue), installation.userId.map(SQLValue.text) ?? .null,
                .integer(installation.pushChannelExpired ? 1 : 0), .text(tags.joined(separator: ",")),
            ]
            // None while its channel is expired: a PATCH that leaves the channel as it was (its
            // tags, a template) does not bring back registrations to the handle a PNS called
            // invalid. A new channel (PUT, or a PATCH of it) clears the mark.
            registrations =
                installation.pushChannelExpired ? [] : try installation.registrations(hub: hub, now: now).map { ($0, try columns(of: $0)) }
            argumentBytes =
                document.utf8.count + 256
                + registrations.reduce(0) { sum, row in
                    row.columns.reduce(sum + 256) { sum, value in
                        if case .text(let text) = value { sum + text.utf8.count } else { sum + 20 }
                    }
                }
        }
    }

    static func writeInstallation(_ write: InstallationWrite, dialect: SQLDialect, on connection: any SQLConnection) async throws {
        let (hub, id) = (SQLValue.text(write.hub), SQLValue.text(write.installationId))
        if dialect == .postgres {
            _ = try await connection.query(
                "SELECT pushhub_write_installation(?, ?, ?, ?, ?, ?, ?, ?, ?) AS written",
                [hub, id, .text(write.document), write.updatedAt, .text(installationRows(write.registrations))] + write.queried)
            return
        }
        // SQLite's path (PostgreSQL returned above): the same steps as the function, but for
        // the new registrations, which go in together after the updates.
        try await connection.execute(
            """
            INSERT INTO installations (hub, installation_id, document, updated_at, platform, user_id, expired, tags) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (hub, installation_id) DO UPDATE SET document = excluded.document, updated_at = excluded.updated_at,
                platform = excluded.platform, user_id = excluded.user_id, expired = excluded.expired, tags = excluded.tags
            """, [hub, id, .text(write.document), write.updatedAt] + write.queried)
        // Rows are updated in place, keeping their paging position: an audience being paged
        // while the installation changes meets each of its registrations once.
        var existing: [String: (row: StoredRow, version: Int64)] = [:]
        for row in try await connection.query(
            "SELECT seq, registration_id, version, tags FROM registrations WHERE hub = ? AND installation_id = ?", [hub, id])
        {
            if let registrationId = row.text("registration_id"), let stored = StoredRow(row) {
                existing[registrationId] = (stored, row.integer("version") ?? 0)
            }
        }
        // The installation's tag rows, rewritten when its tags changed: its native
        // registration carries exactly them (none is left once its push channel expired).
        let native = existing[Registration.installationRegistrationId(write.installationId, template: nil)]
        if native?.row.tags != Set(write.tags) {
            try await connection.execute("DELETE FROM installation_tags WHERE hub = ? AND installation_id = ?", [hub, id])
            // One statement for them all, not one a tag.
            try await insertTags(write.tags.flatMap { [hub, .text($0), id] }, into: .installations, on: connection)
        }
        // New registrations go in together, in one statement with their tag rows in another.
        var new: [(registration: Registration, columns: [SQLValue])] = []
        for (registration, columns) in write.registrations {
            guard let current = existing.removeValue(forKey: registration.registrationId) else {
                new.append((registration, columns))
                continue
            }
            // Its columns were made before the write, with version 1 (as is `registration`'s,
            // which only its tags are read of from here): the next version is known only now.
            var columns = columns
            columns[versionColumn] = .integer(current.version + 1)
            try await updateRegistration(registration, columns: columns, existing: current.row, on: connection)
        }
        try await insertNew(new, on: connection)
        for (_, stale) in existing {
            try await connection.execute("DELETE FROM registrations WHERE seq = ?", [.integer(stale.row.seq)])
        }
    }

    // MARK: Registrations

    public func issueRegistrationId(hub: String) async throws -> String {
        let id = Registration.newId()
        try await database.write { connection in
            try await connection.execute(
                "INSERT INTO registration_ids (hub, registration_id, issued_at) VALUES (?, ?, ?)", [.text(hub), .text(id), SQLValue(Date())])
        }
        return id
    }

    public func upsertRegistration(_ registration: Registration, ifMatch: Int64?) async throws -> Registration {
        do {
            try Tags.validate(registration.tags, field: "Tags")
            try registration.validateStored()
        } catch { throw StoreError.invalid(error) }
        let dialect = database.dialect
        return try await database.write { connection in
            // Locked as it is read, on PostgreSQL: a delete beside it (the API's, a prune's, an
            // import's) either goes first, and the registration is inserted anew, or waits. An
            // update of a row deleted after it was read changed nothing, and its tag rows then
            // went in for no registration (PostgreSQL has no foreign key to refuse them).
            let existing = try await connection.query(
                "SELECT seq, version, installation_id, tags FROM registrations WHERE hub = ? AND registration_id = ?"
                    + (dialect == .postgres ? " FOR UPDATE" : ""),
                [.text(registration.hub), .text(registration.registrationId)]
            ).first
            if let installation = existing?.text("installation_id") {
                throw StoreError.belongsToInstallation(registrationId: registration.registrationId, installationId: installation)
            }
            let currentVersion = existing?.integer("version")
            if let ifMatch, ifMatch != currentVersion {
                throw StoreError.versionMismatch(expected: ifMatch, actual: currentVersion)
            }
            var stored = registration
            stored.tags = Tags.normalized(registration.tags)
            stored.version = (currentVersion ?? 0) + 1
            stored.updatedAt = RFC3339.truncated(Date())
            stored.installationId = nil
            try await Self.writeRegistration(stored, existing: existing.flatMap(StoredRow.init), on: connection)
            try await connection.execute(
                "DELETE FROM registration_ids WHERE hub = ? AND registration_id = ?", [.text(stored.hub), .text(stored.registrationId)])
            return stored
        }
    }

    public func importRegistrations(_ registrations: [Registration]) async throws {
        for registration in registrations {
            do { try Tags.validate(registration.tags, field: "tags of \(registration.registrationId)") } catch { throw StoreError.invalid(error) }
        }
        let normalized = registrations.map { registration in
            var registration = registration
            registration.tags = Tags.normalized(registration.tags)
            registration.installationId = nil
            return registration
        }
        try await database.write { connection in try await Self.insertNew(normalized, on: connection) }
    }

    /// Inserts registrations whose ids are new, normalized already, with their tag rows.
    static func insertNew(_ registrations: [Registration], on connection: any SQLConnection) async throws {
        try await insertNew(registrations.map { ($0, try columns(of: $0)) }, on: connection)
    }

    /// Inserts registrations whose ids are new, given with their columns (`columns(of:)`).
    static func insertNew(_ registrations: [(registration: Registration, columns: [SQLValue])], on connection: any SQLConnection) async throws {
        // Many rows to a statement: one statement per row made seeding ten million
        // registrations into PostgreSQL a matter of hours, one round trip each.
        for start in stride(from: 0, to: registrations.count, by: Self.importRowsPerStatement) {
            let chunk = registrations[start..<min(start + Self.importRowsPerStatement, registrations.count)]
            var binds: [SQLValue] = []
            binds.reserveCapacity(chunk.count * (columnNames.count + 2))
            for (registration, columns) in chunk {
                binds += columns
                binds += [.text(registration.hub), .text(registration.registrationId)]
            }
            let inserted = try await connection.query(Self.insertRegistrations(rows: chunk.count), binds)
            // RETURNING's order is not promised, so rows are matched by their keys.
            var seqs: [String: [String: Int64]] = [:]
            for row in inserted {
                guard let seq = row.integer("seq"), let hub = row.text("hub"), let id = row.text("registration_id") else { continue }
                seqs[hub, default: [:]][id] = seq
            }
            var tagRows: [SQLValue] = []
            for (registration, _) in chunk {
                guard let seq = seqs[registration.hub]?[registration.registrationId] else {
                    throw SQLError(message: "the insert of \(registration.registrationId) returned no row")
                }
                for tag in registration.tags { tagRows += [.text(registration.hub), .text(tag), .integer(seq)] }
            }
            try await Self.insertTags(tagRows, on: connection)
        }
    }

    /// Registrations to one INSERT (an import's, or an installation's): 16 parameters each,
    /// well inside SQLite's 32,766 and PostgreSQL's 65,535.
    static let importRowsPerStatement = 500

    /// A table of tag rows, and its owner column: a registration's `seq` or an installation's id.
    enum TagTable: Int, CaseIterable {
        case registrations, installations

        var name: String { self == .registrations ? "registration_tags" : "installation_tags" }
        var owner: String { self == .registrations ? "seq" : "installation_id" }
        /// The table of the rows that own the tags.
        var owners: String { self == .registrations ? "registrations" : "installations" }

        /// An INSERT of `rows` (at least one) tag rows; those of a registration's or an
        /// installation's few rows are made once.
        func insert(rows: Int) -> String {
            rows <= Self.fewRows ? Self.few[rawValue][rows - 1] : statement(rows: rows)
        }

        private func statement(rows: Int) -> String { SQLRegistrationStore.insert(into: name, ["hub", "tag", owner], rows: rows) }
        private static let fewRows = 32
        /// By table, the INSERTs of 1 to `fewRows` rows.
        private static let few = allCases.map { table in (1...fewRows).map(table.statement(rows:)) }
    }

    /// Where the registrations or installations (`table`) of `hub` that carry any of `tags`
    /// are found: SELECTs of their owner column (`seq` or `installation_id`), each ending in a
    /// WHERE clause that a caller may extend, to be joined by UNION. The explicit tags'
    /// rows are read from the tag table in one; an implicit tag (`$InstallationId:{…}`,
    /// `$UserId:{…}`) has no tag rows, and its owners are found by the column it names, which
    /// an index covers: the installation's id or the user's (version 20; such tags' rows were
    /// 4 of a new installation's 10, with the longest keys). Of those rows, only the ones whose
    /// `tags` carry one of the tags: a registration imported with a user id answers to a send
    /// to that user (`RegistrationQuery.user`), but carries no `$UserId:{…}`, as before.
    static func carrying(_ tags: [String], hub: String, in table: TagTable, dialect: SQLDialect) -> [(sql: String, binds: [SQLValue])] {
        owners(carrying: tags, hub: hub, in: table, dialect: dialect).map { ("SELECT \(table.owner) FROM \($0.from) WHERE \($0.sql)", $0.binds) }
    }

    /// A condition on `from` that finds owners of tags, with its values.
    typealias OwnerCondition = (from: String, sql: String, binds: [SQLValue])

    /// The conditions of `carrying(_:hub:in:dialect:)`, each with the table it is on: the tag
    /// table for explicit tags, `table.owners` for implicit ones.
    static func owners(carrying tags: [String], hub: String, in table: TagTable, dialect: SQLDialect) -> [OwnerCondition] {
        var explicit: [String] = []
        var installations: [String] = []
        var users: [String] = []
        for tag in tags {
            switch Tags.implicit(tag) {
            case nil: explicit.append(tag)
            case .installation(let id): installations.append(id)
            case .user(let id): users.append(id)
            }
        }
        // One condition for each kind: the explicit tags' rows, the installations', the users'.
        var conditions: [OwnerCondition] = []
        if !explicit.isEmpty { conditions.append(owners(table.name, .tag, explicit, implicit: [], hub: hub, dialect: dialect)) }
        if !installations.isEmpty {
            conditions.append(
                owners(table.owners, .installation, installations, implicit: installations.map(Tags.installation), hub: hub, dialect: dialect))
        }
        if !users.isEmpty { conditions.append(owners(table.owners, .user, users, implicit: users.map(Tags.user), hub: hub, dialect: dialect)) }
        return conditions
    }

    /// The column that finds a tag's owners: the tag rows' own for an explicit tag, the owner's
    /// id for an implicit one.
    private enum OwnerColumn: String, CaseIterable {
        case tag
        case installation = "installation_id"
        case user = "user_id"
    }

    /// The owners on `from` whose `column` is one of `values`; where the values stand for
    /// `implicit` tags, only rows whose `tags` carry one of them.
    private static func owners(
        _ from: String, _ column: OwnerColumn, _ values: [String], implicit: [String], hub: String, dialect: SQLDialect
    ) -> OwnerCondition {
        let binds = [.text(hub)] + values.map(SQLValue.text)
        let isImplicit = !implicit.isEmpty
        if values.count == 1 {
            // The text made once; the tag's own value still bound.
            return (
                from, oneOwner[OneOwner(column, dialect, implicit: isImplicit)]!,
                isImplicit ? binds + [searched(implicit[0])] : binds
            )
        }
        let sql = "hub = ? AND \(column.rawValue) IN (\(placeholders(values.count)))"
        guard isImplicit else { return (from, sql, binds) }
        let carried = tagsCarryOne(of: implicit, dialect: dialect)
        return (from, sql + " AND " + carried.sql, binds + carried.binds)
    }

    /// The condition that a row's `tags` carry one of `implicit` tags.
    private static func tagsCarryOne(of implicit: [String], dialect: SQLDialect) -> (sql: String, binds: [SQLValue]) {
        compile(implicit.dropFirst().reduce(.tag(implicit[0])) { .or($0, .tag($1)) }, dialect: dialect, column: "tags")
    }

    /// The condition for one owner by `column` (and, for an implicit tag, its `tags` carrying
    /// it), made once for each column and dialect: a single-user send's audience asks for it
    /// every time. The text of one tag's condition on `tags` does not depend on the tag.
    private struct OneOwner: Hashable {
        var column: OwnerColumn
        var dialect: SQLDialect
        var implicit: Bool

        init(_ column: OwnerColumn, _ dialect: SQLDialect, implicit: Bool) {
            self.column = column
            self.dialect = dialect
            self.implicit = implicit
        }
    }

    private static let oneOwner: [OneOwner: String] = {
        var texts: [OneOwner: String] = [:]
        for column in OwnerColumn.allCases {
            for dialect in [SQLDialect.sqlite, .postgres] {
                texts[OneOwner(column, dialect, implicit: false)] = "hub = ? AND \(column.rawValue) = ?"
                texts[OneOwner(column, dialect, implicit: true)] =
                    "hub = ? AND \(column.rawValue) = ? AND " + compile(.tag("t"), dialect: dialect, column: "tags").sql
            }
        }
        return texts
    }()

    /// Inserts tag rows, given as (hub, tag, owner) triples, in statements of at most 2,000
    /// rows. Implicit tags get none: their registrations and installations are found by the
    /// column each names (`carrying(_:hub:in:dialect:)`).
    static func insertTags(_ triples: [SQLValue], into table: TagTable = .registrations, on connection: any SQLConnection) async throws {
        let isImplicit = { (value: SQLValue) in if case .text(let tag) = value { Tags.implicit(tag) != nil } else { false } }
        var triples = triples
        if stride(from: 1, to: triples.count, by: 3).contains(where: { isImplicit(triples[$0]) }) {
            triples = stride(from: 0, to: triples.count, by: 3).filter { !isImplicit(triples[$0 + 1]) }.flatMap { triples[$0..<$0 + 3] }
        }
        let perStatement = 2_000 * 3
        for start in stride(from: 0, to: triples.count, by: perStatement) {
            let binds = Array(triples[start..<min(start + perStatement, triples.count)])
            try await connection.execute(table.insert(rows: binds.count / 3), binds)
        }
    }

    public func registration(hub: String, id: String) async throws -> Registration? {
        try await database.read { connection in
            try await connection.query(
                "SELECT * FROM registrations WHERE hub = ? AND registration_id = ?", [.text(hub), .text(id)]
            ).first.map { try Self.RegistrationColumns($0).registration($0) }
        }
    }

    public func deleteRegistration(hub: String, id: String, ifMatch: Int64?) async throws -> Bool {
        let dialect = database.dialect
        return try await database.write { connection in
            // Locked as it is read, on PostgreSQL, so the version compared is the one deleted.
            let existing = try await connection.query(
                "SELECT seq, version, installation_id FROM registrations WHERE hub = ? AND registration_id = ?"
                    + (dialect == .postgres ? " FOR UPDATE" : ""), [.text(hub), .text(id)]
            ).first
            try await connection.execute("DELETE FROM registration_ids WHERE hub = ? AND registration_id = ?", [.text(hub), .text(id)])
            guard let existing, let seq = existing.integer("seq") else {
                if let ifMatch { throw StoreError.versionMismatch(expected: ifMatch, actual: nil) }
                return false
            }
            if let installation = existing.text("installation_id") {
                throw StoreError.belongsToInstallation(registrationId: id, installationId: installation)
            }
            if let ifMatch, ifMatch != existing.integer("version") {
                throw StoreError.versionMismatch(expected: ifMatch, actual: existing.integer("version"))
            }
            try await connection.execute("DELETE FROM registrations WHERE seq = ?", [.integer(seq)])
            return true
        }
    }

    public func registrationIdState(hub: String, id: String) async throws -> RegistrationIdState {
        try await database.read { connection in
            let live = try await connection.query(
                "SELECT expires_at FROM registrations WHERE hub = ? AND registration_id = ?", [.text(hub), .text(id)]
            ).first
            if let live {
                if let expiry = live.date("expires_at"), expiry < Date() { return .unknown }
                return .registered
            }
            let issued = try await connection.query(
                "SELECT 1 AS issued FROM registration_ids WHERE hub = ? AND registration_id = ?", [.text(hub), .text(id)])
            return issued.isEmpty ? .unknown : .issued
        }
    }

    public func registrations(hub: String, matching query: RegistrationQuery, after cursor: RegistrationCursor?, limit: Int) async throws
        -> RegistrationPage
    {
        let (rows, next) = try await page(hub: hub, matching: query, after: cursor, limit: limit, columns: "r.*")
        return RegistrationPage(registrations: try Self.registrations(from: rows), next: next)
    }

    public func deliveryCandidates(
        hub: String, matching query: RegistrationQuery, reaching format: NotificationFormat?, after cursor: RegistrationCursor?, limit: Int
    ) async throws -> DeliveryCandidatePage {
        let (rows, next) = try await page(
            hub: hub, matching: query, reaching: format, after: cursor, limit: limit, columns: CandidateColumns.selected)
        guard let first = rows.first else { return DeliveryCandidatePage(candidates: [], next: next) }
        let columns = CandidateColumns(first)
        var headers: [String: [String: String]] = [:]
        return DeliveryCandidatePage(candidates: try rows.map { try columns.candidate($0, headers: &headers) }, next: next)
    }

    /// The rows of one page of `query`, with `columns` of `registrations r` (`r.seq` among
    /// them); with `format`, only the registrations a send of it is for, chosen by the database.
    private func page(
        hub: String, matching query: RegistrationQuery, reaching format: NotificationFormat? = nil, after cursor: RegistrationCursor?,
        limit: Int, columns: String
    ) async throws -> (rows: [SQLRow], next: RegistrationCursor?) {
        let limit = max(1, limit)
        let after = Int64(cursor?.position ?? 0)
        let dialect = database.dialect
        let reached = format.map(Self.condition(reaching:))
        let read = try await database.read { connection -> PageRead in
            // The query's own condition on `registrations r`; a tag expression with driving
            // tags is paged from the tag index instead.
            let filter: (sql: String, binds: [SQLValue])?
            switch query {
            case .all: filter = nil
            case .handle(let handle): filter = ("r.handle = ?", [.text(handle)])
            case .handlePrefix(let prefix):
                // From the handle index's first match on; the comparison of the prefix itself is
                // exact (handles compare as bytes on both databases).
                filter = (
                    "r.handle >= ? AND substr(r.handle, 1, CAST(? AS INTEGER)) = ?",
                    [.text(prefix), .integer(Int64(prefix.unicodeScalars.count)), .text(prefix)]
                )
            case .installation(let id): filter = ("r.installation_id = ?", [.text(id)])
            case .user(let id): filter = ("r.user_id = ?", [.text(id)])
            case .tagExpression(let expression):
                let counts = expression.drivingDependsOnCounts ? try await self.tagCounts(expression.tags, hub: hub, on: connection) : [:]
                guard let driving = expression.drivingTags(weighedBy: { counts[$0] ?? 0 })?.sorted(), let first = driving.first else {
                    filter = Self.compile(expression, dialect: dialect)
                    break
                }
                // Candidates carry a driving tag; what that already decides is not checked again.
                var remaining: TagExpression? = expression
                if expression.isDisjunctionOfTags {
                    remaining = nil
                } else if driving.count == 1 {
                    remaining = expression.assuming(first)
                }
                let among = Self.both(remaining.map { Self.compile($0, dialect: dialect) }, reached)
                if driving.count == 1, Tags.implicit(first) != nil {
                    return .rows(
                        try await Self.pageOfOwners(
                            hub: hub, carrying: first, among: among, after: after, limit: limit, columns: columns, dialect: dialect, on: connection))
                }
                let key = Self.lookaheadKey(hub: hub, driving: driving, limit: limit)
                return try await Self.pageByTags(
                    hub: hub, driving: driving, among: among, after: after,
                    limit: limit, columns: columns, dialect: dialect, known: cursor?.lookahead.flatMap { $0.key == key ? $0.bound : nil },
                    key: key, on: connection)
            }
            return .rows(
                try await Self.scan(hub: hub, filter: Self.both(filter, reached), after: after, limit: limit, columns: columns, on: connection))
        }
        switch read {
        case .rows(let page): return page
        case .range(let range):
            guard database.readsInParallel else { return (try await rows(in: range), RegistrationCursor(position: range.bound)) }
            // The next page's bound is read beside this page's rows, so that the next page
            // starts with its rows (`… && lang:en` over ten million registrations on
            // PostgreSQL: docs/benchmarks.md, eighteenth round).
            async let next = database.read { try await Self.bound(range.nextBound, on: $0) }
            let rows = try await rows(in: range)
            // The lookahead saves the next page a query; a failure to read it costs only that.
            let lookahead = (try? await next).map { RegistrationCursor.Lookahead(key: range.key, bound: $0) }
            return (rows, RegistrationCursor(position: range.bound, lookahead: lookahead))
        }
    }

    /// What a cursor's lookahead is good for: the pages of these driving tags in `hub`, of
    /// `limit` candidates each. Tags and hub names hold no control characters.
    static func lookaheadKey(hub: String, driving: [String], limit: Int) -> String {
        var key = hub
        for tag in driving {
            key += "\u{1F}"
            key += tag
        }
        key += "\u{1F}"
        key += String(limit)
        return key
    }

    /// A page read whole, or the range of rows that still has to be read for it.
    private enum PageRead: Sendable {
        case rows((rows: [SQLRow], next: RegistrationCursor?))
        case range(RangeRead)
    }

    /// The rows of `registrations r` in `(after, bound]` that meet `condition`, in order; and
    /// the query for the bound of the page after it, valid for the pages `key` names.
    private struct RangeRead: Sendable {
        let hub: String
        let after: Int64
        let bound: Int64
        let columns: String
        let condition: (sql: String, binds: [SQLValue])
        let nextBound: (sql: String, binds: [SQLValue])
        let key: String

        func rows(after start: Int64, upTo end: Int64, on connection: any SQLConnection) async throws -> [SQLRow] {
            try await connection.query(
                "SELECT \(columns) FROM registrations r WHERE r.hub = ? AND r.seq > ? AND r.seq <= ? AND \(condition.sql) ORDER BY r.seq",
                [.text(hub), .integer(start), .integer(end)] + condition.binds)
        }
    }

    /// A range's rows; where the database reads in parallel, its two halves at once, each on a
    /// connection of its own, so that one half is read by the server while the other's rows are
    /// read here (paging `Sports` over ten million registrations on PostgreSQL: 275,000
    /// targets/s against 240,000 read whole; docs/benchmarks.md, twelfth round).
    private func rows(in range: RangeRead) async throws -> [SQLRow] {
        let middle = range.after + (range.bound - range.after) / 2
        guard database.readsInParallel, middle > range.after else {
            return try await database.read { try await range.rows(after: range.after, upTo: range.bound, on: $0) }
        }
        async let upper = database.read { try await range.rows(after: middle, upTo: range.bound, on: $0) }
        let lower = try await database.read { try await range.rows(after: range.after, upTo: middle, on: $0) }
        return try await lower + upper
    }

    /// The registrations a send of `format` is for, as a condition on `registrations r`: what
    /// `DeliveryCandidate.isReached(by:)` decides in Swift. A template send takes the template
    /// registrations; a native one the native registrations of its platform, in any of its
    /// formats (`gcm` and `fcmv1` alike).
    static func condition(reaching format: NotificationFormat) -> (sql: String, binds: [SQLValue]) {
        reachingConditions[format]!
    }

    /// `condition(reaching:)` of every format, made once.
    private static let reachingConditions = Dictionary(uniqueKeysWithValues: NotificationFormat.allCases.map { ($0, makeCondition(reaching: $0)) })

    private static func makeCondition(reaching format: NotificationFormat) -> (sql: String, binds: [SQLValue]) {
        guard let platform = format.platform else { return ("r.template_body IS NOT NULL", []) }
        let formats = NativeFormat.allCases.filter { $0.platform == platform }
        return (
            "r.template_body IS NULL AND r.format IN (" + Self.placeholders(formats.count) + ")",
            formats.map { .text($0.rawValue) }
        )
    }

    /// Both conditions, either of which may be missing.
    static func both(_ first: (sql: String, binds: [SQLValue])?, _ second: (sql: String, binds: [SQLValue])?) -> (
        sql: String, binds: [SQLValue]
    )? {
        guard let first else { return second }
        guard let second else { return first }
        return ("(\(first.sql)) AND (\(second.sql))", first.binds + second.binds)
    }

    /// The tags `expression` would be paged from in `hub`: its driving tags that the fewest
    /// registrations carry.
    public func drivingTags(of expression: TagExpression, hub: String) async throws -> Set<String>? {
        try await database.read { connection in
            let counts = try await self.tagCounts(expression.tags, hub: hub, on: connection)
            return expression.drivingTags(weighedBy: { counts[$0] ?? 0 })
        }
    }

    /// How many registrations of `hub` carry each tag: SQLite's counts, kept by triggers, or
    /// PostgreSQL's planner estimate. Remembered for `TagCounts.lifetime`, since a page of a
    /// broadcast asks again; the choice they make is of speed only, never of what matches.
    /// Implicit tags (`$InstallationId:{…}`, `$UserId:{…}`; no other tag starts with `$`)
    /// stand for one installation's or one user's few registrations: they count as 1 and are
    /// not counted by SQLite either.
    private func tagCounts(_ tags: Set<String>, hub: String, on connection: any SQLConnection) async throws -> [String: Int] {
        var counts: [String: Int] = [:]
        let now = ContinuousClock.now
        for tag in tags {
            if tag.utf8.first == UInt8(ascii: "$") {
                counts[tag] = 1
                continue
            }
            if let known = remembered.count(hub: hub, tag: tag, at: now) {
                counts[tag] = known
                continue
            }
            let count: Int
            switch database.dialect {
            case .sqlite:
                count = Int(
                    try await connection.query(
                        "SELECT registrations FROM tag_counts WHERE hub = ? AND tag = ?", [.text(hub), .text(tag)]
                    ).first?.integer("registrations") ?? 0)
            case .postgres:
                // The first line reads like `Index Only Scan using … (cost=0.56..4.58 rows=1234 width=0)`.
                let plan = try await connection.query("EXPLAIN SELECT 1 FROM registration_tags WHERE hub = ? AND tag = ?", [.text(hub), .text(tag)])
                count = plan.first.flatMap { $0.text("QUERY PLAN") }.flatMap(Self.estimatedRows) ?? 0
            }
            remembered.remember(count, hub: hub, tag: tag, at: now)
            counts[tag] = count
        }
        return counts
    }

    /// Does now on PostgreSQL what its autovacuum does in time (after a bulk import, say): the
    /// estimates that pick the driving tags, and the visibility map that lets a page's
    /// candidates be read from the tag index alone. SQLite's counts are always current.
    public func refreshStatistics() async throws {
        guard database.dialect == .postgres else { return }
        // VACUUM runs outside a transaction block.
        try await database.writeStatement { connection in try await connection.execute("VACUUM (ANALYZE) registration_tags, registrations", []) }
    }

    /// The `rows=N` of a line of PostgreSQL's EXPLAIN.
    static func estimatedRows(_ line: String) -> Int? {
        guard let range = line.range(of: " rows=") else { return nil }
        return Int(line[range.upperBound...].prefix { $0.isASCII && $0.isNumber })
    }

    /// Registrations in `seq` order with an optional filter.
    private static func scan(
        hub: String, filter: (sql: String, binds: [SQLValue])?, after: Int64, limit: Int, columns: String, on connection: any SQLConnection
    ) async throws -> (rows: [SQLRow], next: RegistrationCursor?) {
        let condition = filter.map { " AND \($0.sql)" } ?? ""
        let rows = try await connection.query(
            "SELECT \(columns) FROM registrations r WHERE r.hub = ? AND r.seq > ?\(condition) ORDER BY r.seq LIMIT ?",
            [.text(hub), .integer(after)] + (filter?.binds ?? []) + [.integer(Int64(limit))])
        return (rows, rows.count == limit ? rows.last?.integer("seq").map { RegistrationCursor(position: $0) } : nil)
    }

    /// Starts from the tag index: a page covers the next `limit` registrations carrying any
    /// driving tag, and holds those of them that match. The page's last candidate is found
    /// first, from the index alone: each tag's range read in order, at most `limit` deep,
    /// merged. Then the matching rows up to it are read, so candidates that do not match never
    /// leave the database. Where the candidates are dense among the rows (`denseRange`), every
    /// row in the range is read, by the caller (`rows(in:)`), tested for a driving tag and then
    /// against `among` on the row's `tags` column; where they are sparse, only the candidates,
    /// here, found again in the tag index and tested against `among` (what their driving tag
    /// leaves open). A range read in row order is a few rows a
    /// page of the table; the candidates one by one are an index probe each, which cost
    /// PostgreSQL five times as much a page for `Sports || Music || Weather`. The bound is
    /// `known` where the page before read it ahead and found one; where it found none (fewer
    /// than a page left then), it is read again, since rows may have come since.
    private static func pageByTags(
        hub: String, driving: [String], among filter: (sql: String, binds: [SQLValue])?, after: Int64, limit: Int, columns: String,
        dialect: SQLDialect, known: Int64?, key: String, on connection: any SQLConnection
    ) async throws -> PageRead {
        // One implicit driving tag is read by `pageOfOwners`, without a bound (`page`).
        guard let first = driving.first else { return .rows(([], nil)) }
        let bound: Int64?
        if let known {
            bound = known
        } else {
            bound = try await Self.bound(boundQuery(hub: hub, driving: driving, after: after, limit: limit, dialect: dialect), on: connection)
        }
        if let bound, bound - after <= Int64(limit) * denseRange(dialect) {
            // The rows that carry no driving tag are in the range too; the tags are tested in
            // this order because the fewest rows carry the driving ones.
            let carriesDriving = compile(driving.dropFirst().reduce(.tag(first)) { .or($0, .tag($1)) }, dialect: dialect)
            return .range(
                RangeRead(
                    hub: hub, after: after, bound: bound, columns: columns, condition: both(carriesDriving, filter) ?? carriesDriving,
                    nextBound: boundQuery(hub: hub, driving: driving, after: bound, limit: limit, dialect: dialect), key: key))
        }
        let sources = carrying(driving, hub: hub, in: .registrations, dialect: dialect)
        let condition = filter.map { " AND \($0.sql)" } ?? ""
        let rows = try await connection.query(
            "SELECT \(columns) FROM registrations r WHERE r.seq IN ("
                + sources.map { "\($0.sql) AND seq > ? AND seq <= ?" }.joined(separator: " UNION ALL ") + ")\(condition) ORDER BY r.seq",
            sources.flatMap { $0.binds + [.integer(after), .integer(bound ?? Int64.max)] } + (filter?.binds ?? []))
        return .rows((rows, bound.map { RegistrationCursor(position: $0) }))
    }

    /// Where a page ends, by its `boundQuery`; nil when fewer than a page of candidates are left.
    static func bound(_ query: (sql: String, binds: [SQLValue]), on connection: any SQLConnection) async throws -> Int64? {
        try await connection.query(query.sql, query.binds).first?.integer("seq")
    }

    /// The query for the `limit`th candidate after `after` that carries one of `driving`: where
    /// a page of them ends. Several tags' ranges are merged, a registration with two of them
    /// counted once. PostgreSQL merges them in order (`UNION ALL`) and keeps a row that differs
    /// from the one before it (0.3–0.7 ms a page of three tags, where `UNION` hashed and sorted
    /// them in 1.8 ms); SQLite sorts for a window, and its `UNION` took half as long.
    static func boundQuery(hub: String, driving: [String], after: Int64, limit: Int, dialect: SQLDialect) -> (sql: String, binds: [SQLValue]) {
        let perTag = driving.map { tag in
            let source = carrying([tag], hub: hub, in: .registrations, dialect: dialect)[0]
            return (sql: source.sql + " AND seq > ? ORDER BY seq", binds: source.binds + [.integer(after)])
        }
        let ranges = perTag.map { "SELECT seq FROM (\($0.sql) LIMIT ?) AS t" }
        let candidates =
            driving.count == 1
            ? perTag[0].sql
            : dialect == .sqlite
                ? ranges.joined(separator: " UNION ") + " ORDER BY seq"
                : "SELECT seq FROM (SELECT seq, lag(seq) OVER (ORDER BY seq) AS previous FROM ("
                    + ranges.joined(separator: " UNION ALL ") + ") AS merged) AS candidates WHERE previous IS NULL OR previous <> seq ORDER BY seq"
        let binds = perTag.flatMap { $0.binds + (driving.count == 1 ? [] : [.integer(Int64(limit))]) }
        return ("\(candidates) LIMIT 1 OFFSET ?", binds + [.integer(Int64(limit - 1))])
    }

    /// A page whose one driving tag is implicit (`$UserId:{…}`, `$InstallationId:{…}`): its
    /// owners are one user's or one installation's registrations, found in order through the
    /// index on the column the tag names, so the page's candidates are read with their rows in
    /// one statement rather than bounded first and read again. A single-user send's audience
    /// was those two statements in the writer's transaction (docs/benchmarks.md, fifteenth
    /// round). At most `limit` candidates are read, matching `among` or not; those that do not
    /// are dropped here, and a page of `limit` candidates ends at its last. (Several driving
    /// tags keep the bound: their owners merged without a limit each would be read whole for
    /// every page.)
    private static func pageOfOwners(
        hub: String, carrying tag: String, among filter: (sql: String, binds: [SQLValue])?, after: Int64, limit: Int, columns: String,
        dialect: SQLDialect, on connection: any SQLConnection
    ) async throws -> (rows: [SQLRow], next: RegistrationCursor?) {
        // An implicit tag's owners are rows of `registrations` itself, read here in one pass.
        let owners = owners(carrying: [tag], hub: hub, in: .registrations, dialect: dialect)[0]
        precondition(owners.from == "registrations", "an implicit tag's owners are registrations")
        let sql = ownerPages.text(for: OwnerPageShape(columns: columns, filter: filter?.sql, owners: owners.sql)) {
            let matches = $0.filter.map { "CASE WHEN (\($0)) THEN 1 ELSE 0 END" } ?? "1"
            return "SELECT \($0.columns), \(matches) AS pushhub_matches FROM registrations r WHERE \($0.owners) AND r.seq > ? ORDER BY r.seq LIMIT ?"
        }
        let rows = try await connection.query(sql, (filter?.binds ?? []) + owners.binds + [.integer(after), .integer(Int64(limit))])
        let next = rows.count == limit ? rows.last?.integer("seq").map { RegistrationCursor(position: $0) } : nil
        return (rows.filter { $0.integer("pushhub_matches") == 1 }, next)
    }

    /// What the text of a `pageOfOwners` statement is made of.
    struct OwnerPageShape: Hashable, Sendable {
        var columns: String
        var filter: String?
        var owners: String
    }

    /// The texts of `pageOfOwners`' statements, each made once: a single-user send's
    /// audience is one, the same for every user but for its values.
    static let ownerPages = SQLTexts<OwnerPageShape>()

    /// How many rows a page's range may span for each candidate it holds and still be read
    /// whole. On PostgreSQL a row read in order costs about a tenth of a candidate found by an
    /// index probe (by EXPLAIN ANALYZE: 0.9 ms for a range of 5,000 rows against 1.8 ms for the
    /// 1,000 candidates in it). SQLite's probes are cheap: at 5 rows a candidate (a million
    /// registrations, `… && lang:en`) the range took 0.34 s against the probes' 0.25, and at 2
    /// the two were even.
    static func denseRange(_ dialect: SQLDialect) -> Int64 {
        switch dialect {
        case .postgres: 8
        case .sqlite: 2
        }
    }

    /// What a tag's condition on a `tags` column searches for: the tag between commas.
    static func searched(_ tag: String) -> SQLValue { .text("," + tag + ",") }

    /// A tag expression as a condition on `registrations r`, read from the row's own `tags`
    /// column (comma-joined, and no tag holds a comma): a string search in the row the page
    /// reads anyway costs PostgreSQL a third of what an index probe per tag did. Chains of one
    /// operator become one flat list and double negations cancel, so the SQL nests no deeper
    /// than the expression's parentheses and negations (which `TagExpression.parse` bounds).
    static func compile(_ expression: TagExpression, dialect: SQLDialect, column: String = "r.tags") -> (sql: String, binds: [SQLValue]) {
        switch expression {
        case .tag(let tag):
            let find = dialect == .postgres ? "strpos" : "instr"
            return ("\(find)(',' || \(column) || ',', ?) > 0", [searched(tag)])
        case .not(.not(let inner)):
            return compile(inner, dialect: dialect, column: column)
        case .not(let inner):
            let compiled = compile(inner, dialect: dialect, column: column)
            return ("NOT (\(compiled.sql))", compiled.binds)
        case .and, .or:
            let isAnd: Bool = if case .and = expression { true } else { false }
            var operands: [TagExpression] = []
            var pending = [expression]
            while let next = pending.popLast() {
                switch (next, isAnd) {
                case (.and(let l, let r), true), (.or(let l, let r), false): pending += [r, l]
                default: operands.append(next)
                }
            }
            let compiled = operands.map { compile($0, dialect: dialect, column: column) }
            return ("(" + compiled.map(\.sql).joined(separator: isAnd ? " AND " : " OR ") + ")", compiled.flatMap(\.binds))
        }
    }

    /// The registrations of an installation as `pushhub_write_installation` takes them: a JSON
    /// array of objects named by column, from `columns(of:)`. Written byte by byte: through
    /// JSONEncoder (a dictionary a row) it was a seventh of the CPU an upsert cost its writer.
    static func installationRows(_ registrations: [(registration: Registration, columns: [SQLValue])]) -> String {
        var out = JSONBytes(capacity: 512 * registrations.count)
        out.array(registrations) { row, out in
            out.byte(UInt8(ascii: "{"))
            out.key("registration_id", first: true)
            out.string(row.registration.registrationId)
            for (name, value) in zip(columnNames, row.columns) {
                out.key(name)
                out.value(value)
            }
            out.byte(UInt8(ascii: "}"))
        }
        return String(decoding: out.bytes, as: UTF8.self)
    }

    /// What an update needs of the row it updates: where it is and the tags it had.
    struct StoredRow {
        var seq: Int64
        var tags: Set<String>

        init?(_ row: SQLRow) {
            guard let seq = row.integer("seq") else { return nil }
            self.seq = seq
            tags = Set(Self.splitTags(row.text("tags")))
        }

        /// The `tags` column: comma-joined, since no tag, implicit tag or installation id can
        /// hold a comma. Split by bytes: splitting by characters was a quarter of the
        /// dispatcher's CPU on a broadcast.
        static func splitTags(_ column: String?) -> [String] {
            guard var column, !column.isEmpty else { return [] }
            // One pass over the bytes, each tag made straight from its slice (`split` built an
            // array of slices first: a tenth of the dispatcher's CPU on a broadcast).
            return column.withUTF8 { bytes in
                var tags: [String] = []
                var start = 0
                for index in 0...bytes.count where index == bytes.count || bytes[index] == UInt8(ascii: ",") {
                    if index > start { tags.append(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)) }
                    start = index + 1
                }
                return tags
            }
        }
    }

    /// Inserts a registration, or updates the row `existing` in place.
    private static func writeRegistration(_ registration: Registration, existing: StoredRow?, on connection: any SQLConnection) async throws {
        let values = try columns(of: registration)
        if let existing {
            try await updateRegistration(registration, columns: values, existing: existing, on: connection)
        } else {
            try await insertNew([(registration, values)], on: connection)
        }
    }

    /// Updates the row `existing` in place with `columns` (`columns(of: registration)`). Of its
    /// tag rows only those that changed are written: an update that keeps the tags leaves the
    /// tag index (and SQLite's counts) alone.
    private static func updateRegistration(
        _ registration: Registration, columns: [SQLValue], existing: StoredRow, on connection: any SQLConnection
    ) async throws {
        try await connection.execute(updateRegistration, columns + [.integer(existing.seq)])
        let removed = existing.tags.subtracting(registration.tags)
        if !removed.isEmpty {
            // By the rows' key: PostgreSQL has no index by seq alone (version 19).
            try await connection.execute(
                "DELETE FROM registration_tags WHERE hub = ? AND tag IN (" + Self.placeholders(removed.count)
                    + ") AND seq = ?",
                [.text(registration.hub)] + removed.sorted().map(SQLValue.text) + [.integer(existing.seq)])
        }
        let added = registration.tags.filter { !existing.tags.contains($0) }
        try await insertTags(added.flatMap { [.text(registration.hub), .text($0), .integer(existing.seq)] }, on: connection)
    }

    /// `?, ?, …`: `count` binds in a list.
    static func placeholders(_ count: Int) -> String { Array(repeating: "?", count: count).joined(separator: ", ") }

    /// The names of `columns(of:)`.
    static let columnNames = [
        "format", "handle", "p256dh", "auth", "tags", "template_name", "template_body", "template_headers", "template_expiry",
        "installation_id", "user_id", "expires_at", "version", "updated_at",
    ]

    /// Where `version` is in `columns(of:)`.
    static let versionColumn = columnNames.firstIndex(of: "version")!

    /// An INSERT of `rows` registrations, each bound as `columns(of:)`, then hub and id,
    /// returning each one's `seq`, hub and id.
    static func insertRegistrations(rows: Int) -> String {
        rows <= fewRegistrations.count ? fewRegistrations[rows - 1] : newRegistrations(rows: rows)
    }

    /// An INSERT of `rows` registrations that returns where each went.
    private static func newRegistrations(rows: Int) -> String {
        insert(into: "registrations", columnNames + ["hub", "registration_id"], rows: rows) + " RETURNING seq, hub, registration_id"
    }

    /// The INSERTs of single registrations and of an installation's (its native one and one a
    /// template), made once: of 1 to 11 rows.
    private static let fewRegistrations = (1...1 + Installation.maximumTemplates).map(newRegistrations(rows:))

    /// `INSERT INTO table (columns) VALUES (?, …), …` with `rows` rows.
    static func insert(into table: String, _ columns: [String], rows: Int) -> String {
        let row = "(" + Self.placeholders(columns.count) + ")"
        return "INSERT INTO \(table) (\(columns.joined(separator: ", "))) VALUES " + Array(repeating: row, count: rows).joined(separator: ", ")
    }

    /// An UPDATE of one registration, bound as `columns(of:)`, then its `seq`.
    static let updateRegistration = "UPDATE registrations SET " + columnNames.map { "\($0) = ?" }.joined(separator: ", ") + " WHERE seq = ?"

    /// A registration's columns from `format` to `updated_at`, in the order of the INSERT and
    /// UPDATE statements.
    static func columns(of registration: Registration) throws -> [SQLValue] {
        let template = registration.template
        let headers = template?.headers.map(JSONText.object)
        return [
            .text(registration.format.rawValue), .text(registration.handle), SQLValue(registration.webPush?.p256dh),
            SQLValue(registration.webPush?.auth), .text(registration.tags.joined(separator: ",")), SQLValue(template?.name), SQLValue(template?.body),
            SQLValue(headers), SQLValue(template?.expiry), SQLValue(registration.installationId), SQLValue(registration.userId),
            SQLValue(registration.expiresAt), .integer(registration.version), SQLValue(registration.updatedAt),
        ]
    }

    /// Registrations from rows of `registrations`, each column found by name once for all of
    /// them, not once a row.
    static func registrations(from rows: [SQLRow]) throws -> [Registration] {
        guard let first = rows.first else { return [] }
        let columns = RegistrationColumns(first)
        var headers: [String: [String: String]] = [:]
        return try rows.map { try columns.registration($0, headers: &headers) }
    }

    /// Where each column of a `registrations` row is.
    struct RegistrationColumns {
        /// The columns a delivery needs; the rest of a registration's are below.
        let delivery: CandidateColumns
        let hub, tags, templateName, installationId, userId, version, updatedAt: Int?

        init(_ row: SQLRow) {
            delivery = CandidateColumns(row)
            let columns = row.columns
            (hub, tags, templateName) = (columns["hub"], columns["tags"], columns["template_name"])
            (installationId, userId, version, updatedAt) = (columns["installation_id"], columns["user_id"], columns["version"], columns["updated_at"])
        }

        func registration(_ row: SQLRow) throws -> Registration {
            var headers: [String: [String: String]] = [:]
            return try registration(row, headers: &headers)
        }

        /// A row's registration: its delivery candidate, and the rest. `headers` keeps the
        /// template headers decoded so far (`CandidateColumns.candidate`).
        func registration(_ row: SQLRow, headers decoded: inout [String: [String: String]]) throws -> Registration {
            let candidate = try delivery.candidate(row, headers: &decoded)
            guard let hub = row.text(at: hub) else { throw SQLError(message: "a registration row is incomplete") }
            var template = candidate.template
            template?.name = row.text(at: templateName)
            return Registration(
                registrationId: candidate.registrationId, hub: hub, format: candidate.format, handle: candidate.handle, webPush: candidate.webPush,
                tags: StoredRow.splitTags(row.text(at: tags)), template: template, installationId: row.text(at: installationId),
                userId: row.text(at: userId), expiresAt: candidate.expiresAt, version: row.integer(at: version) ?? 1,
                updatedAt: row.date(at: updatedAt) ?? Date(timeIntervalSince1970: 0))
        }
    }

    /// Where each column of a `deliveryCandidates` row is: the columns a delivery needs and no
    /// others (a broadcast's dispatcher made every registration whole, tags split and times
    /// read, to keep a fifth of it).
    struct CandidateColumns {
        static let selected =
            "r.seq, r.registration_id, r.format, r.handle, r.p256dh, r.auth, r.template_body, r.template_headers, r.template_expiry, r.expires_at"
        let id, format, handle, p256dh, auth, templateBody, templateHeaders, templateExpiry, expiresAt: Int?

        init(_ row: SQLRow) {
            let columns = row.columns
            (id, format, handle, p256dh, auth) = (
                columns["registration_id"], columns["format"], columns["handle"], columns["p256dh"], columns["auth"]
            )
            (templateBody, templateHeaders, templateExpiry, expiresAt) =
                (columns["template_body"], columns["template_headers"], columns["template_expiry"], columns["expires_at"])
        }

        /// A row's candidate; `headers` keeps the template headers decoded so far by their
        /// JSON text, since a page's templates nearly always share theirs: one JSONDecoder run
        /// per distinct text, not one per WNS template registration.
        func candidate(_ row: SQLRow, headers decoded: inout [String: [String: String]]) throws -> DeliveryCandidate {
            guard let id = row.text(at: id), let formatText = row.text(at: format), let format = NativeFormat(rawValue: formatText),
                let handle = row.text(at: handle)
            else { throw SQLError(message: "a registration row is incomplete") }
            let template = try row.text(at: templateBody).map { body in
                Template(
                    body: body, headers: try row.text(at: templateHeaders).map { try Self.headers($0, decoded: &decoded) },
                    expiry: row.text(at: templateExpiry))
            }
            let webPush = row.text(at: p256dh).flatMap { p256dh in row.text(at: auth).map { WebPushKeys(p256dh: p256dh, auth: $0) } }
            return DeliveryCandidate(
                registrationId: id, format: format, handle: handle, webPush: webPush, template: template, expiresAt: row.date(at: expiresAt))
        }

        private static func headers(_ text: String, decoded: inout [String: [String: String]]) throws -> [String: String] {
            if let known = decoded[text] { return known }
            let headers = try JSONDecoder().decode([String: String].self, from: Data(text.utf8))
            if decoded.count < 64 { decoded[text] = headers }
            return headers
        }
    }

    // MARK: Users

    public func setUser(name: String, passwordHash: String) async throws {
        try await database.write { connection in
            try await connection.execute(
                """
                INSERT INTO users (name, password_hash, created_at) VALUES (?, ?, ?)
                ON CONFLICT (name) DO UPDATE SET password_hash = excluded.password_hash
                """, [.text(name), .text(passwordHash), SQLValue(Date())])
        }
    }

    public func passwordHash(user: String) async throws -> String? {
        try await database.read { connection in
            try await connection.query("SELECT password_hash FROM users WHERE name = ?", [.text(user)]).first?.text("password_hash")
        }
    }

    /// The stored form of an installation.
    static func document(_ installation: Installation) -> String {
        String(decoding: installation.wireJSON(), as: UTF8.self)
    }
}

/// Tag counts remembered for a while, at most `capacity` of them.
final class TagCounts: Sendable {
    static let lifetime = Duration.seconds(30)
    static let capacity = 10_000

    private struct Key: Hashable {
        var hub: String
        var tag: String
    }

    private let counts = Mutex<[Key: (count: Int, until: ContinuousClock.Instant)]>([:])

    func count(hub: String, tag: String, at now: ContinuousClock.Instant) -> Int? {
        counts.withLock { counts in
            guard let known = counts[Key(hub: hub, tag: tag)], known.until > now else { return nil }
            return known.count
        }
    }

    func remember(_ count: Int, hub: String, tag: String, at now: ContinuousClock.Instant) {
        counts.withLock { counts in
            if counts.count >= Self.capacity {
                counts = counts.filter { $0.value.until > now }
                if counts.count >= Self.capacity { counts.removeAll(keepingCapacity: true) }
            }
            counts[Key(hub: hub, tag: tag)] = (count, now + Self.lifetime)
        }
    }
}
