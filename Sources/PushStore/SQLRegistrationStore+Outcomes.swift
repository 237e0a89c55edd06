import Foundation
import PushModel

extension SQLRegistrationStore: OutcomeStore {
    public func recordEnqueued(_ request: SendRequest, deadline: Date, keep: Bool, dispatched: [Platform: Int]?, now: Date) async throws {
        let text = keep ? String(decoding: try WireCoding.encode(request), as: UTF8.self) : nil
        let dialect = database.dialect
        try await database.write { connection in
            try await Self.enqueue(request, text: text, deadline: deadline, dispatched: dispatched, now: now, dialect: dialect, on: connection)
        }
    }

    public func recordEnqueued(
        _ request: SendRequest, deadline: Date, keep: Bool, now: Date,
        resolving resolve: @escaping @Sendable (any RegistrationStore) async throws -> [Platform: [DeliveryBatch.Target]]?
    ) async throws -> [Platform: [DeliveryBatch.Target]]? {
        let text = keep ? String(decoding: try WireCoding.encode(request), as: UTF8.self) : nil
        let dialect = database.dialect
        return try await database.write { connection in
            let targets = try await resolve(self.within(connection))
            let dispatched = targets.map(DeliveryBatch.counts(of:))
            try await Self.enqueue(request, text: text, deadline: deadline, dispatched: dispatched, now: now, dialect: dialect, on: connection)
            return targets
        }
    }

    /// A send's Enqueued row (`recordEnqueued`), with its request's `text` when it is kept.
    private static func enqueue(
        _ request: SendRequest, text: String?, deadline: Date, dispatched: [Platform: Int]?, now: Date, dialect: SQLDialect,
        on connection: any SQLConnection
    ) async throws {
        let lock = dialect == .postgres ? " FOR UPDATE" : ""
        // A send resolved as it was accepted starts Processing with its summary's counts,
        // in the statement that makes its row (its `expected` says the summary was counted);
        // one that is not new, or has no target, goes the way of any summary.
        let started: Bool
        if let dispatched, dispatched.values.contains(where: { $0 > 0 }) {
            started = try await insertEnqueued(
                request.notificationId, hub: request.hub, enqueuedAt: request.enqueuedAt, deadline: deadline, now: now,
                describing: request, dispatched: dispatched, on: connection)
        } else {
            started = false
        }
        if !started {
            try await insertEnqueued(
                request.notificationId, hub: request.hub, enqueuedAt: request.enqueuedAt, deadline: deadline, now: now,
                describing: request, on: connection)
            if let dispatched {
                let summary = ResultBatch(notificationId: request.notificationId, hub: request.hub, dispatched: dispatched)
                try await record(summary, lock: lock, dialect: dialect, now: now, on: connection)
            }
        }
        if let text { try await keep(request, text: text, publishedAt: now, on: connection) }
    }

    /// Runs `insert`, of one row and `ON CONFLICT DO NOTHING`, and says whether it made the row.
    static func insertedOne(_ insert: String, returning column: String, _ binds: [SQLValue], on connection: any SQLConnection) async throws
        -> Bool
    {
        try await changedRows(insert, returning: column, binds, on: connection) > 0
    }

    /// Runs `statement` (an INSERT, UPDATE or DELETE) and says how many rows it changed:
    /// SQLite counts them (with `RETURNING` it made and dropped a temporary table for the rows
    /// every time), PostgreSQL returns `column` of each.
    static func changedRows(_ statement: String, returning column: String, _ binds: [SQLValue], on connection: any SQLConnection) async throws
        -> Int
    {
        if let changed = try await connection.executeCountingChanges(statement, binds) { return changed }
        return try await connection.query(statement + " RETURNING " + column, binds).count
    }

    /// A dispatch summary's counts as the `dispatched` column keeps them: a JSON object of
    /// platform names, sorted.
    static func dispatchedText(_ dispatched: [Platform: Int]) -> String {
        // Written into one string, in an order found once: a send names every platform, and
        // each field made apart, sorted and joined was a dozen allocations.
        var text = "{"
        text.reserveCapacity(16 * dispatched.count + 2)
        for platform in platformsByName {
            guard let count = dispatched[platform] else { continue }
            if text.utf8.count > 1 { text += "," }
            text += "\""
            text += platform.rawValue
            text += "\":"
            text += String(count)
        }
        text += "}"
        return text
    }

    /// Every platform, in the order of their names.
    private static let platformsByName = Platform.allCases.sorted { $0.rawValue < $1.rawValue }

    /// The notification's row, state Enqueued, unless it exists; with what `request` asked
    /// for (format, tag expression, body) for its details, in the same statement. With
    /// `dispatched`, the row starts Processing with the summary's counts. Says whether the
    /// row was made.
    @discardableResult
    static func insertEnqueued(
        _ id: String, hub: String, enqueuedAt: Date, deadline: Date?, now: Date, describing request: SendRequest? = nil,
        dispatched: [Platform: Int]? = nil, on connection: any SQLConnection
    ) async throws -> Bool {
        var tags: String?
        if case .tags(let expression)? = request?.audience { tags = expression }
        let audience: String? =
            switch request?.audience {
            case .tags?: "tags"
            case .broadcast?: "broadcast"
            case .installationIds?: "installations"
            case .handles?: "handles"
            case nil: nil
            }
        let state = NotificationState.enqueued.settled(by: .init(expected: dispatched.map { $0.values.reduce(0, +) }))
        return try await insertedOne(
            """
            INSERT INTO notifications (notification_id, hub, state, enqueued_at, deadline, progress_at, received, expired, rejected, format, tags, body, audience,
                expected, dispatched, started_at)
            VALUES (?, ?, ?, ?, ?, ?, 0, 0, 0, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (notification_id) DO NOTHING
            """, returning: "notification_id",
            [
                .text(id), .text(hub), .text(state.rawValue), SQLValue(enqueuedAt), SQLValue(deadline), SQLValue(now),
                request.map { .text($0.format.rawValue) } ?? .null, tags.map(SQLValue.text) ?? .null, request.map { .text($0.body) } ?? .null,
                SQLValue(audience), dispatched.map { .integer(Int64($0.values.reduce(0, +))) } ?? .null,
                dispatched.map { .text(dispatchedText($0)) } ?? .null, dispatched == nil ? .null : SQLValue(now),
            ], on: connection)
    }

