import CSQLite
import CSQLiteWAL
import Foundation
import Synchronization

/// SQLite in one file, in WAL mode: one writer connection and a few readers, each used by one
/// task at a time. Statements run inline: with WAL and `synchronous=NORMAL` a statement or
/// commit touches memory and the log, not a disk flush.
///
/// Writes are group-committed: writes that arrive while a transaction runs are run, one after
/// the other, in the next transaction, and every caller hears back only after that transaction
/// committed. A write that throws is undone alone: the others stay in. They run with no
/// savepoint of their own, which SQLite would fill with a copy of every page a write changes
/// (without, in process, updates of installations went 17–26 % faster, new ones 2–7 %). One
/// that throws before it wrote (a row not found, a version that did not match) is told, and
/// the transaction goes on. When one throws after writing, the transaction is rolled back and
/// its writes run again, each in a savepoint, and so do the writes of the second after
/// (`guardedAfterFailure`), so a stream of such failures costs one transaction's work a second
/// above what savepoints cost. A write's body may so run twice: it works on the database only
/// (`writeOnce` otherwise).
public final class SQLiteDatabase: SQLDatabase {
    public let dialect = SQLDialect.sqlite
    private let writer: ConnectionLease<SQLiteConnection>
    private let readers: ConnectionLease<SQLiteConnection>
    private let pending = Mutex(PendingWrites())
    private let checkpointer: SQLiteCheckpointer
    /// Most writes in one transaction.
    static let maximumBatch = 256

    /// How long writes run in savepoints after one failed.
    public static let guardedAfterFailure = Duration.seconds(1)
    private let guardedAfterFailure: Duration

    private struct PendingWrites {
        var jobs: [WriteJob] = []
        var committing = false
        /// Until when each write runs in a savepoint of its own.
        var guardedUntil = ContinuousClock.now
        var runs = WriteRuns()
    }

    /// One caller's write: runs its body inside the shared transaction, and is told how the
    /// transaction ended.
    private struct WriteJob: Sendable {
        /// Its body must not run twice: its transaction runs guarded.
        let once: Bool
        /// Runs the body; `guarded`, in a savepoint of its own.
        let run: @Sendable (SQLiteConnection, _ guarded: Bool) async -> Ran
        /// Tells the caller its write was not run: the transaction could not begin.
        let fail: @Sendable (any Error) -> Void
    }

    private enum Ran: Sendable {
        /// What to tell the caller once the transaction ends.
        case done(@Sendable (Result<Void, any Error>) -> Void)
        /// Failed in its savepoint and rolled back to it; the caller was told.
        case told
        /// Failed with no savepoint after it wrote: the transaction holds what it did, and
        /// nobody was told.
        case failedUnguarded
    }

    /// Opens (creating if needed) the database at `path`. The log is copied into the database
    /// once it holds `checkpointPages` pages.
    public init(
        path: String, readers readerCount: Int = 4, checkpointPages: Int = SQLiteCheckpointer.threshold,
        guardedAfterFailure: Duration = SQLiteDatabase.guardedAfterFailure
    ) throws {
        self.guardedAfterFailure = guardedAfterFailure
        let writerConnection = try SQLiteConnection(path: path)
        try writerConnection.switchToWAL()
        try writerConnection.run("PRAGMA synchronous=NORMAL")
        try writerConnection.run("PRAGMA foreign_keys=ON")
        // The writer's savepoint journals in memory. A guarded write runs in a savepoint of its
        // own, which first copies each page it changes into the journal; past 64 KiB (16 pages, less
        // than one installation's write) SQLite moved it to a file, and a transaction paid two
        // `pwrite`s a page for it, six times the writes of the log itself. Memory follows the
        // largest single write, which PushHub bounds: an ended send's targets go 1,000 to a
        // write and 2,000 to a sweep (a million in one write journalled 270 MB).
        try writerConnection.run("PRAGMA temp_store=MEMORY")
        // A log that grew past this (a checkpoint held off by readers) is cut back to it when
        // it starts again, rather than keeping its largest size on disk.
        try writerConnection.run("PRAGMA journal_size_limit=\(SQLiteCheckpointer.threshold * 2 * 4096)")
        checkpointer = try SQLiteCheckpointer(path: path, threshold: checkpointPages)
        writerConnection.onCommit(checkpointer)
        writer = ConnectionLease([writerConnection])
        readers = ConnectionLease(
            try (0..<max(1, readerCount)).map { _ in
                let reader = try SQLiteConnection(path: path)
                try reader.run("PRAGMA foreign_keys=ON")
                // A query's temporary tables (a page's UNION and ORDER BY) in memory too: by
                // default each one is a file created in /var/tmp and deleted again.
                try reader.run("PRAGMA temp_store=MEMORY")
                return reader
            })
    }

