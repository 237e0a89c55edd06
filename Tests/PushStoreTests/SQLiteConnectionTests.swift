import Foundation
import PushStore
import Synchronization
import Testing

@Suite("SQLite connections", .timeLimit(.minutes(1)))
struct SQLiteConnectionTests {
    @Test("readers keep a query's temporary tables in memory, not in files under /var/tmp, and the writer its savepoint journals")
    func temporaryStoreInMemory() async throws {
        try await Self.withDatabase("temp", table: nil, readers: 2) { database, _ in
            // 2 is MEMORY, 0 the build's default (a file once past a small size).
            let written = try await database.write { try await $0.query("PRAGMA temp_store", []).first?.integer("temp_store") }
            #expect(written == 2)
            // The migrations run with the writer's journals in files (a copy of a whole table).
            let migrating = try await database.migrating {
                try await database.write { try await $0.query("PRAGMA temp_store", []).first?.integer("temp_store") }
            }
            #expect(migrating == 0)
            let after = try await database.write { try await $0.query("PRAGMA temp_store", []).first?.integer("temp_store") }
            #expect(after == 2)
            for _ in 0..<2 {
                let read = try await database.read { try await $0.query("PRAGMA temp_store", []).first?.integer("temp_store") }
                #expect(read == 2)
            }
        }
    }

    @Test("a statement's columns are read again after the schema changed: `*` finds a column added since, and a name given twice finds the first")
    func columnsAfterSchemaChange() async throws {
        try await Self.withDatabase("columns", table: "probe (id INTEGER PRIMARY KEY, name TEXT)") { database, path in
            try await database.write { try await $0.execute("INSERT INTO probe (id, name) VALUES (1, 'a')", []) }
            let before = try await database.read { try await $0.query("SELECT * FROM probe", []) }
            #expect(before.first?.text("name") == "a" && before.first?.text("added") == nil)
            // Another process's migration adds a column; the reader's cached statement is compiled again.
            let other = try SQLiteDatabase(path: path, readers: 1)
            try await other.write { try await $0.execute("ALTER TABLE probe ADD COLUMN added TEXT DEFAULT 'new'", []) }
            await other.close()
            let after = try await database.read { try await $0.query("SELECT * FROM probe", []) }
            #expect(after.first?.text("name") == "a" && after.first?.text("added") == "new")
            let twice = try await database.read { try await $0.query("SELECT name, id AS name FROM probe", []) }
            #expect(twice.first?.text("name") == "a")
        }
    }

    @Test("a statement's count of changed rows: one row made, none on a conflict, every row an UPDATE or DELETE changed, not a trigger's")
    func countsChangedRows() async throws {
        try await Self.withDatabase("changes", table: "rows (id TEXT PRIMARY KEY, n INTEGER)") { database, _ in
            let counts = try await database.write { connection -> [Int?] in
                try await connection.execute("CREATE TABLE log (id TEXT)", [])
                try await connection.execute(
                    "CREATE TRIGGER logged AFTER UPDATE ON rows BEGIN INSERT INTO log VALUES (new.id); INSERT INTO log VALUES (new.id); END", [])
                let insert = "INSERT INTO rows (id, n) VALUES (?, 1) ON CONFLICT DO NOTHING"
                return [
                    try await connection.executeCountingChanges(insert, [.text("a")]),
                    try await connection.executeCountingChanges(insert, [.text("a")]),
                    try await connection.executeCountingChanges(insert, [.text("b")]),
                    try await connection.executeCountingChanges("UPDATE rows SET n = n + 1", []),
                    try await connection.executeCountingChanges("DELETE FROM rows WHERE id = ?", [.text("z")]),
                    try await connection.executeCountingChanges("DELETE FROM rows", []),
                ]
            }
            #expect(counts == [1, 0, 1, 2, 0, 2])
        }
    }