    /// Keeps `request` until its notification ends.
    static func keep(_ request: SendRequest, text: String, publishedAt: Date, on connection: any SQLConnection) async throws {
        try await connection.execute(
            """
            INSERT INTO unfinished_sends (notification_id, hub, request, published_at, publishes) VALUES (?, ?, ?, ?, 1)
            ON CONFLICT (notification_id) DO NOTHING
            """, [.text(request.notificationId), .text(request.hub), .text(text), SQLValue(publishedAt)])
    }

    public func forgetEnqueued(hub: String, notificationId: String, resolved: Bool) async throws {
        let states = resolved ? Self.openStates : "('\(NotificationState.enqueued.rawValue)')"
        try await database.write { connection in
            let forgotten = try await Self.changedRows(
                "DELETE FROM notifications WHERE notification_id = ? AND hub = ? AND state IN \(states) AND received = 0",
                returning: "notification_id", [.text(notificationId), .text(hub)], on: connection)
            guard forgotten > 0 else { return }
            try await connection.execute("DELETE FROM unfinished_sends WHERE notification_id = ?", [.text(notificationId)])
        }
    }

    /// States in which a notification has not ended.
    static let openStates = "('\(NotificationState.enqueued.rawValue)', '\(NotificationState.processing.rawValue)')"

    /// How many graces a kept send waits after its n-th publish before the next: 1, 2, 4, 8,
    /// then 16.
    static let backoffGraces =
        "(CASE WHEN u.publishes <= 1 THEN 1 WHEN u.publishes = 2 THEN 2 WHEN u.publishes = 3 THEN 4 WHEN u.publishes = 4 THEN 8 ELSE 16 END)"

    public func claimUnfinished(now: Date, grace: TimeInterval, maximumPublishes: Int, limit: Int) async throws -> [SendRequest] {
        let graceMs = Int64((grace * 1000).rounded())
        let rows = try await database.write { connection in
            // The condition is checked again by the UPDATE itself: of replicas racing for a row,
            // the one whose update lands first takes it.
            try await connection.query(
                """
                UPDATE unfinished_sends SET published_at = ?, publishes = publishes + 1
                WHERE notification_id IN (
                    SELECT u.notification_id FROM unfinished_sends u JOIN notifications n ON n.notification_id = u.notification_id
                    WHERE u.published_at + ? * \(Self.backoffGraces) < ? AND u.publishes < ?
                        AND (n.progress_at IS NULL OR n.progress_at < ?) AND n.state IN \(Self.openStates)
                    ORDER BY u.published_at, u.notification_id LIMIT ?)
                AND published_at + ? * \(Self.backoffGraces.replacingOccurrences(of: "u.", with: "")) < ? AND publishes < ?
                RETURNING notification_id, request
                """,
                [
                    SQLValue(now), .integer(graceMs), SQLValue(now), .integer(Int64(maximumPublishes)),
                    SQLValue(now.addingTimeInterval(-grace)), .integer(Int64(limit)),
                    .integer(graceMs), SQLValue(now), .integer(Int64(maximumPublishes)),
                ])
        }
        var requests: [SendRequest] = []
        for row in rows {
            guard let text = row.text("request"), let request = try? WireCoding.decode(SendRequest.self, from: Data(text.utf8)) else {
                // Kept by an older build in a shape this one cannot read: it can never be
                // published again, and its deadline ends it.
                if let id = row.text("notification_id") {
                    try await database.write { try await $0.execute("DELETE FROM unfinished_sends WHERE notification_id = ?", [.text(id)]) }
                }
                continue
            }
            requests.append(request)
        }
        return requests
    }

