import Foundation
import PushModel

/// A job as the store keeps it: what it reports, where its input is, and how far it got.
public struct StoredJob: Sendable, Equatable {
    public var job: NotificationHubJob
    /// The input file (absolute), once there is one; an import waits for it in `Started`.
    public var inputPath: String?
    public var inputSize: Int64
    public var position: JobPosition
}

/// How far a job got, written with each chunk it finished: a restarted job goes on from here.
public struct JobPosition: Sendable, Equatable {
    /// Bytes of the input consumed, and its lines.
    public var inputOffset: Int64 = 0
    public var line: Int64 = 0
    /// The lengths of `Output.txt` and `Failed.txt` that go with this position; a restarted
    /// job cuts its files back to them, so nothing is written twice.
    public var outputBytes: Int64 = 0
    public var failedBytes: Int64 = 0
    /// An export's place in the registrations, and how many there were when it started.
    public var exportCursor: RegistrationCursor?
    public var exportTotal: Int64 = 0
    public var succeeded: Int64 = 0
    public var failed: Int64 = 0

    public init() {}
}

/// One line of an import: the registration it holds, or why it could not be read.
public struct JobLine: Sendable {
    public var line: Int64
    public var registration: Result<Registration, JobLineFailure>
    /// The input's offset just past the line.
    public var end: Int64

    public init(line: Int64, registration: Result<Registration, JobLineFailure>, end: Int64 = 0) {
        self.line = line
        self.registration = registration
        self.end = end
    }
}

/// Why a line failed: Azure's words for the kind (`BadRequest`, `NotFound`, `Conflict`), then ours.
public struct JobLineFailure: Error, Sendable, Equatable {
    public var kind: String
    public var reason: String

    public init(_ kind: String, _ reason: String) {
        self.kind = kind
        self.reason = reason
    }
}

/// What became of one line: the registration id it wrote or deleted, or its failure.
public struct JobLineResult: Sendable, Equatable {
    public var line: Int64
    public var outcome: Result<String, JobLineFailure>
}

/// Thrown when another ingress took the job over (this one's lease ran out): this one stops.
public struct JobLeaseLost: Error, Sendable {}

/// Where import and export jobs are kept, with their positions; `SQLRegistrationStore` is one.
public protocol JobStore: Sendable {
    func createJob(_ job: NotificationHubJob, inputPath: String?, inputSize: Int64, maximumUnfinished: Int) async throws -> Bool
    func job(hub: String, id: String) async throws -> StoredJob?
    func jobs(hub: String, limit: Int) async throws -> [StoredJob]
    func attachJobInput(hub: String, id: String, path: String, size: Int64) async throws -> Bool
    func claimJob(runner: String, hubs: [String], lease: TimeInterval, now: Date) async throws -> StoredJob?
    func checkpointJob(hub: String, id: String, runner: String, position: JobPosition, progress: Double, lease: TimeInterval) async throws
    func finishJob(hub: String, id: String, runner: String, status: NotificationHubJob.Status, failure: String?) async throws
    func releaseJob(hub: String, id: String, runner: String) async throws
    func deferJob(hub: String, id: String, runner: String, failure: String, maximumAttempts: Int) async throws -> Bool
    func removeFinishedJobs(before date: Date) async throws -> [(hub: String, id: String)]
    func expireWaitingJobs(before date: Date) async throws -> Int
    func countExportedRegistrations(hub: String) async throws -> Int64
    func exportPage(hub: String, after cursor: RegistrationCursor?, limit: Int) async throws -> RegistrationPage
    func applyImportChunk(
        hub: String, id: String, runner: String, type: NotificationHubJob.JobType, lines: [JobLine], next position: JobPosition,
        progress: Double, lease: TimeInterval,
        write: @escaping @Sendable ([JobLineResult]) throws -> (outputBytes: Int64, failedBytes: Int64)
    ) async throws -> JobPosition
}