    public func read<T: Sendable>(_ body: @Sendable (any SQLConnection) async throws -> T) async throws -> T {
        try await readers.with { try await body($0) }
    }

    public func write<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) async throws -> T) async throws -> T {
        try await write(once: false, body)
    }

    /// A transaction holding a write that must run once is guarded throughout.
    public func writeOnce<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) async throws -> T) async throws -> T {
        try await write(once: true, body)
    }

    private func write<T: Sendable>(once: Bool, _ body: @escaping @Sendable (any SQLConnection) async throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let job = WriteJob(
                once: once,
                run: { connection, guarded in
                    do {
                        connection.wrote = false
                        if guarded { try connection.runCached("SAVEPOINT pushhub_write") }
                        let value = try await body(connection)
                        if guarded { try connection.runCached("RELEASE pushhub_write") }
                        return .done { outcome in continuation.resume(with: outcome.map { value }) }
                    } catch {
                        guard guarded else {
                            // One that failed before it wrote (a row not found, a version
                            // that did not match) left nothing to undo.
                            guard connection.wrote else {
                                continuation.resume(throwing: error)
                                return .told
                            }
                            return .failedUnguarded
                        }
                        try? connection.run("ROLLBACK TO pushhub_write")
                        try? connection.run("RELEASE pushhub_write")
                        continuation.resume(throwing: error)
                        return .told
                    }
                },
                fail: { continuation.resume(throwing: $0) })
            let startCommitter = pending.withLock { state -> Bool in
                state.jobs.append(job)
                guard !state.committing else { return false }
                state.committing = true
                return true
            }
            if startCommitter { Task { await self.commitPending() } }
        }
    }

    public func writeStatement<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) async throws -> T) async throws -> T {
        try await write(body)
    }

    /// Runs the waiting writes in transactions until none are left.
    private func commitPending() async {
        while true {
            let (jobs, guarded) = pending.withLock { state -> ([WriteJob], Bool) in
                let batch = Array(state.jobs.prefix(Self.maximumBatch))
                state.jobs.removeFirst(batch.count)
                if batch.isEmpty { state.committing = false }
                return (batch, ContinuousClock.now < state.guardedUntil || batch.contains(where: \.once))
            }
            guard !jobs.isEmpty else { return }
            try? await writer.with { connection in
                guard let again = await run(jobs, guarded: guarded, on: connection) else { return }
                // One failed with nothing to undo it alone: the transaction is gone; the
                // writes not told yet run again, each in a savepoint, and those of the next
                // second after them.
                pending.withLock { $0.runs.runAgain += 1 }
                _ = await run(again, guarded: true, on: connection)
                pending.withLock { $0.guardedUntil = .now + guardedAfterFailure }
            }
        }
    }

    /// Runs `jobs` in one transaction and tells their callers how it ended; nil once all were
    /// told. When a write failed unguarded, the transaction was rolled back, and what comes
    /// back is the writes to run again: all but those told already (that failed before they
    /// wrote, and were told so at once), whose bodies must not run, nor their callers hear,
    /// twice.
    private func run(_ jobs: [WriteJob], guarded: Bool, on connection: SQLiteConnection) async -> [WriteJob]? {
        pending.withLock { state in
            state.runs.batches += 1
            if guarded { state.runs.guarded += 1 }
        }
        var committed: [@Sendable (Result<Void, any Error>) -> Void] = []
        // Those that ran and were not told: to run again if a later one fails unguarded.
        var ran: [WriteJob] = []
        // A transaction a failed ROLLBACK left open would fail every BEGIN after it.
        if connection.isInTransaction { try? connection.run("ROLLBACK") }
        do {
            try connection.runCached("BEGIN IMMEDIATE")
        } catch {
            // Not run: outside a transaction, a body's savepoint would have begun and
            // committed one of its own, and the caller, told of the failure, would
            // write it again.
            for job in jobs { job.fail(error) }
            return nil
        }
        for (index, job) in jobs.enumerated() {
            switch await job.run(connection, guarded) {
            case .done(let tell):
                committed.append(tell)
                ran.append(job)
            case .told: break
            case .failedUnguarded:
                if connection.isInTransaction { try? connection.run("ROLLBACK") }
                return ran + jobs[index...]
            }
            // A write whose failure rolled back the whole transaction (SQLite does on
            // some I/O errors) leaves none open: the writes before it were undone with
            // it, and those after would each commit on their own, outside it. (Unguarded,
            // when it threw after writing, the writes run again instead, above.)
            guard connection.isInTransaction else {
                let error = SQLError(message: "SQLite rolled the transaction back")
                for tell in committed { tell(.failure(error)) }
                for job in jobs[(index + 1)...] { job.fail(error) }
                return nil
            }
        }
        do {
            try connection.runCached("COMMIT")
            for tell in committed { tell(.success(())) }
        } catch {
            try? connection.run("ROLLBACK")
            for tell in committed { tell(.failure(error)) }
        }
        return nil
    }

    /// How the writer's transactions ran, since the database opened.
    public var writeRuns: WriteRuns { pending.withLock { $0.runs } }

    /// Writes waiting for the writer.
    public var waitingWrites: Int { pending.withLock { $0.jobs.count } }

    /// What the writer's log has seen through the gathering VFS (CSQLiteWAL.c); nil before the
    /// log is open, or where SQLite's default VFS is used.
    public func logWrites() async throws -> LogWrites? {
        try await writer.with { $0.logWrites() }
    }

    /// Runs `body` (the migrations, whose single writes may copy a whole table) with the
    /// writer's journals in files, as SQLite keeps them by default.
    public func migrating<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        try await writer.with { try $0.run("PRAGMA temp_store=DEFAULT") }
        do {
            let value = try await body()
            try await writer.with { try $0.run("PRAGMA temp_store=MEMORY") }
            return value
        } catch {
            try? await writer.with { try $0.run("PRAGMA temp_store=MEMORY") }
            throw error
        }
    }

    public func close() async {
        await writer.closeAll { $0.close() }
        await readers.closeAll { $0.close() }
        checkpointer.close()
    }
}