    public func abandonStalled(now: Date, grace: TimeInterval, abandonAfter: TimeInterval, limit: Int) async throws -> [AbandonedSend] {
        let quietSince = now.addingTimeInterval(-grace)
        return try await database.write { connection in
            // A send seen first through its results (produced straight into Kafka) has no
            // deadline of its own: it gets `abandonAfter` from then. Scheduled sends wait for
            // their time.
            let stalled = try await connection.query(
                """
                SELECT notification_id FROM notifications
                WHERE state IN \(Self.openStates) AND COALESCE(deadline, enqueued_at + ?) < ?
                    AND (progress_at IS NULL OR progress_at < ?)
                    AND notification_id NOT IN (SELECT notification_id FROM scheduled_notifications WHERE state IN ('pending', 'claimed'))
                ORDER BY deadline, notification_id LIMIT ?
                """,
                [.integer(Int64((abandonAfter * 1000).rounded())), SQLValue(quietSince), SQLValue(quietSince), .integer(Int64(limit))])
            var abandoned: [AbandonedSend] = []
            for candidate in stalled {
                guard let id = candidate.text("notification_id") else { continue }
                // The state changes first, under the row's lock and with the same conditions, so
                // a result recorded meanwhile either keeps the send open (it progressed) or comes
                // after and is not counted.
                guard
                    let row = try await connection.query(
                        """
                        UPDATE notifications SET state = ?, ended_at = ?, deadline = ?
                        WHERE notification_id = ? AND state IN \(Self.openStates) AND (progress_at IS NULL OR progress_at < ?)
                        RETURNING hub, expected, dispatched
                        """,
                        [.text(NotificationState.abandoned.rawValue), SQLValue(now), SQLValue(now), .text(id), SQLValue(quietSince)]
                    ).first, let hub = row.text("hub")
                else { continue }
                // Per platform: what the summary announced, less what was reported.
                var unreported: [String: Int64] = [:]
                var reported: Int64 = 0
                let announced = row.text("dispatched").flatMap { try? JSONDecoder().decode([String: Int64].self, from: Data($0.utf8)) } ?? [:]
                unreported = announced
                for count in try await connection.query(
                    "SELECT platform, CAST(SUM(count) AS BIGINT) AS reported FROM notification_counts WHERE notification_id = ? GROUP BY platform",
                    [.text(id)])
                {
                    reported += count.integer("reported") ?? 0
                    guard let platform = count.text("platform"), unreported[platform] != nil else { continue }
                    unreported[platform]! -= count.integer("reported") ?? 0
                }
                unreported = unreported.filter { $0.value > 0 }
                let total = unreported.values.reduce(0, +)
                let reason: String
                if let expected = row.integer("expected") {
                    reason = "no progress by the deadline: \(total) of \(expected) targets had no result and count as expired"
                } else if reported > 0 {
                    reason = "no progress by the deadline: \(reported) targets reported, but the dispatcher never said how many it dispatched"
                } else {
                    reason =
                        "no progress by the deadline: never dispatched (the request was lost before the dispatcher read it, or no dispatcher ran)"
                }
                try await connection.execute(
                    "UPDATE notifications SET reason = ?, received = received + ?, expired = expired + ? WHERE notification_id = ?",
                    [.text(reason), .integer(total), .integer(total), .text(id)])
                for (platform, count) in unreported.sorted(by: { $0.key < $1.key }) {
                    try await Self.addCount(id, platform: platform, outcome: .expired, count: count, on: connection)
                }
                try await Self.forgetWork(of: id, on: connection)
                abandoned.append(AbandonedSend(notificationId: id, hub: hub, reason: reason, unreported: Int(total)))
            }
            return abandoned
        }
    }

    /// What an ended notification no longer needs: its kept request and its counted targets.
    /// Up to `targetsDeletedAtEnd` targets go at once; more are left to `sweepEndedTargets`,
    /// so the transaction that ends a broadcast (and makes it Completed for the hub API) does
    /// not also delete a million rows. Results for an ended send are passed over before its
    /// targets are read, so the rows left change no count.
    /// `counted`, when known, is how many targets the send counted: no more rows than that
    /// were kept for it, so when they fit in one deletion none is looked for after it.
    static func forgetWork(of id: String, counted: Int? = nil, on connection: any SQLConnection) async throws {
        try await connection.execute("DELETE FROM unfinished_sends WHERE notification_id = ?", [.text(id)])
        // None counted, none kept.
        if counted == 0 { return }
        if try await deleteTargets(of: id, upTo: targetsDeletedAtEnd, lookForMore: (counted ?? .max) > targetsDeletedAtEnd, on: connection) {
            try await connection.execute(
                "INSERT INTO ended_sends_with_targets (notification_id) VALUES (?) ON CONFLICT DO NOTHING", [.text(id)])
        }
    }

    /// Counted targets an ending send deletes itself.
    static let targetsDeletedAtEnd = 1_000

    /// Deletes up to `limit` of a send's counted targets; says whether any are left.
    private static func deleteTargets(of id: String, upTo limit: Int, lookForMore: Bool = true, on connection: any SQLConnection) async throws -> Bool
    {
        try await connection.execute(
            """
            DELETE FROM result_targets WHERE notification_id = ? AND target IN
                (SELECT target FROM result_targets WHERE notification_id = ? ORDER BY target LIMIT ?)
            """, [.text(id), .text(id), .integer(Int64(limit))])
        guard lookForMore else { return false }
        return !(try await connection.query("SELECT 1 AS left FROM result_targets WHERE notification_id = ? LIMIT 1", [.text(id)]).isEmpty)
    }

    public func sweepEndedTargets(limit: Int) async throws -> Bool {
        try await database.write { connection in
            guard
                let id = try await connection.query("SELECT notification_id FROM ended_sends_with_targets LIMIT 1", []).first?.text(
                    "notification_id")
            else { return false }
            if try await !Self.deleteTargets(of: id, upTo: limit, on: connection) {
                try await connection.execute("DELETE FROM ended_sends_with_targets WHERE notification_id = ?", [.text(id)])
            }
            return true
        }
    }

    static func addCount(_ id: String, platform: String, outcome: Outcome, count: Int64, on connection: any SQLConnection) async throws {
        try await connection.execute(
            """
            INSERT INTO notification_counts (notification_id, platform, outcome, count) VALUES (?, ?, ?, ?)
            ON CONFLICT (notification_id, platform, outcome) DO UPDATE SET count = notification_counts.count + excluded.count
            """, [.text(id), .text(platform), .text(outcome.rawValue), .integer(count)])
    }