    @Test("text parameters are stored as given: small and large, many in one statement, one after another, a zero byte and what follows it")
    func textParameters() async throws {
        // Over the bytes a connection binds in place (64 KiB), bound with copies instead.
        let large = String(repeating: "ü-", count: 40_000)
        let many = (0..<300).map { "t\($0)-" + String(repeating: "x", count: $0 % 40) }
        try await Self.withDatabase("binds", table: "texts (id INTEGER PRIMARY KEY, a TEXT, b TEXT, c INTEGER)") { database, _ in
            let rows = try await database.write { connection -> [SQLRow] in
                let insert = "INSERT INTO texts (id, a, b, c) VALUES (?, ?, ?, ?)"
                try await connection.execute(insert, [.integer(1), .text("short"), .text("a longer text than fits inline, ü"), .integer(7)])
                try await connection.execute(insert, [.integer(2), .text(""), .null, .integer(8)])
                try await connection.execute(insert, [.integer(3), .text("before\u{0}after"), .text("x"), .null])
                try await connection.execute(insert, [.integer(6), .text("next"), .text(large), .null])
                // Run again with fewer values: the ones not given are NULL, not the texts before.
                try await connection.execute(insert, [.integer(7), .text("only a")])
                try await connection.execute(insert, [.integer(4), .text(large), .text("after the large one"), .integer(9)])
                try await connection.execute(insert, [.integer(5), .text("s"), .text("t"), .integer(10)])
                // 300 texts in one statement: an uncached statement, bound in place.
                try await connection.execute(
                    "INSERT INTO texts (id, a) VALUES " + Array(repeating: "(?, ?)", count: many.count).joined(separator: ", "),
                    many.enumerated().flatMap { [SQLValue.integer(Int64(100 + $0.offset)), .text($0.element)] })
                return try await connection.query(
                    "SELECT id, a, b, c FROM texts WHERE id < ? OR a = ? ORDER BY id", [.integer(100), .text(many[299])])
            }
            #expect(rows.map { $0.integer("id") } == [1, 2, 3, 4, 5, 6, 7, 399])
            #expect(rows[0].text("a") == "short" && rows[0].text("b") == "a longer text than fits inline, ü" && rows[0].integer("c") == 7)
            #expect(rows[1].text("a") == "" && rows[1].text("b") == nil)
            // All of it: a text ended at U+0000 made "alice\0x" the user alice to a lookup.
            #expect(rows[2].text("a") == "before\u{0}after" && rows[2].text("b") == "x" && rows[2].integer("c") == nil)
            #expect(rows[3].text("a") == large && rows[3].text("b") == "after the large one")
            #expect(rows[4].text("a") == "s" && rows[4].text("b") == "t")
            #expect(rows[5].text("a") == "next" && rows[5].text("b") == large)
            #expect(rows[6].text("a") == "only a" && rows[6].text("b") == nil && rows[6].integer("c") == nil)
            #expect(rows[7].text("a") == many[299])
            let stored = try await database.read { try await $0.query("SELECT a FROM texts WHERE id >= 100 ORDER BY id", []) }
            #expect(stored.map { $0.text("a") } == many)
        }
    }

    @Test("a write whose transaction cannot begin (another process holds the database) is not run, and its caller is told")
    func writeNotRunWhenBeginFails() async throws {
        try await Self.withDatabase("busy", table: "rows (id INTEGER PRIMARY KEY)") { database, path in
            // Another writer of the same file holds its write transaction open.
            let other = try SQLiteDatabase(path: path, readers: 1)
            let (started, startedGo) = AsyncStream.makeStream(of: Void.self)
            let (release, releaseGo) = AsyncStream.makeStream(of: Void.self)
            let holder = Task {
                try await other.write { connection in
                    try await connection.execute("INSERT INTO rows VALUES (1)", [])
                    startedGo.yield()
                    for await _ in release { break }
                }
            }
            for await _ in started { break }
            // SQLite waits its busy time-out (5 s), then BEGIN IMMEDIATE fails. The other writer
            // lets go a second later: a body run anyway, outside a transaction, would then have
            // written its row for good while its caller heard of a failure.
            let refused = Task { try await database.write { try await $0.execute("INSERT INTO rows VALUES (2)", []) } }
            try await Task.sleep(for: .seconds(6))
            releaseGo.yield()
            try await holder.value
            await #expect(throws: SQLError.self) { try await refused.value }
            let ids = try await database.read { try await $0.query("SELECT id FROM rows ORDER BY id", []).compactMap { $0.integer("id") } }
            #expect(ids == [1], "the refused write left nothing behind")
            await other.close()
        }
    }