/// How the writer's transactions ran: `batches` transactions begun, `guarded` of them with
/// each write in a savepoint, `runAgain` batches run again in savepoints after a write failed
/// without one.
public struct WriteRuns: Sendable, Equatable {
    public var batches: Int
    public var guarded: Int
    public var runAgain: Int

    public init(batches: Int = 0, guarded: Int = 0, runAgain: Int = 0) {
        self.batches = batches
        self.guarded = guarded
        self.runAgain = runAgain
    }
}

/// Writes to one connection's log: those SQLite made, and those that reached the kernel (its
/// frames gathered, or a write that went straight through).
public struct LogWrites: Sendable, Equatable {
    public var made: Int
    public var reachedKernel: Int
    /// Of `reachedKernel`, the writes SQLite made somewhere other than where its last one ended
    /// (a frame or checksum of its own transaction rewritten, the log started again).
    public var straight: Int
}

/// Copies the log into the database file on a thread of its own, once the log holds
/// `threshold` pages. SQLite's own checkpoint runs in the committing writer, every 1,000
/// pages: each one held the writer, and every write waiting for it, while it copied and
/// synced (fdatasync was a twentieth of the ingress's time during registrations), and a
/// larger threshold inline took registrations' p99 from 13 ms to 37 ms. A PASSIVE checkpoint
/// runs beside the writer and the readers.
public final class SQLiteCheckpointer: @unchecked Sendable {
    // @unchecked: `connection` is used only on `queue`.
    public static let threshold = 10_000
    private let threshold: Int
    private let connection: SQLiteConnection
    private let queue = DispatchQueue(label: "pushhub.sqlite.checkpoint")
    private let running = Atomic(false)