    /// Rows of `result_targets` inserted per statement: two parameters a row, within what a
    /// connection keeps prepared (`SQLiteConnection.maximumCachedParameters`). At 250 a row
    /// each statement was compiled again, for every 250 targets of a broadcast.
    static let targetsPerStatement = 128

    public func recordOutcomes(_ batches: [ResultBatch], now: Date) async throws -> [Bool] {
        guard !batches.isEmpty else { return [] }
        let dialect = database.dialect
        let lock = dialect == .postgres ? " FOR UPDATE" : ""
        // A group's notifications are locked in the order of their ids, so two groups never
        // wait on each other's rows in opposite orders. (Others that lock notifications, as
        // `abandonStalled` does, may still deadlock with a group on PostgreSQL: that error is
        // transient, and the group is taken apart and retried.)
        let order = batches.indices.sorted { (batches[$0].notificationId, $0) < (batches[$1].notificationId, $1) }
        return try await database.write { connection in
            var fresh = Array(repeating: false, count: batches.count)
            for index in order { fresh[index] = try await Self.record(batches[index], lock: lock, dialect: dialect, now: now, on: connection) }
            return fresh
        }
    }

    /// Inserts a chunk of a batch's target keys into `result_targets` and marks in `counted`
    /// those that were new, the first of each. On SQLite the insert goes without `RETURNING`,
    /// which buffered every inserted row in a table of its own and made each a Swift string
    /// (7–10 % of the ingress's CPU recording a broadcast's outcomes), and the count of rows it
    /// changed says whether every key was new, as it nearly always is, or none; otherwise it is
    /// undone to its savepoint and made again with `RETURNING`. PostgreSQL's client reports no
    /// count of changed rows, so there it always returns them.
    private static func countNew(
        _ keys: ArraySlice<String>, of id: String, into counted: inout [Bool], dialect: SQLDialect, on connection: any SQLConnection
    ) async throws {
        let insert =
            "INSERT INTO result_targets (notification_id, target) VALUES "
            + Array(repeating: "(?, ?)", count: keys.count).joined(separator: ", ") + " ON CONFLICT DO NOTHING"
        let binds = keys.flatMap { [SQLValue.text(id), .text($0)] }
        if dialect == .sqlite {
            try await connection.execute("SAVEPOINT counting", [])
            let changed = try await connection.executeCountingChanges(insert, binds)
            if changed == keys.count || changed == 0 {
                // Every key new, or none (a batch delivered again): nothing to undo.
                try await connection.execute("RELEASE counting", [])
                if changed != 0 { for index in keys.indices { counted[index] = true } }
                return
            }
            try await connection.execute("ROLLBACK TO counting", [])
            try await connection.execute("RELEASE counting", [])
        }
        let rows = try await connection.query(insert + " RETURNING target", binds)
        if rows.count == keys.count {
            // Every key was new, and so none repeats within the chunk: all count.
            for index in keys.indices { counted[index] = true }
            return
        }
        // The first result of each key that was new counts. Keys compare as bytes, as the
        // database compares them: Swift's `==` takes canonically equivalent text as equal,
        // and two such targets are two rows.
        var new = Set(rows.compactMap { $0.text("target").map { Array($0.utf8) } })
        for index in keys.indices where new.remove(Array(keys[index].utf8)) != nil { counted[index] = true }
    }