    /// SQLite's temporary files, open in this process: they are unlinked as they open, so
    /// only /proc/self/fd still names them.
    static func openTemporaryFiles() -> Int {
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return descriptors.filter { ((try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)")) ?? "").contains("etilqs_") }
            .count
    }

    @Test("a guarded write's savepoint journal stays in memory past SQLite's 64 KiB, where it used to become a file")
    func savepointJournalInMemory() async throws {
        try await Self.withPages("journal") { database, _ in
            // Rows of 3 kB, each on a page of its own; existing pages are what a savepoint journals.
            try await database.write { connection in
                for id in 0..<3_000 { try await connection.execute("INSERT INTO pages VALUES (?, zeroblob(3000))", [.integer(Int64(id))]) }
            }
            // 200 pages changed in one write: 800 kB of journal. And the next write's too, in the
            // same transaction when it comes while the first one runs. (Writes run in savepoints
            // when they must run once, or after one failed.)
            async let first = database.writeOnce { connection in
                try await connection.execute("UPDATE pages SET filler = zeroblob(3001) WHERE id < 200", [])
                return Self.openTemporaryFiles()
            }
            async let second = database.writeOnce { connection in
                try await connection.execute("UPDATE pages SET filler = zeroblob(3002) WHERE id >= 2800", [])
                return Self.openTemporaryFiles()
            }
            #expect(try await [first, second] == [0, 0])
        }
    }

    /// Holds the writer with a write of its own while `writes` queue behind it, in their order,
    /// to share the next transaction; returns their tasks.
    static func sharingOneTransaction(
        _ database: SQLiteDatabase, _ writes: [@Sendable (SQLiteDatabase) async throws -> Void]
    ) async throws -> [Task<Void, any Error>] {
        let (held, heldGo) = AsyncStream.makeStream(of: Void.self)
        let (release, releaseGo) = AsyncStream.makeStream(of: Void.self)
        let holder = Task {
            try await database.write { _ in
                heldGo.yield()
                for await _ in release { break }
            }
        }
        for await _ in held { break }
        var tasks: [Task<Void, any Error>] = []
        for write in writes {
            tasks.append(Task { try await write(database) })
            while database.waitingWrites < tasks.count { try await Task.sleep(for: .milliseconds(5)) }
        }
        releaseGo.yield()
        try await holder.value
        return tasks
    }

    /// A new database with a table of `rows`, closed and removed after `body`.
    static func withRows(
        _ name: String, guardedAfterFailure: Duration = SQLiteDatabase.guardedAfterFailure, _ body: (SQLiteDatabase) async throws -> Void
    ) async throws {
        try await withDatabase(name, table: "rows (id INTEGER PRIMARY KEY)", guardedAfterFailure: guardedAfterFailure) { database, _ in
            try await body(database)
        }
    }

    static func ids(_ database: SQLiteDatabase) async throws -> [Int64] {
        try await database.read { try await $0.query("SELECT id FROM rows ORDER BY id", []).compactMap { $0.integer("id") } }
    }

    /// A write of one row.
    static func insert(_ id: Int, runs: Runs? = nil) -> @Sendable (SQLiteDatabase) async throws -> Void {
        { database in
            try await database.write { connection in
                runs?.add()
                try await connection.execute("INSERT INTO rows VALUES (?)", [.integer(Int64(id))])
            }
        }
    }

    /// A write of one row that then throws.
    static func insertThenRefuse(_ id: Int) -> @Sendable (SQLiteDatabase) async throws -> Void {
        { database in
            try await database.write { connection in
                try await connection.execute("INSERT INTO rows VALUES (?)", [.integer(Int64(id))])
                throw Refused()
            }
        }
    }

    /// A write that reads, then throws before writing anything: as a PATCH of an installation
    /// that is not there.
    static func readThenRefuse(runs: Runs? = nil) -> @Sendable (SQLiteDatabase) async throws -> Void {
        { database in
            try await database.write { connection in
                runs?.add()
                _ = try await connection.query("SELECT id FROM rows WHERE id = 9", [])
                throw Refused()
            }
        }
    }

    struct Refused: Error {}

    /// How many times a body ran.
    final class Runs: Sendable {
        private let count = Atomic(0)
        func add() { count.wrappingAdd(1, ordering: .relaxed) }
        var value: Int { count.load(ordering: .relaxed) }
    }

    @Test(
        "writes share a transaction without savepoints; one that throws is undone alone: the transaction runs again with each write in a savepoint, and so do those of the next second"
    )
    func failedWriteUndoneAlone() async throws {
        try await Self.withRows("unguarded") { database in
            #expect(database.writeRuns == WriteRuns(batches: 1, guarded: 0, runAgain: 0))
            let firstRuns = Runs()
            // The second's row is in the transaction when it throws.
            let writes = try await Self.sharingOneTransaction(database, [Self.insert(1, runs: firstRuns), Self.insertThenRefuse(2), Self.insert(3)])
            try await writes[0].value
            await #expect(throws: Refused.self) { try await writes[1].value }
            try await writes[2].value
            #expect(try await Self.ids(database) == [1, 3], "the failed write's row is gone, the others' are in")
            #expect(firstRuns.value == 2, "the write before the failure ran again")
            // The holder's transaction, the one rolled back and its run again, guarded.
            #expect(database.writeRuns == WriteRuns(batches: 4, guarded: 1, runAgain: 1))
            // Within the next second writes are guarded.
            try await Self.insert(4)(database)
            #expect(database.writeRuns == WriteRuns(batches: 5, guarded: 2, runAgain: 1))
        }
    }

    @Test("a write that must run once shares a transaction guarded: a failure beside it does not run it again")
    func writeOnceNotRunAgain() async throws {
        try await Self.withRows("once") { database in
            let onceRuns = Runs()
            let once: @Sendable (SQLiteDatabase) async throws -> Void = { database in
                try await database.writeOnce { connection in
                    onceRuns.add()
                    try await connection.execute("INSERT INTO rows VALUES (1)", [])
                }
            }
            let writes = try await Self.sharingOneTransaction(database, [once, Self.insertThenRefuse(2)])
            try await writes[0].value
            await #expect(throws: Refused.self) { try await writes[1].value }
            #expect(onceRuns.value == 1)
            #expect(database.writeRuns == WriteRuns(batches: 3, guarded: 1, runAgain: 0))
            #expect(try await Self.ids(database) == [1])
        }
    }

    @Test("a write that throws before it wrote anything is told at once: the transaction goes on, nothing runs again")
    func failureBeforeWritingTold() async throws {
        try await Self.withRows("readfail") { database in
            let firstRuns = Runs()
            let writes = try await Self.sharingOneTransaction(database, [Self.insert(1, runs: firstRuns), Self.readThenRefuse(), Self.insert(3)])
            try await writes[0].value
            await #expect(throws: Refused.self) { try await writes[1].value }
            try await writes[2].value
            #expect(try await Self.ids(database) == [1, 3])
            #expect(firstRuns.value == 1)
            #expect(database.writeRuns == WriteRuns(batches: 3, guarded: 0, runAgain: 0))
        }
    }

    @Test(
        "a write told of its failure before it wrote is not run again when a later one fails after writing: its body runs once, its caller hears once"
    )
    func toldNotRunAgain() async throws {
        try await Self.withRows("toldonce") { database in
            let (firstRuns, notFoundRuns) = (Runs(), Runs())
            let writes = try await Self.sharingOneTransaction(
                database, [Self.insert(1, runs: firstRuns), Self.readThenRefuse(runs: notFoundRuns), Self.insertThenRefuse(2), Self.insert(3)])
            try await writes[0].value
            await #expect(throws: Refused.self) { try await writes[1].value }
            await #expect(throws: Refused.self) { try await writes[2].value }
            try await writes[3].value
            #expect(try await Self.ids(database) == [1, 3])
            #expect(notFoundRuns.value == 1, "told once, never run again")
            #expect(firstRuns.value == 2, "the others ran again, guarded")
            #expect(database.writeRuns == WriteRuns(batches: 4, guarded: 1, runAgain: 1))
        }
    }

    @Test("writes are guarded for the time after a failure, then run without savepoints again")
    func guardedWindowEnds() async throws {
        // Ten seconds: with one, a loaded run of the whole suite (this test took 75 s in it)
        // let the window close before the next write.
        try await Self.withRows("window", guardedAfterFailure: .seconds(10)) { database in
            await #expect(throws: Refused.self) { try await Self.insertThenRefuse(1)(database) }
            #expect(database.writeRuns == WriteRuns(batches: 3, guarded: 1, runAgain: 1))
            try await Self.insert(2)(database)
            #expect(database.writeRuns == WriteRuns(batches: 4, guarded: 2, runAgain: 1))
            try await Task.sleep(for: .milliseconds(10_300))
            try await Self.insert(3)(database)
            #expect(database.writeRuns == WriteRuns(batches: 5, guarded: 2, runAgain: 1))
            #expect(try await Self.ids(database) == [2, 3])
        }
    }

    @Test("the log is copied into the database beside the writer once it passes its threshold, so it starts again and stays bounded")
    func checkpointBesideTheWriter() async throws {
        try await Self.withDatabase("checkpoint", table: Self.pagesTable, checkpointPages: 100) { database, path in
            // 150 writes of 40 pages, one after the other: 6,000 pages, 25 MB of log without a
            // checkpoint. One beside the writer never catches up with a steady stream of writes;
            // the writer copies the rest past twice the threshold, and the log starts again.
            for round in 0..<150 {
                try await database.write { connection in
                    for id in 0..<40 {
                        try await connection.execute("INSERT INTO pages VALUES (?, zeroblob(3000))", [.integer(Int64(round * 40 + id))])
                    }
                }
            }
            let log = try #require(try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int)
            // Its size is its longest: while the checkpoint beside the writer runs (long, when the
            // whole suite starves its thread: 1,741 pages once), the writer's own gets SQLITE_BUSY.
            // Half of what 6,000 pages without a checkpoint would be.
            #expect(log < 3_000 * 4_096, "the log holds \(log / 4_096) pages")
            let rows = try await database.read { try await $0.query("SELECT count(*) AS n FROM pages", []).first?.integer("n") }
            #expect(rows == 6_000)
        }
    }

    /// Runs `body` with a database in a new file holding an empty table of pages, then removes
    /// the file, its log and every copy `reopenedCopy` made of them.
    static func withPages(_ name: String, _ body: (SQLiteDatabase, String) async throws -> Void) async throws {
        try await withDatabase(name, table: pagesTable, body)
    }

    static let pagesTable = "pages (id INTEGER PRIMARY KEY, filler BLOB NOT NULL)"

    /// Runs `body` with a database in a new file holding the empty `table` (its name and
    /// columns; none when nil), and its path; then removes the file, its log and every copy
    /// made of them.
    static func withDatabase(
        _ name: String, table: String?, readers: Int = 1, checkpointPages: Int = SQLiteCheckpointer.threshold,
        guardedAfterFailure: Duration = SQLiteDatabase.guardedAfterFailure, _ body: (SQLiteDatabase, String) async throws -> Void
    ) async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-\(name)-\(UUID().uuidString).sqlite").path
        defer {
            let directory = FileManager.default.temporaryDirectory.path
            for file in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] where "\(directory)/\(file)".hasPrefix(path) {
                try? FileManager.default.removeItem(atPath: "\(directory)/\(file)")
            }
        }
        let database = try SQLiteDatabase(
            path: path, readers: readers, checkpointPages: checkpointPages, guardedAfterFailure: guardedAfterFailure)
        do {
            if let table { try await database.write { try await $0.execute("CREATE TABLE \(table)", []) } }
            try await body(database, path)
        } catch {
            await database.close()
            throw error
        }
        await database.close()
    }