    init(path: String, threshold: Int) throws {
        connection = try SQLiteConnection(path: path)
        // A connection that has read nothing yet does not know the file is in WAL mode, and
        // its checkpoints do nothing.
        try connection.switchToWAL()
        self.threshold = threshold
    }

    /// Called by the writer after each commit with the log's length in pages; true when the
    /// writer should checkpoint itself, now. The log starts again from its beginning only when
    /// a write begins with all of it copied, and under a steady stream of writes a checkpoint
    /// beside them never catches up: past twice the threshold, the writer copies the rest.
    func logGrew(to pages: Int) -> Bool {
        if pages >= 2 * threshold { return true }
        guard pages >= threshold, running.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return false }
        queue.async {
            // A failure (a busy reader) leaves the log for the next commit to hand over again.
            try? self.connection.run("PRAGMA wal_checkpoint(PASSIVE)")
            self.running.store(false, ordering: .releasing)
        }
        return false
    }

    func close() {
        queue.sync { connection.close() }
    }
}

/// One `sqlite3` handle with a cache of prepared statements.
final class SQLiteConnection: SQLConnection, @unchecked Sendable {
    // @unchecked: a connection is only used by the one task that leased it.
    private var handle: OpaquePointer?
    private var statements: [String: Prepared] = [:]
    private var checkpointer: SQLiteCheckpointer?
    /// Whether a statement that may write ran since it was last set false.
    var wrote = false
    /// The text parameters of the statement being run, each ended by a zero byte, bound where
    /// they are (SQLITE_STATIC) until `step` clears the bindings or finalizes the statement
    /// (a reset alone keeps them): bound one by one, each was copied twice, into a C string for
    /// the call and by SQLite, an allocation each time.
    private var boundText = UnsafeMutableRawBufferPointer(start: nil, count: 0)
    /// Statements whose text parameters take more than this are bound with copies, so the
    /// buffer a connection keeps stays small.
    static let maximumBoundText = 64 << 10
    static let maximumCachedStatements = 256
    static let maximumCachedParameters = 256
    /// What SQLite says of a statement too large or deep to compile; other errors (a missing
    /// table during an upgrade, a busy database) may pass later.
    static let refusedShapes = [
        "parser stack overflow", "too many terms", "Expression tree is too large", "too many SQL variables", "pattern too complex",
    ]

    /// SQLite's memory statistics off, once, before the first connection opens: with them on,
    /// each of SQLite's allocations took a process-wide mutex (pthread mutexes were 4 % of the
    /// ingress's time during registrations). PushHub never reads them.
    static let memoryStatisticsOff: Void = {
        // SQLITE_MISUSE when SQLite was initialized already in this process: they stay on.
        _ = pushhub_sqlite3_config_memstatus(0)
    }()

    /// What SQLite counts as allocated: 0 while its statistics are off.
    static var memoryCounted: Int64 { sqlite3_memory_used() }

    /// How long a statement waits for another connection's lock before it fails as busy.
    static let busyTimeout = Duration.seconds(5)

    /// Whether the VFS that gathers a transaction's log writes into one (CSQLiteWAL.c) is
    /// registered, once; connections open on SQLite's default VFS if it could not be.
    static let gathering = pushhub_wal_vfs_register() == SQLITE_OK