    @discardableResult
    private static func record(_ batch: ResultBatch, lock: String, dialect: SQLDialect, now: Date, on connection: any SQLConnection) async throws
        -> Bool
    {
        let id = batch.notificationId
        // Locked, so the send is not given up while these results are counted, and its counts
        // are this transaction's to change. A send that ended has its final counts: what
        // arrives after (a duplicate, or a result past the deadline) changes nothing.
        let select = "SELECT state, hub, \(tallyColumns) FROM notifications WHERE notification_id = ?\(lock)"
        var current = try await connection.query(select, [.text(id)])
        if current.isEmpty {
            // A result that names no hub (a record rejected before its hub could be read) has
            // no send to start.
            guard !batch.hub.isEmpty else { return false }
            // Results of a request sent straight into Kafka arrive for a notification the
            // ingress never saw: it starts here, with no deadline of its own.
            try await Self.insertEnqueued(id, hub: batch.hub, enqueuedAt: now, deadline: nil, now: now, on: connection)
            current = try await connection.query(select, [.text(id)])
        }
        // Only the send's own hub's results count: a record naming another hub (or none) under
        // its id, which another hub's producer or a garbage record keyed by the id could make,
        // changes nothing.
        guard let row = current.first, row.text("hub") == batch.hub, let state = row.text("state").flatMap(NotificationState.init(rawValue:)),
            !state.hasEnded
        else {
            return false
        }
        var tally = Self.tally(of: row)
        var fresh = false
        // Whether the send counted its targets without keeping a row for any.
        var keptNoTargets = false
        var dispatchedText: String?
        // The first dispatch summary counts: the send expects no number of targets before it,
        // and a summary published twice, or again with a send published again, finds one.
        if let dispatched = batch.dispatched, tally.expected == nil {
            fresh = true
            tally.expected = dispatched.values.reduce(0, +)
            dispatchedText = Self.dispatchedText(dispatched)
        }
        if let results = batch.results, !results.isEmpty {
            // Each target counts once, however its results were batched: a send published
            // again is dispatched again, and its batches may be cut differently.
            let keys = batch.targetKeys
            var counted = Array(repeating: false, count: keys.count)
            if tally.received == 0, tally.expected == keys.count, Set(keys.lazy.map { Array($0.utf8) }).count == keys.count {
                // The send's first results, and every target it dispatched once each (as a
                // single-user send's one result is): each counts, and the send ends here, so
                // no row per target is kept to tell repeats apart, only to be deleted at its
                // end in the same transaction (two statements of a single-user send's result).
                for index in keys.indices { counted[index] = true }
                keptNoTargets = true
            } else {
                var start = 0
                while start < keys.count {
                    let chunk = start..<min(start + Self.targetsPerStatement, keys.count)
                    try await Self.countNew(keys[chunk], of: id, into: &counted, dialect: dialect, on: connection)
                    start = chunk.upperBound
                }
            }
            var counts: [Outcome: Int] = [:]
            var failed: [(DeliveryResult, String)] = []
            for index in keys.indices where counted[index] {
                counts[results[index].outcome, default: 0] += 1
                if results[index].outcome != .delivered { failed.append((results[index], keys[index])) }
            }
            try await Self.noteFailures(failed, of: batch, now: now, on: connection)
            let total = counts.values.reduce(0, +)
            if total > 0 {
                fresh = true
                let platform = batch.platform?.rawValue ?? "none"
                for (outcome, count) in counts.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
                    try await Self.addCount(id, platform: platform, outcome: outcome, count: Int64(count), on: connection)
                }
                tally.received += total
                tally.expired += counts[.expired] ?? 0
                tally.rejected += counts[.rejected] ?? 0
            }
        }
        guard fresh else { return false }
        // The counts, the state they settle and when it ended, in one statement.
        let settled = state.settled(by: tally)
        let ended = settled.hasEnded
        try await connection.execute(
            """
            UPDATE notifications SET expected = ?, dispatched = COALESCE(?, dispatched), received = ?, expired = ?, rejected = ?,
                started_at = COALESCE(started_at, ?), progress_at = ?, state = ?,
                ended_at = CASE WHEN ? = 1 THEN COALESCE(ended_at, ?) ELSE NULL END,
                deadline = CASE WHEN ? = 1 THEN COALESCE(ended_at, ?) ELSE deadline END
            WHERE notification_id = ?
            """,
            [
                tally.expected.map { .integer(Int64($0)) } ?? .null, dispatchedText.map(SQLValue.text) ?? .null, .integer(Int64(tally.received)),
                .integer(Int64(tally.expired)), .integer(Int64(tally.rejected)), SQLValue(now), SQLValue(now), .text(settled.rawValue),
                SQLValue(ended), SQLValue(now), SQLValue(ended), SQLValue(now), .text(id),
            ])
        if ended { try await forgetWork(of: id, counted: keptNoTargets ? 0 : tally.received, on: connection) }
        return true
    }

    public func sweepExpired(now: Date, keys: TimeInterval, dispatches: TimeInterval) async throws {
        try await sweepExpired(now: now, keys: keys, dispatches: dispatches, rowsPerTransaction: Self.rowsPerSweep)
    }

    /// `sweepExpired`, deleting at most `rowsPerTransaction` rows a transaction and looking at
    /// `registrationsPerRound` expired registrations (tests make them small, to see a sweep go
    /// on past its first transaction, and its next round on past the first's).
    func sweepExpired(
        now: Date, keys: TimeInterval, dispatches: TimeInterval, rowsPerTransaction: Int,
        registrationsPerRound: Int = SQLRegistrationStore.registrationsPerRound
    ) async throws {
        // Each table on its own, a transaction of at most `rowsPerTransaction` rows at a time
        // (by primary key), so no sweep holds SQLite's writer long; one that fails leaves the
        // others to do.
        let cutoffs: [(table: String, key: String, column: String, kept: TimeInterval)] = [
            ("idempotency_keys", "scope, idempotency_key", "created_at", keys),
            ("dispatched_requests", "hub, notification_id", "dispatched_at", dispatches),
            ("failed_targets", "notification_id, target", "at", Self.errorDetailsKept), ("pruned_handles", "seq", "pruned_at", Self.feedbackKept),
            ("registration_ids", "hub, registration_id", "issued_at", Self.issuedIdsKept),
            // A sender who never stores another kept theirs (up to 20 MiB) for ever.
            ("rich_payloads", "id", "created_at", RichPayloadQuota.defaultRetention),
        ]
        var failure: (any Error)?
        for cutoff in cutoffs {
            do {
                while true {
                    let deleted = try await database.write { connection in
                        try await Self.changedRows(
                            """
                            DELETE FROM \(cutoff.table) WHERE (\(cutoff.key)) IN
                                (SELECT \(cutoff.key) FROM \(cutoff.table) WHERE \(cutoff.column) < ? LIMIT ?)
                            """, returning: cutoff.column, [SQLValue(now.addingTimeInterval(-cutoff.kept)), .integer(Int64(rowsPerTransaction))],
                            on: connection)
                    }
                    if deleted < rowsPerTransaction { break }
                }
            } catch {
                failure = failure ?? error
            }
        }
        // Registrations past their ExpirationTime, a few hundred a transaction (each may take
        // an installation's rows with it), at most `registrationsPerRound` a sweep: a backlog
        // (the first round after the upgrade) goes over several rounds. A sweep goes on where
        // the one before stopped (kept after each transaction, so a transaction that fails
        // costs no progress), and from the first again once it reached the last, in the same
        // round while it may look at more, so rows it passes (a renewal, a document that does
        // not read), however many, hold up none behind them. Rows that expire as time passes
        // come after where it stopped, as they expire later than any it looked at; a row
        // written with an expiry before that point (one already past, one moved earlier) waits
        // until the sweep starts again from the first.
        do {
            let limit = max(1, min(rowsPerTransaction, Self.registrationsPerSweep))
            var looked = 0
            var wrapped = false
            while looked < registrationsPerRound, !Task.isCancelled {
                let cursor = expiryCursor.withLock { $0 }
                let pass = try await sweepExpiredRegistrations(now: now, limit: limit, after: cursor)
                looked += pass.looked
                let reachedLast = pass.looked < limit
                expiryCursor.withLock { $0 = reachedLast ? nil : pass.last ?? cursor }
                if reachedLast {
                    // Around from the first once, not twice within one sweep.
                    if wrapped || cursor == nil { break }
                    wrapped = true
                }
            }
        } catch {
            failure = failure ?? error
        }
        // Installations whose push channel expired, past their ExpirationTime: each row looked
        // at goes, or moves to a later time, so a sweep goes on while it finds full counts.
        do {
            let limit = max(1, min(rowsPerTransaction, Self.registrationsPerSweep))
            var looked = 0
            while looked < registrationsPerRound, !Task.isCancelled {
                let found = try await sweepExpiredInstallations(now: now, limit: limit)
                looked += found
                if found < limit { break }
            }
        } catch {
            failure = failure ?? error
        }
        if let failure { throw failure }
    }

    /// Expired registrations `sweepExpired` looks at a transaction, and a sweep.
    static let registrationsPerSweep = 500
    static let registrationsPerRound = 10_000

    /// Rows `sweepExpired` deletes a transaction.
    static let rowsPerSweep = 10_000

    public func sweepEndedSends(endedBefore cutoff: Date, limit: Int) async throws -> Int {
        // On PostgreSQL the rows are locked as they are found, and rows another replica's round
        // holds are passed over: rounds running at once take sets of their own, and a row is
        // deleted only as it was found (ended). SQLite has one writer.
        let lock = database.dialect == .postgres ? " FOR UPDATE SKIP LOCKED" : ""
        return try await database.write { connection in
            // The ids first, then each table by them: the rows of one set of sends go together,
            // where a subquery in every statement could pick another set on PostgreSQL. An ended
            // send's deadline is its end, so the (state, deadline) index finds them, one state at
            // a time in the order they ended: the index's own order, nothing to sort, whatever
            // the planner thinks of how many rows are past the cutoff.
            var ids: [String] = []
            for state in Self.statesEnded where ids.count < limit {
                ids += try await connection.query(
                    "SELECT notification_id FROM notifications WHERE state = ? AND deadline < ? ORDER BY deadline LIMIT ?\(lock)",
                    [.text(state.rawValue), SQLValue(cutoff), .integer(Int64(limit - ids.count))]
                ).compactMap { $0.text("notification_id") }
            }
            var start = 0
            while start < ids.count {
                // Always `idsPerSweepStatement` values, the last id repeated to fill them: one
                // statement's text for each table, prepared once.
                let chunk = ids[start..<min(start + Self.idsPerSweepStatement, ids.count)]
                let binds = (0..<Self.idsPerSweepStatement).map { SQLValue.text(chunk[min(chunk.startIndex + $0, chunk.endIndex - 1)]) }
                for table in Self.tablesOfASend {
                    try await connection.execute("DELETE FROM \(table) WHERE notification_id IN (\(Self.sweepPlaceholders))", binds)
                }
                start += Self.idsPerSweepStatement
            }
            return ids.count
        }
    }

    /// The states in which a send has ended.
    static let statesEnded = NotificationState.allCases.filter(\.hasEnded)

    /// What is kept for a send, by its id, the notification's own row last. Its error details
    /// (`failed_targets`, up to a row per target of a broadcast) are left to their own sweep,
    /// by age, a bounded number a transaction; its kept request (`unfinished_sends`) went in
    /// the transaction that ended it (`forgetWork`), and a cancelled scheduled send never had
    /// one.
    static let tablesOfASend = ["notification_counts", "scheduled_notifications", "notifications"]
    /// Ids of ended sends a DELETE names.
    static let idsPerSweepStatement = 100
    private static let sweepPlaceholders = placeholders(idsPerSweepStatement)

    /// How long a notification's failed targets are kept (`GET …/messages/{id}/errors`).
    static let errorDetailsKept: TimeInterval = 7 * 86_400
    /// How long a pruned handle is kept (`GET /{hub}/feedback`).
    static let feedbackKept: TimeInterval = 30 * 86_400
    /// How long a registration id issued and not yet used is kept (`POST …/registrationIDs`,
    /// the app backend's `POST /api/register`): a Listen key ships in apps, and every such
    /// call made a row for ever.
    static let issuedIdsKept: TimeInterval = 86_400

    /// `text` with each control character (U+0000 to U+001F, U+007F) a space: text that came
    /// from outside and is only shown (PostgreSQL refuses U+0000 in text).
    static func printable(_ text: String) -> String {
        guard FieldCheck.hasControlCharacters(text) else { return text }
        return String(String.UnicodeScalarView(text.unicodeScalars.map { $0.isASCII && FieldCheck.isControl(UInt8($0.value)) ? " " : $0 }))
    }

    /// Keeps the targets of a batch that did not end in success (its error details), and the
    /// registrations among them whose handles were reported invalid (the hub's feedback).
    private static func noteFailures(_ failed: [(DeliveryResult, String)], of batch: ResultBatch, now: Date, on connection: any SQLConnection)
        async throws
    {
        let platform = batch.platform?.rawValue ?? "none"
        // A push service's words, which a device's own endpoint may choose (Web Push): printable,
        // and at most 500 bytes.
        func reason(_ result: DeliveryResult) -> SQLValue { result.pnsReason.map { .text(Self.printable($0.utf8Prefix(500))) } ?? .null }
        func status(_ result: DeliveryResult) -> SQLValue { result.pnsStatus.map { .integer(Int64($0)) } ?? .null }
        // Several rows a statement, as counted targets are: a broadcast with many dead
        // handles costs a statement per 25 of them, not one each.
        try await insertRows(
            "INSERT INTO failed_targets (notification_id, target, platform, registration_id, handle, outcome, pns_status, pns_reason, attempts, at) VALUES",
            columns: 10, suffix: " ON CONFLICT DO NOTHING",
            rows: failed.map { result, key in
                [
                    .text(batch.notificationId), .text(key), .text(platform), result.registrationId.map(SQLValue.text) ?? .null,
                    result.handle.map(SQLValue.text) ?? .null, .text(result.outcome.rawValue), status(result), reason(result),
                    .integer(Int64(result.attempts)), SQLValue(now),
                ]
            }, on: connection)
        guard !batch.hub.isEmpty else { return }
        try await insertRows(
            "INSERT INTO pruned_handles (hub, platform, handle, registration_id, notification_id, pns_status, pns_reason, pruned_at) VALUES",
            columns: 8, suffix: "",
            rows: failed.compactMap { result, _ in
                guard result.outcome == .invalidHandle, let registrationId = result.registrationId, let handle = result.handle else { return nil }
                return [
                    .text(batch.hub), .text(platform), .text(handle), .text(registrationId), .text(batch.notificationId), status(result),
                    reason(result),
                    SQLValue(now),
                ]
            }, on: connection)
    }

    /// `rows` of `columns` values each, inserted `rowsPerInsert` a statement.
    private static func insertRows(_ insert: String, columns: Int, suffix: String, rows: [[SQLValue]], on connection: any SQLConnection) async throws
    {
        // Most result batches have no failed target: nothing to make.
        guard !rows.isEmpty else { return }
        let placeholder = "(" + Self.placeholders(columns) + ")"
        var start = 0
        while start < rows.count {
            let chunk = rows[start..<min(start + rowsPerInsert, rows.count)]
            try await connection.execute(
                "\(insert) \(Array(repeating: placeholder, count: chunk.count).joined(separator: ", "))\(suffix)", Array(chunk.joined()))
            start += rowsPerInsert
        }
    }

    /// Rows of failed targets or feedback a statement (within the 256 values a cached
    /// statement takes).
    static let rowsPerInsert = 25

    public func failedTargets(hub: String, notificationId: String, after: String?, limit: Int) async throws -> [FailedTarget] {
        try await database.read { connection in
            guard
                !(try await connection.query(
                    "SELECT notification_id FROM notifications WHERE notification_id = ? AND hub = ?", [.text(notificationId), .text(hub)]
                ).isEmpty)
            else { return [] }
            return try await connection.query(
                """
                SELECT target, platform, registration_id, handle, outcome, pns_status, pns_reason, attempts, at FROM failed_targets
                WHERE notification_id = ? AND target > ? ORDER BY target LIMIT ?
                """, [.text(notificationId), .text(after ?? ""), .integer(Int64(max(1, limit)))]
            ).map { row in
                FailedTarget(
                    target: row.text("target") ?? "", platform: row.text("platform").flatMap(Platform.init(rawValue:)),
                    result: Self.deliveryResult(row), at: row.date("at") ?? Date(timeIntervalSince1970: 0))
            }
        }
    }

    public func prunedHandles(hub: String, since: Date, after: Int64?, limit: Int) async throws -> [PrunedHandle] {
        try await database.read { connection in
            try await connection.query(
                """
                SELECT seq, platform, handle, registration_id, notification_id, pns_status, pns_reason, pruned_at FROM pruned_handles
                WHERE hub = ? AND seq > ? AND pruned_at >= ? ORDER BY seq LIMIT ?
                """, [.text(hub), .integer(after ?? 0), SQLValue(since), .integer(Int64(max(1, limit)))]
            ).map { row in
                PrunedHandle(
                    sequence: row.integer("seq") ?? 0, platform: row.text("platform").flatMap(Platform.init(rawValue:)),
                    handle: row.text("handle") ?? "",
                    registrationId: row.text("registration_id") ?? "", notificationId: row.text("notification_id") ?? "",
                    pnsStatus: row.integer("pns_status").map(Int.init), pnsReason: row.text("pns_reason"),
                    prunedAt: row.date("pruned_at") ?? Date(timeIntervalSince1970: 0))
            }
        }
    }

    /// The columns a notification's state is settled by.
    static let tallyColumns = "expected, received, expired, rejected"

    static func tally(of row: SQLRow) -> NotificationState.Tally {
        NotificationState.Tally(
            expected: row.integer("expected").map(Int.init), received: Int(row.integer("received") ?? 0),
            expired: Int(row.integer("expired") ?? 0), rejected: Int(row.integer("rejected") ?? 0))
    }

    public func notification(hub: String, id: String) async throws -> NotificationOutcome? {
        try await database.read { connection in
            guard
                let row = try await connection.query(
                    "SELECT * FROM notifications WHERE notification_id = ? AND hub = ?", [.text(id), .text(hub)]
                ).first
            else { return nil }
            let counts = try await connection.query("SELECT platform, outcome, count FROM notification_counts WHERE notification_id = ?", [.text(id)])
            return Self.notificationOutcome(row, id: id, hub: hub, counts: counts)
        }
    }

    /// A notification from its row and its rows of `notification_counts`.
    static func notificationOutcome(_ row: SQLRow, id: String, hub: String, counts rows: [SQLRow]) -> NotificationOutcome {
        var counts: [Platform: [Outcome: Int]] = [:]
        for count in rows {
            guard let platform = count.text("platform").flatMap(Platform.init(rawValue:)),
                let outcome = count.text("outcome").flatMap(Outcome.init(rawValue:))
            else { continue }
            counts[platform, default: [:]][outcome] = Int(count.integer("count") ?? 0)
        }
        return NotificationOutcome(
            notificationId: id, hub: hub, state: row.text("state").flatMap(NotificationState.init(rawValue:)) ?? .enqueued,
            enqueuedAt: row.date("enqueued_at") ?? Date(timeIntervalSince1970: 0), startedAt: row.date("started_at"),
            endedAt: row.date("ended_at"), expectedTargets: row.integer("expected").map(Int.init), counts: counts,
            reason: row.text("reason"), format: row.text("format").flatMap(NotificationFormat.init(rawValue:)), tags: row.text("tags"),
            body: row.text("body"), dispatched: row.text("dispatched").flatMap(Self.dispatchedPlatforms),
            audience: row.text("audience").flatMap(NotificationOutcome.AudienceKind.init(rawValue:)))
    }

    /// A target's result as `failed_targets` keeps it.
    static func deliveryResult(_ row: SQLRow) -> DeliveryResult {
        DeliveryResult(
            registrationId: row.text("registration_id"), handle: row.text("handle"),
            outcome: row.text("outcome").flatMap(Outcome.init(rawValue:)) ?? .failed, pnsStatus: row.integer("pns_status").map(Int.init),
            pnsReason: row.text("pns_reason"), attempts: Int(row.integer("attempts") ?? 0), dwellMs: 0)
    }

    /// The platforms a dispatch summary (`{"apns":3,…}`) sent to.
    static func dispatchedPlatforms(_ text: String) -> [Platform]? {
        guard let counts = try? JSONDecoder().decode([String: Int].self, from: Data(text.utf8)) else { return nil }
        return Platform.allCases.filter { (counts[$0.rawValue] ?? 0) > 0 }
    }

    public func pruneInvalidHandle(hub: String, registrationId: String, handle: String?) async throws {
        let dialect = database.dialect
        try await database.write { connection in
            // Only while the registration still holds the handle its push service called
            // invalid: a device that moved to a new handle (its registration updated, its
            // installation given a new channel) keeps it when the old one's result comes later.
            var select = "SELECT seq, installation_id FROM registrations WHERE hub = ? AND registration_id = ?"
            var binds: [SQLValue] = [.text(hub), .text(registrationId)]
            if let handle {
                select += " AND handle = ?"
                binds.append(.text(handle))
            }
            guard let row = try await connection.query(select, binds).first else { return }
            if let installationId = row.text("installation_id") {
                // The installation row is locked first, as every writer of an installation
                // takes it (on PostgreSQL; SQLite has one writer).
                let document = try await connection.query(
                    "SELECT document FROM installations WHERE hub = ? AND installation_id = ?" + (dialect == .postgres ? " FOR UPDATE" : ""),
                    [.text(hub), .text(installationId)]
                ).first?.text("document")
                // With the installation held, its rows change no more: whether they still hold
                // the handle is read again (on PostgreSQL a write of the installation may have
                // replaced it since the read above, which took no lock).
                if handle != nil, try await connection.query(select, binds).isEmpty { return }
                try await connection.execute("DELETE FROM registrations WHERE hub = ? AND installation_id = ?", [.text(hub), .text(installationId)])
                if let document {
                    var installation = try Self.installation(document: document)
                    installation.pushChannelExpired = true
                    let updated = Self.document(installation)
                    try await connection.execute(
                        "UPDATE installations SET document = ?, expired = 1 WHERE hub = ? AND installation_id = ?",
                        [.text(updated), .text(hub), .text(installationId)])
                    // Its registrations carried its ExpirationTime to the sweep; now this does.
                    if let expiry = installation.expirationTime {
                        try await connection.execute(
                            """
                            INSERT INTO installation_expiries (hub, installation_id, expires_at) VALUES (?, ?, ?)
                            ON CONFLICT (hub, installation_id) DO UPDATE SET expires_at = excluded.expires_at
                            """, [.text(hub), .text(installationId), SQLValue(expiry)])
                    }
                }
            } else if let seq = row.integer("seq") {
                // The handle compared again as the row goes, for the same reason.
                if let handle {
                    try await connection.execute("DELETE FROM registrations WHERE seq = ? AND handle = ?", [.integer(seq), .text(handle)])
                } else {
                    try await connection.execute("DELETE FROM registrations WHERE seq = ?", [.integer(seq)])
                }
            }
        }
    }
}