    /// A copy of the database's file and log as they are on disk (what a process killed now
    /// leaves), opened anew: SQLite rebuilds its index of the log from the log itself, checking
    /// every frame's checksum, and keeps the transactions whose commit frames it reaches.
    static func reopenedCopy(of path: String) throws -> SQLiteDatabase {
        let copy = path + "-copy-\(UUID().uuidString)"
        for suffix in ["", "-wal"] { try FileManager.default.copyItem(atPath: path + suffix, toPath: copy + suffix) }
        return try SQLiteDatabase(path: copy, readers: 1)
    }

    @Test("a commit's log frames reach the kernel together, a few writes where SQLite made two a frame, and are in the file as the commit returns")
    func logFramesGathered() async throws {
        try await Self.withPages("gather") { database, path in
            let before = try #require(try await database.logWrites())
            // Rows of 3 kB, a page each: 200 frames, each written by SQLite as its header, then its page.
            try await database.write { connection in
                for id in 0..<200 { try await connection.execute("INSERT INTO pages VALUES (?, zeroblob(3000))", [.integer(Int64(id))]) }
            }
            let after = try #require(try await database.logWrites())
            let made = after.made - before.made
            let reached = after.reachedKernel - before.reachedKernel
            #expect(made >= 400)
            // 820 kB in writes of 64 KiB: 13 of them.
            #expect(reached <= 20, "\(reached) writes reached the kernel for SQLite's \(made)")
            let reopened = try Self.reopenedCopy(of: path)
            let rows = try await reopened.read { try await $0.query("SELECT count(*) AS n FROM pages", []).first?.integer("n") }
            #expect(rows == 200)
            await reopened.close()
        }
    }