    init(path: String) throws {
        Self.memoryStatisticsOff
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let code = sqlite3_open_v2(path, &handle, flags, Self.gathering ? pushhub_wal_vfs_name : nil)
        guard code == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "code \(code)"
            sqlite3_close(handle)
            throw SQLError(message: "could not open SQLite database \(path): \(message)")
        }
        self.handle = handle
        sqlite3_busy_timeout(handle, Int32(Self.busyTimeout / .milliseconds(1)))
    }

    deinit { close() }

    func close() {
        for prepared in statements.values { sqlite3_finalize(prepared.statement) }
        statements.removeAll()
        if let handle { sqlite3_close_v2(handle) }
        handle = nil
        boundText.deallocate()
        boundText = UnsafeMutableRawBufferPointer(start: nil, count: 0)
    }

    /// Tells `checkpointer` the log's length after each commit. This replaces SQLite's own
    /// checkpoint after commits (a WAL hook too), which is then off for this connection.
    func onCommit(_ checkpointer: SQLiteCheckpointer) {
        // Held here, so the pointer the hook gets lives as long as the handle.
        self.checkpointer = checkpointer
        sqlite3_wal_hook(
            handle,
            { context, handle, _, pages in
                if Unmanaged<SQLiteCheckpointer>.fromOpaque(context!).takeUnretainedValue().logGrew(to: Int(pages)) {
                    // SQLITE_BUSY while the other checkpoint runs: the next commit tries again.
                    sqlite3_wal_checkpoint_v2(handle, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
                }
                return SQLITE_OK
            }, Unmanaged.passUnretained(checkpointer).toOpaque())
    }

    /// Puts the database in WAL mode. Connections opening a new database at the same moment
    /// each switch it, and SQLite answers one that meets another's lock busy at once, without
    /// waiting in its busy handler: it tries again, for up to the busy time-out.
    func switchToWAL() throws {
        let deadline = ContinuousClock.now + Self.busyTimeout
        var pause = Duration.milliseconds(1)
        while true {
            guard let handle else { throw SQLError(message: "the SQLite connection is closed") }
            let code = sqlite3_exec(handle, "PRAGMA journal_mode=WAL", nil, nil, nil)
            if code == SQLITE_OK { return }
            guard code & 0xFF == SQLITE_BUSY, ContinuousClock.now < deadline else {
                throw SQLError(message: "\(String(cString: sqlite3_errmsg(handle))) in: PRAGMA journal_mode=WAL")
            }
            Thread.sleep(forTimeInterval: pause / .seconds(1))
            pause = min(pause * 2, .milliseconds(50))
        }
    }

    /// Runs statements that take no binds and return nothing (pragmas, transactions, DDL).
    func run(_ sql: String) throws {
        guard let handle else { throw SQLError(message: "the SQLite connection is closed") }
        wrote = true
        var errorMessage: UnsafeMutablePointer<CChar>?
        if sqlite3_exec(handle, sql, nil, nil, &errorMessage) != SQLITE_OK {
            let message = errorMessage.map { String(cString: $0) } ?? "unknown error"
            sqlite3_free(errorMessage)
            throw SQLError(message: "\(message) in: \(sql.prefix(200))")
        }
    }

    /// Whether a transaction is open on this connection.
    var isInTransaction: Bool { handle.map { sqlite3_get_autocommit($0) == 0 } ?? false }

    func logWrites() -> LogWrites? {
        var (made, reached, straight): (Int64, Int64, Int64) = (0, 0, 0)
        guard let handle, pushhub_wal_vfs_log_counts(handle, &made, &reached, &straight) == SQLITE_OK else { return nil }
        return LogWrites(made: Int(made), reachedKernel: Int(reached), straight: Int(straight))
    }

    /// Runs, through the statement cache, a statement that takes no binds and returns no rows:
    /// the writer's transaction and savepoint statements, which `run` would compile every time.
    func runCached(_ sql: String) throws {
        _ = try step(sql, [], collect: false)
    }

    func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] {
        try step(sql, binds, collect: true).rows
    }

    func execute(_ sql: String, _ binds: [SQLValue]) async throws {
        _ = try step(sql, binds, collect: false)
    }

    /// SQLite's count of the rows the statement changed (`sqlite3_changes64`), read after it
    /// ran: where `RETURNING` would buffer its rows in a temporary table of their own, made and
    /// dropped for every statement (a pager, a B-tree and their allocations each time).
    func executeCountingChanges(_ sql: String, _ binds: [SQLValue]) async throws -> Int? {
        // Any other statement leaves the count of the one before: caught in the debug build.
        assert(Self.changesRows(sql), "executeCountingChanges takes an INSERT, UPDATE or DELETE: \(sql.prefix(60))")
        _ = try step(sql, binds, collect: false)
        guard let handle else { throw SQLError(message: "the SQLite connection is closed") }
        return Int(sqlite3_changes64(handle))
    }

    /// Whether `sql` is an INSERT, UPDATE or DELETE, whose count of changed rows SQLite keeps.
    static func changesRows(_ sql: String) -> Bool {
        let verb = sql.drop { $0.isWhitespace }.prefix(6).uppercased()
        return verb == "INSERT" || verb == "UPDATE" || verb == "DELETE"
    }

    /// A prepared statement, and whether it stays in the cache: one with more than
    /// `maximumCachedParameters` parameters (an import's many rows, whose count varies) is
    /// used once and finalized, so the cache never holds large statements no one runs again.
    private func prepared(_ sql: String) throws -> (Prepared, cached: Bool) {
        guard let handle else { throw SQLError(message: "the SQLite connection is closed") }
        if let prepared = statements[sql] { return (prepared, true) }
        var statement: OpaquePointer?
        let code = sqlite3_prepare_v2(handle, sql, -1, &statement, nil)
        guard code == SQLITE_OK, let statement else {
            // A statement SQLite cannot compile (a parser stack overflow, too many terms) will
            // not compile next time either; busy or locked databases may.
            let message = String(cString: sqlite3_errmsg(handle))
            let permanent = code & 0xFF == SQLITE_TOOBIG || Self.refusedShapes.contains { message.contains($0) }
            throw SQLError(message: "\(message) in: \(sql.prefix(200))", isPermanent: permanent)
        }
        let prepared = Prepared(statement)
        guard sqlite3_bind_parameter_count(statement) <= Self.maximumCachedParameters else { return (prepared, false) }
        // Statements are cached by their text; expressions sent by clients make new texts, so
        // the cache is emptied when it grows past its bound.
        if statements.count >= Self.maximumCachedStatements {
            for cached in statements.values { sqlite3_finalize(cached.statement) }
            statements.removeAll()
        }
        statements[sql] = prepared
        return (prepared, true)
    }

    /// A compiled statement, and the index of each of its columns by name, read from SQLite at
    /// its first row and kept until SQLite compiles the statement again (after a change of the
    /// schema, when `*` may name other columns): each query that returned rows made those
    /// names again, a string and a dictionary entry a column.
    final class Prepared {
        let statement: OpaquePointer
        private var known: (columns: [String: Int], compiled: Int32)?

        init(_ statement: OpaquePointer) { self.statement = statement }

        var columns: [String: Int]? {
            guard let known, known.compiled == sqlite3_stmt_status(statement, SQLITE_STMTSTATUS_REPREPARE, 0) else { return nil }
            return known.columns
        }

        /// Keeps `columns` for the statement as compiled now, and returns them.
        func keep(_ columns: [String: Int]) -> [String: Int] {
            known = (columns, sqlite3_stmt_status(statement, SQLITE_STMTSTATUS_REPREPARE, 0))
            return columns
        }
    }

    /// Binds `binds` in order. Texts are copied, each with a zero byte after it, into
    /// `boundText` and bound there with their lengths: a text holding U+0000 is bound whole. The caller clears the bindings (`sqlite3_clear_bindings`, not only a
    /// reset) or finalizes the statement before `boundText` is written again or grows.
    private func bind(_ binds: [SQLValue], to statement: OpaquePointer) {
        var textBytes = 0
        for case .text(let text) in binds { textBytes += text.utf8.count + 1 }
        let inPlace = textBytes <= Self.maximumBoundText
        if inPlace, textBytes > boundText.count {
            boundText.deallocate()
            boundText = .allocate(byteCount: min(max(textBytes, 2 * boundText.count, 1024), Self.maximumBoundText), alignment: 1)
        }
        var used = 0
        for (offset, value) in binds.enumerated() {
            let index = Int32(offset + 1)
            switch value {
            case .null: sqlite3_bind_null(statement, index)
            case .integer(let number): sqlite3_bind_int64(statement, index, number)
            case .text(let text) where inPlace:
                let start = boundText.baseAddress! + used
                var text = text
                let count = text.withUTF8 { utf8 in
                    if let source = utf8.baseAddress { start.copyMemory(from: source, byteCount: utf8.count) }
                    return utf8.count
                }
                start.storeBytes(of: 0, toByteOffset: count, as: UInt8.self)
                // With its length: text holding U+0000 is all of it, not what comes before.
                pushhub_sqlite3_bind_static_text(statement, index, start.assumingMemoryBound(to: CChar.self), Int32(count))
                used += count + 1
            case .text(let text): pushhub_sqlite3_bind_text(statement, index, text, Int32(clamping: text.utf8.count))
            }
        }
    }

    private func step(_ sql: String, _ binds: [SQLValue], collect: Bool) throws -> (rows: [SQLRow], Void) {
        let (prepared, cached) = try prepared(sql)
        let statement = prepared.statement
        defer {
            if cached {
                sqlite3_reset(statement)
                // Not only for the next run: the texts bound in `boundText` are let go here.
                sqlite3_clear_bindings(statement)
            } else {
                sqlite3_finalize(statement)
            }
        }
        bind(binds, to: statement)
        if sqlite3_stmt_readonly(statement) == 0 { wrote = true }
        var rows: [SQLRow] = []
        var columns: [String: Int]?
        while true {
            let code = sqlite3_step(statement)
            if code == SQLITE_DONE { break }
            guard code == SQLITE_ROW else {
                let message = String(cString: sqlite3_errmsg(handle))
                throw SQLError(message: "\(message) in: \(sql.prefix(200))", isConstraintViolation: code & 0xFF == SQLITE_CONSTRAINT)
            }
            guard collect else { continue }
            let count = Int(sqlite3_column_count(statement))
            if columns == nil {
                // Read after the first step, which compiles the statement again if it must. Of
                // two columns with one name, the first is found (it stopped the process).
                columns =
                    prepared.columns
                    ?? prepared.keep(
                        Dictionary((0..<count).map { (String(cString: sqlite3_column_name(statement, Int32($0))), $0) }) { first, _ in first })
            }
            var values: [SQLValue] = []
            values.reserveCapacity(count)
            for column in 0..<Int32(count) {
                switch sqlite3_column_type(statement, column) {
                case SQLITE_NULL: values.append(.null)
                case SQLITE_INTEGER: values.append(.integer(sqlite3_column_int64(statement, column)))
                default:
                    // By its length, as it was bound (a U+0000 inside is kept).
                    let text = sqlite3_column_text(statement, column)
                    let length = Int(sqlite3_column_bytes(statement, column))
                    values.append(.text(text.map { String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self) } ?? ""))
                }
            }
            rows.append(SQLRow(columns: columns!, values: values))
        }
        return (rows, ())
    }
}

/// Hands out connections, one task at a time each; callers wait when all are in use.
final class ConnectionLease<Connection: Sendable>: Sendable {
    private struct State {
        var idle: [Connection]
        var waiting: [CheckedContinuation<Connection, Never>] = []
    }

    private let state: Mutex<State>

    init(_ connections: [Connection]) {
        state = Mutex(State(idle: connections))
    }

    func with<T>(_ body: (Connection) async throws -> T) async throws -> T {
        let connection = await acquire()
        defer { release(connection) }
        return try await body(connection)
    }

    private func acquire() async -> Connection {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Connection? in
                if let connection = state.idle.popLast() { return connection }
                state.waiting.append(continuation)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    private func release(_ connection: Connection) {
        let waiter = state.withLock { state -> CheckedContinuation<Connection, Never>? in
            if state.waiting.isEmpty {
                state.idle.append(connection)
                return nil
            }
            return state.waiting.removeFirst()
        }
        waiter?.resume(returning: connection)
    }

    func closeAll(_ close: (Connection) -> Void) async {
        let idle = state.withLock { state in
            defer { state.idle.removeAll() }
            return state.idle
        }
        idle.forEach(close)
    }
}