extension SQLRegistrationStore: JobStore {
    /// Stores a new job; false when the hub already has `maximumUnfinished` jobs not finished.
    public func createJob(_ job: NotificationHubJob, inputPath: String?, inputSize: Int64, maximumUnfinished: Int) async throws -> Bool {
        let dialect = database.dialect
        return try await database.write { connection in
            // Two creates at once on PostgreSQL would both count below the limit: one at a
            // time per hub. (SQLite has one writer.)
            if dialect == .postgres {
                _ = try await connection.query("SELECT pg_advisory_xact_lock(hashtext(?)) AS locked", [.text("pushhub-jobs:" + job.hub)])
            }
            let unfinished =
                try await connection.query(
                    "SELECT count(*) AS n FROM jobs WHERE hub = ? AND status IN ('Started', 'Running')", [.text(job.hub)]
                ).first?.integer("n") ?? 0
            guard unfinished < maximumUnfinished else { return false }
            try await connection.execute(
                """
                INSERT INTO jobs (hub, job_id, type, status, import_file_uri, output_container_uri, input_path, input_size, created_at, updated_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [
                    .text(job.hub), .text(job.jobId), .text(job.type.rawValue), .text(job.status.rawValue), SQLValue(job.importFileUri),
                    SQLValue(job.outputContainerUri), SQLValue(inputPath), .integer(inputSize), SQLValue(job.createdAt), SQLValue(job.updatedAt),
                ])
            return true
        }
    }

    public func job(hub: String, id: String) async throws -> StoredJob? {
        try await database.read { connection in
            try await connection.query("SELECT * FROM jobs WHERE hub = ? AND job_id = ?", [.text(hub), .text(id)]).first.flatMap(Self.storedJob)
        }
    }

    /// A hub's jobs, newest first.
    public func jobs(hub: String, limit: Int) async throws -> [StoredJob] {
        try await database.read { connection in
            try await connection.query(
                "SELECT * FROM jobs WHERE hub = ? ORDER BY created_at DESC, job_id LIMIT ?", [.text(hub), .integer(Int64(limit))]
            ).compactMap(Self.storedJob)
        }
    }

    /// Gives an import waiting in `Started` its uploaded input; false when it is not waiting.
    /// True as well when the job has this input already (an attach tried again after its
    /// answer was lost), whatever it became since.
    public func attachJobInput(hub: String, id: String, path: String, size: Int64) async throws -> Bool {
        try await database.write { connection in
            try await Self.changedRows(
                """
                UPDATE jobs SET input_path = ?, input_size = ?, updated_at = ?
                WHERE hub = ? AND job_id = ? AND type <> 'ExportRegistrations' AND ((status = 'Started' AND input_path IS NULL) OR input_path = ?)
                """, returning: "job_id", [.text(path), .integer(size), SQLValue(Date()), .text(hub), .text(id), .text(path)], on: connection) > 0
        }
    }

    /// Takes the job of `hubs` touched longest ago that can run and nobody runs (no lease, or
    /// one run out) for `runner` until `lease` from now, and marks it Running. A job let go
    /// after its turn was just touched: the others come first.
    public func claimJob(runner: String, hubs: [String], lease: TimeInterval, now: Date = Date()) async throws -> StoredJob? {
        guard !hubs.isEmpty else { return nil }
        return try await database.write { connection in
            let candidates = try await connection.query(
                """
                SELECT * FROM jobs WHERE status IN ('Started', 'Running')
                    AND (input_path IS NOT NULL OR type = 'ExportRegistrations') AND (lease_until IS NULL OR lease_until < ?)
                    AND hub IN (\(Self.placeholders(hubs.count)))
                ORDER BY updated_at, created_at LIMIT 1
                """, [SQLValue(now)] + hubs.map(SQLValue.text))
            guard let row = candidates.first, let candidate = Self.storedJob(row) else { return nil }
            // The row as the UPDATE left it: the position the last holder committed.
            let taken = try await connection.query(
                """
                UPDATE jobs SET runner = ?, lease_until = ?, status = 'Running', updated_at = ?
                WHERE hub = ? AND job_id = ? AND status IN ('Started', 'Running') AND (lease_until IS NULL OR lease_until < ?) RETURNING *
                """,
                [
                    .text(runner), SQLValue(now.addingTimeInterval(lease)), SQLValue(now), .text(candidate.job.hub), .text(candidate.job.jobId),
                    SQLValue(now),
                ])
            return taken.first.flatMap(Self.storedJob)
        }
    }

    /// Renews the lease and writes `position` as the job's; throws `JobLeaseLost` when the job
    /// is not `runner`'s any more. The tries in a row start again only when the position moved
    /// (a line read, a registration exported): a checkpoint that only renews the lease (an
    /// export's count) does not wipe the failures before it.
    private static func checkpoint(
        hub: String, id: String, runner: String, position: JobPosition, progress: Double, lease: TimeInterval, on connection: any SQLConnection
    ) async throws {
        let now = Date()
        let updated = try await changedRows(
            """
            UPDATE jobs SET input_offset = ?, line = ?, output_bytes = ?, failed_bytes = ?, export_cursor = ?, export_total = ?,
                succeeded = ?, failed = ?, progress = ?, lease_until = ?, updated_at = ?,
                attempts = CASE WHEN input_offset <> ? OR succeeded <> ? OR failed <> ? THEN 0 ELSE attempts END
            WHERE hub = ? AND job_id = ? AND runner = ? AND status = 'Running'
            """, returning: "job_id",
            [
                .integer(position.inputOffset), .integer(position.line), .integer(position.outputBytes), .integer(position.failedBytes),
                SQLValue(position.exportCursor?.description), .integer(position.exportTotal), .integer(position.succeeded),
                .integer(position.failed), .integer(Int64((min(max(progress, 0), 100) * 100).rounded())),
                SQLValue(now.addingTimeInterval(lease)), SQLValue(now), .integer(position.inputOffset), .integer(position.succeeded),
                .integer(position.failed), .text(hub), .text(id), .text(runner),
            ], on: connection)
        guard updated > 0 else { throw JobLeaseLost() }
    }

    /// Writes an export's position after its page went to the output file.
    public func checkpointJob(hub: String, id: String, runner: String, position: JobPosition, progress: Double, lease: TimeInterval) async throws {
        try await database.write { connection in
            try await Self.checkpoint(hub: hub, id: id, runner: runner, position: position, progress: progress, lease: lease, on: connection)
        }
    }

    /// Ends a job: Completed, or Failed with why.
    public func finishJob(hub: String, id: String, runner: String, status: NotificationHubJob.Status, failure: String?) async throws {
        try await database.write { connection in
            let updated = try await Self.changedRows(
                """
                UPDATE jobs SET status = ?, failure = ?, progress = CASE WHEN ? = 'Completed' THEN 10000 ELSE progress END,
                    runner = NULL, lease_until = NULL, updated_at = ?
                WHERE hub = ? AND job_id = ? AND runner = ?
                """, returning: "job_id",
                [.text(status.rawValue), SQLValue(failure), .text(status.rawValue), SQLValue(Date()), .text(hub), .text(id), .text(runner)],
                on: connection)
            guard updated > 0 else { throw JobLeaseLost() }
        }
    }

    /// Finished jobs last changed before `date`, removed; their files are the caller's to delete.
    public func removeFinishedJobs(before date: Date) async throws -> [(hub: String, id: String)] {
        try await database.write { connection in
            try await connection.query(
                "DELETE FROM jobs WHERE status IN ('Completed', 'Failed') AND updated_at < ? RETURNING hub, job_id", [SQLValue(date)]
            ).compactMap { row in
                guard let hub = row.text("hub"), let id = row.text("job_id") else { return nil }
                return (hub, id)
            }
        }
    }

    /// Imports that waited in Started for an input since before `date`, ended Failed.
    public func expireWaitingJobs(before date: Date) async throws -> Int {
        try await database.write { connection in
            try await Self.changedRows(
                """
                UPDATE jobs SET status = 'Failed', failure = 'no input came within a day', updated_at = ?
                WHERE status = 'Started' AND input_path IS NULL AND type <> 'ExportRegistrations' AND created_at < ?
                """, returning: "job_id", [SQLValue(Date()), SQLValue(date)], on: connection)
        }
    }

    /// How many registrations of a hub an export takes: those not of an installation.
    public func countExportedRegistrations(hub: String) async throws -> Int64 {
        try await database.read { connection in
            try await connection.query("SELECT count(*) AS n FROM registrations WHERE hub = ? AND installation_id IS NULL", [.text(hub)])
                .first?.integer("n") ?? 0
        }
    }

    /// One page of an export: registrations not of an installation, in stored order; `next`
    /// is the last one's place (nil for none), and a page shorter than `limit` is the last.
    public func exportPage(hub: String, after cursor: RegistrationCursor?, limit: Int) async throws -> RegistrationPage {
        let rows = try await database.read { connection in
            try await connection.query(
                "SELECT * FROM registrations WHERE hub = ? AND seq > ? AND installation_id IS NULL ORDER BY seq LIMIT ?",
                [.text(hub), .integer(cursor?.position ?? 0), .integer(Int64(limit))])
        }
        // The last row's place even on the last page: an export checkpoints it.
        return RegistrationPage(
            registrations: try Self.registrations(from: rows), next: rows.last?.integer("seq").map { RegistrationCursor(position: $0) })
    }

    /// After a failure that may pass: lets go of the job until a back-off has passed (5 s,
    /// doubling to 5 minutes), or ends it Failed with `failure` once `maximumAttempts` tries in
    /// a row made no progress. True when it ended.
    public func deferJob(hub: String, id: String, runner: String, failure: String, maximumAttempts: Int) async throws -> Bool {
        try await database.write { connection in
            guard
                let attempts = try await connection.query(
                    "SELECT attempts FROM jobs WHERE hub = ? AND job_id = ? AND runner = ?", [.text(hub), .text(id), .text(runner)]
                ).first?.integer("attempts")
            else { throw JobLeaseLost() }
            let now = Date()
            if attempts + 1 >= Int64(maximumAttempts) {
                try await connection.execute(
                    """
                    UPDATE jobs SET status = 'Failed', failure = ?, attempts = ?, runner = NULL, lease_until = NULL, updated_at = ?
                    WHERE hub = ? AND job_id = ?
                    """,
                    [
                        .text("\(maximumAttempts) tries in a row failed; the last: \(failure)"), .integer(attempts + 1), SQLValue(now), .text(hub),
                        .text(id),
                    ])
                return true
            }
            let backOff = min(5 * pow(2, Double(attempts)), 300)
            try await connection.execute(
                "UPDATE jobs SET attempts = ?, runner = NULL, lease_until = ? WHERE hub = ? AND job_id = ?",
                [.integer(attempts + 1), SQLValue(now.addingTimeInterval(backOff)), .text(hub), .text(id)])
            return false
        }
    }

    /// Lets go of a job without ending it (the ingress stops): another may take it at once.
    public func releaseJob(hub: String, id: String, runner: String) async throws {
        try await database.write { connection in
            try await connection.execute(
                "UPDATE jobs SET runner = NULL, lease_until = NULL WHERE hub = ? AND job_id = ? AND runner = ?",
                [.text(hub), .text(id), .text(runner)])
        }
    }

    /// Applies one chunk of an import's lines in one transaction with the job's new position,
    /// and returns that position with the chunk's lines counted.
    /// `write` gets the lines' results before the commit and puts them in the output files,
    /// returning the files' new lengths: if the process dies before the commit, a restarted
    /// job cuts the files back and does the chunk again; after it, the chunk is done once.
    public func applyImportChunk(
        hub: String, id: String, runner: String, type: NotificationHubJob.JobType, lines: [JobLine], next position: JobPosition,
        progress: Double, lease: TimeInterval,
        write: @escaping @Sendable ([JobLineResult]) throws -> (outputBytes: Int64, failedBytes: Int64)
    ) async throws -> JobPosition {
        let dialect = database.dialect
        // Once: `write` appends the chunk's lines to the job's files.
        return try await database.writeOnce { connection in
            // The lease first: on PostgreSQL this locks the job's row until the commit.
            try await Self.checkpoint(hub: hub, id: id, runner: runner, position: position, progress: progress, lease: lease, on: connection)
            let results = try await Self.applyLines(hub: hub, type: type, lines: lines, dialect: dialect, on: connection)
            var position = position
            (position.outputBytes, position.failedBytes) = try write(results)
            for result in results {
                if case .success = result.outcome { position.succeeded += 1 } else { position.failed += 1 }
            }
            try await Self.checkpoint(hub: hub, id: id, runner: runner, position: position, progress: progress, lease: lease, on: connection)
            return position
        }
    }

    /// Rows to a statement that names registrations by id.
    static let idsPerStatement = 1_000

    private static func applyLines(
        hub: String, type: NotificationHubJob.JobType, lines: [JobLine], dialect: SQLDialect, on connection: any SQLConnection
    ) async throws -> [JobLineResult] {
        // What is stored now of every id the lines name.
        // Sorted: rows are locked in one order, so two imports into one hub cannot deadlock.
        // Not an installation's ids, which the lines below refuse anyway: an installation's
        // writer holds its rows, and a chunk that locked one of them in id order could deadlock
        // with a call writing several installations (`PostgresInstallationWrites`).
        let named = Set(
            lines.compactMap { try? $0.registration.get().registrationId }.filter { !$0.isEmpty && !Registration.isInstallationOwned($0) }
        ).sorted()
        var stored: [String: (seq: Int64, version: Int64, installation: String?, tags: Set<String>)] = [:]
        for start in stride(from: 0, to: named.count, by: idsPerStatement) {
            let ids = named[start..<min(start + idsPerStatement, named.count)]
            let columns = "seq, registration_id, version, installation_id, tags"
            let rows =
                dialect == .postgres
                // One lookup of the unique index per id: with `IN`, PostgreSQL's planner, its
                // statistics behind a table an import is filling, scanned the hub's rows instead
                // (LIMIT 1 keeps it from flattening the lookups back into a join). The rows are
                // locked: a registration written through the API meanwhile waits for the chunk.
                ? try await connection.query(
                    "SELECT r.* FROM (VALUES " + Array(repeating: "(?)", count: ids.count).joined(separator: ", ")
                        + ") AS v (id) CROSS JOIN LATERAL (SELECT \(columns) FROM registrations WHERE hub = ? AND registration_id = v.id LIMIT 1 "
                        + "FOR UPDATE) AS r",
                    ids.map(SQLValue.text) + [.text(hub)])
                : try await connection.query(
                    "SELECT \(columns) FROM registrations WHERE hub = ? AND registration_id IN ("
                        + Self.placeholders(ids.count) + ")",
                    [.text(hub)] + ids.map(SQLValue.text))
            for row in rows {
                guard let id = row.text("registration_id"), let seq = row.integer("seq") else { continue }
                stored[id] = (seq, row.integer("version") ?? 0, row.text("installation_id"), Set(StoredRow.splitTags(row.text("tags"))))
            }
        }
        // The lines in order, on what the earlier ones left: `current` is each id's version,
        // nil once deleted; `final` what each id ends as.
        var current: [String: Int64?] = stored.mapValues { $0.version }
        var final: [String: Registration?] = [:]
        // The ids in the order the lines first name them: new registrations are stored (and
        // exported again) in the file's order.
        var order: [String] = []
        var results: [JobLineResult] = []
        results.reserveCapacity(lines.count)
        let now = RFC3339.truncated(Date())
        for line in lines {
            var registration: Registration
            switch line.registration {
            case .failure(let failure):
                results.append(JobLineResult(line: line.line, outcome: .failure(failure)))
                continue
            case .success(let read): registration = read
            }
            let id = registration.registrationId
            if Registration.isInstallationOwned(id) {
                results.append(
                    .init(
                        line: line.line,
                        outcome: .failure(.init("Forbidden", "ids starting with \(Registration.installationPrefix) belong to installations"))))
                continue
            }
            if let installation = stored[id]?.installation {
                results.append(
                    .init(
                        line: line.line,
                        outcome: .failure(
                            .init("Conflict", "registration \(id) belongs to installation \(installation); change the installation instead"))))
                continue
            }
            let version: Int64?? = id.isEmpty ? nil : current[id]
            let exists = version.flatMap { $0 } != nil
            switch type {
            case .importCreateRegistrations where exists:
                results.append(.init(line: line.line, outcome: .failure(.init("Conflict", "registration \(id) exists"))))
                continue
            case .importUpdateRegistrations where !exists, .importDeleteRegistrations where !exists:
                results.append(
                    .init(
                        line: line.line,
                        outcome: .failure(.init("NotFound", id.isEmpty ? "RegistrationId: missing" : "registration \(id) not found"))))
                continue
            default: break
            }
            if type == .importDeleteRegistrations {
                current[id] = .some(nil)
                if final.updateValue(Registration?.none, forKey: id) == nil { order.append(id) }
                results.append(.init(line: line.line, outcome: .success(id)))
                continue
            }
            if id.isEmpty {
                registration.registrationId = Registration.newId()
            }
            registration.hub = hub
            registration.tags = Tags.normalized(registration.tags)
            registration.installationId = nil
            registration.version = ((version ?? nil) ?? 0) + 1
            registration.updatedAt = now
            current[registration.registrationId] = .some(registration.version)
            if final.updateValue(Registration?.some(registration), forKey: registration.registrationId) == nil {
                order.append(registration.registrationId)
            }
            results.append(.init(line: line.line, outcome: .success(registration.registrationId)))
        }
        // Deleted rows go with their tag rows; replaced ones are updated where they are (an
        // export or a broadcast paging by place meets each once), their tag rows changed by
        // what differs; new ones come in many to a statement.
        var gone: [Int64] = []
        var replaced: [(seq: Int64, registration: Registration)] = []
        var tagsRemoved: [SQLValue] = []
        var tagsAdded: [SQLValue] = []
        var added: [Registration] = []
        for id in order {
            let registration = final[id] ?? nil
            guard let old = stored[id] else {
                if let registration { added.append(registration) }
                continue
            }
            guard let registration else {
                // Its tag rows go with it: the foreign key's cascade on SQLite, a trigger on
                // PostgreSQL (by their key, from its tags).
                gone.append(old.seq)
                continue
            }
            replaced.append((old.seq, registration))
            let tags = Set(registration.tags)
            for tag in old.tags.subtracting(tags) { tagsRemoved += [.text(tag), .integer(old.seq)] }
            for tag in tags.subtracting(old.tags) { tagsAdded += [.text(hub), .text(tag), .integer(old.seq)] }
        }
        for start in stride(from: 0, to: tagsRemoved.count, by: 2 * idsPerStatement) {
            let pairs = Array(tagsRemoved[start..<min(start + 2 * idsPerStatement, tagsRemoved.count)])
            try await connection.execute(
                "DELETE FROM registration_tags WHERE hub = ? AND (tag, seq) IN (VALUES "
                    + Array(repeating: "(?, CAST(? AS BIGINT))", count: pairs.count / 2).joined(separator: ", ") + ")",
                [.text(hub)] + pairs)
        }
        for start in stride(from: 0, to: gone.count, by: idsPerStatement) {
            let seqs = gone[start..<min(start + idsPerStatement, gone.count)].map(SQLValue.integer)
            let list = Self.placeholders(seqs.count)
            try await connection.execute("DELETE FROM registrations WHERE seq IN (\(list))", seqs)
        }
        for start in stride(from: 0, to: replaced.count, by: importRowsPerStatement) {
            let rows = replaced[start..<min(start + importRowsPerStatement, replaced.count)]
            var binds: [SQLValue] = []
            binds.reserveCapacity(rows.count * (columnNames.count + 1))
            for (seq, registration) in rows { binds += [.integer(seq)] + (try columns(of: registration)) }
            try await connection.execute(updateRegistrations(rows: rows.count), binds)
        }
        try await insertTags(tagsAdded, on: connection)
        try await insertNew(added, on: connection)
        // Ids issued by `POST registrationIDs` and now taken are issued no more; a hub with
        // none waiting (an import's usual case) is asked once, not for every id.
        let waiting = try await connection.query("SELECT 1 AS waiting FROM registration_ids WHERE hub = ? LIMIT 1", [.text(hub)])
        let used = waiting.isEmpty ? [] : added.map(\.registrationId)
        for start in stride(from: 0, to: used.count, by: idsPerStatement) {
            let ids = used[start..<min(start + idsPerStatement, used.count)].map(SQLValue.text)
            try await connection.execute(
                "DELETE FROM registration_ids WHERE hub = ? AND registration_id IN ("
                    + Self.placeholders(ids.count)
                    + ")", [.text(hub)] + ids)
        }
        return results
    }

    /// An UPDATE of `rows` registrations in place, each bound as its `seq` then `columns(of:)`:
    /// the rows come as a table of values, the integer columns cast so PostgreSQL types them.
    static func updateRegistrations(rows: Int) -> String {
        let integers: Set<String> = ["expires_at", "version", "updated_at"]
        let row = "(CAST(? AS BIGINT), " + columnNames.map { integers.contains($0) ? "CAST(? AS BIGINT)" : "?" }.joined(separator: ", ") + ")"
        return "WITH v (seq, \(columnNames.joined(separator: ", "))) AS (VALUES "
            + Array(repeating: row, count: rows).joined(separator: ", ") + ") UPDATE registrations SET "
            + columnNames.map { "\($0) = v.\($0)" }.joined(separator: ", ") + " FROM v WHERE registrations.seq = v.seq"
    }

    static func storedJob(_ row: SQLRow) -> StoredJob? {
        guard let hub = row.text("hub"), let id = row.text("job_id"), let type = row.text("type").flatMap(NotificationHubJob.JobType.init),
            let status = row.text("status").flatMap(NotificationHubJob.Status.init), let createdAt = row.date("created_at"),
            let updatedAt = row.date("updated_at")
        else { return nil }
        var position = JobPosition()
        position.inputOffset = row.integer("input_offset") ?? 0
        position.line = row.integer("line") ?? 0
        position.outputBytes = row.integer("output_bytes") ?? 0
        position.failedBytes = row.integer("failed_bytes") ?? 0
        position.exportCursor = row.text("export_cursor").flatMap(RegistrationCursor.init)
        position.exportTotal = row.integer("export_total") ?? 0
        position.succeeded = row.integer("succeeded") ?? 0
        position.failed = row.integer("failed") ?? 0
        let job = NotificationHubJob(
            jobId: id, hub: hub, type: type, status: status, progress: Double(row.integer("progress") ?? 0) / 100,
            importFileUri: row.text("import_file_uri"), outputContainerUri: row.text("output_container_uri"), failure: row.text("failure"),
            succeeded: position.succeeded, failed: position.failed, createdAt: createdAt, updatedAt: updatedAt)
        return StoredJob(job: job, inputPath: row.text("input_path"), inputSize: row.integer("input_size") ?? 0, position: position)
    }
}