    @Test("a write too large for the page cache spills frames, rewrites them and their checksums where they are, and its commit is whole in the file")
    func logFramesRewritten() async throws {
        try await Self.withPages("rewrite") { database, path in
            try await database.write { connection in
                // A cache of 20 pages: the 300 new ones go to the log before the commit, and the
                // 100 changed again are rewritten in their frames.
                try await connection.execute("PRAGMA cache_size=20", [])
                for id in 0..<300 { try await connection.execute("INSERT INTO pages VALUES (?, zeroblob(3000))", [.integer(Int64(id))]) }
                try await connection.execute("UPDATE pages SET filler = zeroblob(3001) WHERE id < 100", [])
            }
            let writes = try #require(try await database.logWrites())
            #expect(writes.straight > 0, "no frame was rewritten: \(writes)")
            let reopened = try Self.reopenedCopy(of: path)
            let stored = try await reopened.read {
                try await $0.query("SELECT count(*) AS n, sum(length(filler)) AS bytes FROM pages", []).first
            }
            #expect(stored?.integer("n") == 300)
            #expect(stored?.integer("bytes") == Int64(100 * 3_001 + 200 * 3_000))
            await reopened.close()
        }
    }

    @Test(
        "a write that rolls back, after spilling frames, the whole transaction it shares: the writes after it are not run, and the log stays whole for another connection"
    )
    func wholeTransactionRolledBack() async throws {
        try await Self.withPages("rollback") { database, path in
            // 150 pages through a cache of 20, spilled to the log; then the whole transaction
            // rolled back, as SQLite does itself on some I/O errors. Then another write in the
            // same transaction.
            let rolling: @Sendable (SQLiteDatabase) async throws -> Void = { database in
                try await database.write { connection in
                    try await connection.execute("PRAGMA cache_size=20", [])
                    for id in 0..<150 { try await connection.execute("INSERT INTO pages VALUES (?, zeroblob(3000))", [.integer(Int64(id))]) }
                    try await connection.execute("ROLLBACK", [])
                }
            }
            let after: @Sendable (SQLiteDatabase) async throws -> Void = { database in
                try await database.write { try await $0.execute("INSERT INTO pages VALUES (500, zeroblob(10))", []) }
            }
            let writes = try await Self.sharingOneTransaction(database, [rolling, after])
            await #expect(throws: SQLError.self) { try await writes[0].value }
            // Outside a transaction it would have committed on its own, its caller told it failed.
            await #expect(throws: SQLError.self) { try await writes[1].value }
            // Another connection (another process, in PushHub's case) commits where the spilled
            // frames went; then this one writes again.
            let other = try SQLiteDatabase(path: path, readers: 1)
            try await other.write { connection in
                for id in 1_000..<1_300 { try await connection.execute("INSERT INTO pages VALUES (?, zeroblob(3000))", [.integer(Int64(id))]) }
            }
            await other.close()
            try await database.write { try await $0.execute("INSERT INTO pages VALUES (2000, zeroblob(3000))", []) }
            let ids = try await database.read { try await $0.query("SELECT id FROM pages ORDER BY id", []).compactMap { $0.integer("id") } }
            #expect(ids == Array(1_000..<1_300) + [2_000])
            let reopened = try Self.reopenedCopy(of: path)
            let check = try await reopened.read { try await $0.query("PRAGMA integrity_check", []).first?.text("integrity_check") }
            let recovered = try await reopened.read { try await $0.query("SELECT id FROM pages ORDER BY id", []).compactMap { $0.integer("id") } }
            #expect(check == "ok")
            #expect(recovered == Array(1_000..<1_300) + [2_000])
            await reopened.close()
        }
    }
}
