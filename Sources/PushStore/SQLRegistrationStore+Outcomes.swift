import Foundation
import PushModel

extension SQLRegistrationStore: OutcomeStore {
    public func recordEnqueued(_ request: SendRequest, deadline: Date, keep: Bool, now: Date) async throws {
        let text = keep ? String(decoding: try WireCoding.encode(request), as: UTF8.self) : nil
        try await database.write { connection in
            try await Self.insertEnqueued(request.notificationId, hub: request.hub, enqueuedAt: request.enqueuedAt, deadline: deadline, now: now, on: connection)
            if let text { try await Self.keep(request, text: text, publishedAt: now, on: connection) }
        }
    }

    /// The notification's row, state Enqueued, unless it exists.
    static func insertEnqueued(_ id: String, hub: String, enqueuedAt: Date, deadline: Date?, now: Date, on connection: any SQLConnection) async throws {
        try await connection.execute(
            """
            INSERT INTO notifications (notification_id, hub, state, enqueued_at, deadline, progress_at, received, expired, rejected)
            VALUES (?, ?, ?, ?, ?, ?, 0, 0, 0)
            ON CONFLICT (notification_id) DO NOTHING
            """, [.text(id), .text(hub), .text(NotificationState.enqueued.rawValue), SQLValue(enqueuedAt), SQLValue(deadline), SQLValue(now)])
    }

    /// Keeps `request` until its notification ends.
    static func keep(_ request: SendRequest, text: String, publishedAt: Date, on connection: any SQLConnection) async throws {
        try await connection.execute(
            """
            INSERT INTO unfinished_sends (notification_id, hub, request, published_at, publishes) VALUES (?, ?, ?, ?, 1)
            ON CONFLICT (notification_id) DO NOTHING
            """, [.text(request.notificationId), .text(request.hub), .text(text), SQLValue(publishedAt)])
    }

    public func forgetEnqueued(hub: String, notificationId: String) async throws {
        try await database.write { connection in
            let forgotten = try await connection.query(
                "DELETE FROM notifications WHERE notification_id = ? AND hub = ? AND state = ? RETURNING notification_id",
                [.text(notificationId), .text(hub), .text(NotificationState.enqueued.rawValue)])
            guard !forgotten.isEmpty else { return }
            try await connection.execute("DELETE FROM unfinished_sends WHERE notification_id = ?", [.text(notificationId)])
        }
    }

    /// States in which a notification has not ended.
    static let openStates = "('\(NotificationState.enqueued.rawValue)', '\(NotificationState.processing.rawValue)')"

    public func claimUnfinished(now: Date, quietSince: Date, limit: Int) async throws -> [SendRequest] {
        let rows = try await database.write { connection in
            // The condition is checked again by the UPDATE itself: of replicas racing for a row,
            // the one whose update lands first takes it.
            try await connection.query(
                """
                UPDATE unfinished_sends SET published_at = ?, publishes = publishes + 1
                WHERE notification_id IN (
                    SELECT u.notification_id FROM unfinished_sends u JOIN notifications n ON n.notification_id = u.notification_id
                    WHERE u.published_at < ? AND (n.progress_at IS NULL OR n.progress_at < ?) AND n.state IN \(Self.openStates)
                    ORDER BY u.published_at LIMIT ?)
                AND published_at < ?
                RETURNING request
                """, [SQLValue(now), SQLValue(quietSince), SQLValue(quietSince), .integer(Int64(limit)), SQLValue(quietSince)])
        }
        return try rows.compactMap { $0.text("request") }.map { try WireCoding.decode(SendRequest.self, from: Data($0.utf8)) }
    }

    public func abandonStalled(now: Date, deadlineBefore: Date, quietSince: Date, limit: Int) async throws -> [AbandonedSend] {
        try await database.write { connection in
            let stalled = try await connection.query(
                """
                SELECT notification_id, hub, expected, received, dispatched FROM notifications
                WHERE state IN \(Self.openStates) AND deadline < ? AND (progress_at IS NULL OR progress_at < ?)
                ORDER BY deadline LIMIT ?
                """, [SQLValue(deadlineBefore), SQLValue(quietSince), .integer(Int64(limit))])
            var abandoned: [AbandonedSend] = []
            for row in stalled {
                guard let id = row.text("notification_id"), let hub = row.text("hub") else { continue }
                // Per platform: what the summary announced, less what was reported.
                var unreported: [String: Int64] = [:]
                if let text = row.text("dispatched"), let announced = try? JSONDecoder().decode([String: Int64].self, from: Data(text.utf8)) {
                    unreported = announced
                    for count in try await connection.query(
                        "SELECT platform, CAST(SUM(count) AS BIGINT) AS reported FROM notification_counts WHERE notification_id = ? GROUP BY platform", [.text(id)])
                    {
                        guard let platform = count.text("platform"), unreported[platform] != nil else { continue }
                        unreported[platform]! -= count.integer("reported") ?? 0
                    }
                    unreported = unreported.filter { $0.value > 0 }
                }
                let total = unreported.values.reduce(0, +)
                let reason: String
                if let expected = row.integer("expected") {
                    reason = "no progress by the deadline: \(total) of \(expected) targets had no result and count as expired"
                } else {
                    reason = "no progress by the deadline: never dispatched (the request was lost before the dispatcher read it, or no dispatcher ran)"
                }
                let won = try await connection.query(
                    """
                    UPDATE notifications SET state = ?, reason = ?, ended_at = ?, received = received + ?, expired = expired + ?
                    WHERE notification_id = ? AND state IN \(Self.openStates) RETURNING notification_id
                    """,
                    [.text(NotificationState.abandoned.rawValue), .text(reason), SQLValue(now), .integer(total), .integer(total), .text(id)])
                guard !won.isEmpty else { continue }
                for (platform, count) in unreported.sorted(by: { $0.key < $1.key }) {
                    try await Self.addCount(id, platform: platform, outcome: .expired, count: count, on: connection)
                }
                try await connection.execute("DELETE FROM unfinished_sends WHERE notification_id = ?", [.text(id)])
                abandoned.append(AbandonedSend(notificationId: id, hub: hub, reason: reason, unreported: Int(total)))
            }
            return abandoned
        }
    }

    static func addCount(_ id: String, platform: String, outcome: Outcome, count: Int64, on connection: any SQLConnection) async throws {
        try await connection.execute(
            """
            INSERT INTO notification_counts (notification_id, platform, outcome, count) VALUES (?, ?, ?, ?)
            ON CONFLICT (notification_id, platform, outcome) DO UPDATE SET count = notification_counts.count + excluded.count
            """, [.text(id), .text(platform), .text(outcome.rawValue), .integer(count)])
    }

    @discardableResult
    public func recordOutcomes(_ batch: ResultBatch, now: Date) async throws -> Bool {
        let receipt = batch.receipt
        return try await database.write { connection in
            let fresh = try await connection.query(
                "INSERT INTO result_receipts (notification_id, receipt) VALUES (?, ?) ON CONFLICT DO NOTHING RETURNING receipt",
                [.text(batch.notificationId), .text(receipt)])
            guard !fresh.isEmpty else { return false }
            // Results of a request sent straight into Kafka arrive for a notification the
            // ingress never saw: it starts here, with no deadline of its own.
            try await Self.insertEnqueued(batch.notificationId, hub: batch.hub, enqueuedAt: now, deadline: nil, now: now, on: connection)
            // A notification given up has its final counts: what arrives after changes nothing.
            let given = try await connection.query(
                "UPDATE notifications SET progress_at = ? WHERE notification_id = ? RETURNING reason", [SQLValue(now), .text(batch.notificationId)])
            guard given.first?.text("reason") == nil else { return true }
            if let dispatched = batch.dispatched {
                let perPlatform = Dictionary(uniqueKeysWithValues: dispatched.map { ($0.key.rawValue, $0.value) })
                let text = String(decoding: try JSONEncoder().encode(perPlatform), as: UTF8.self)
                try await connection.execute(
                    "UPDATE notifications SET expected = ?, dispatched = ?, started_at = COALESCE(started_at, ?) WHERE notification_id = ?",
                    [.integer(Int64(dispatched.values.reduce(0, +))), .text(text), SQLValue(now), .text(batch.notificationId)])
            }
            if let results = batch.results {
                var counts: [Outcome: Int] = [:]
                for result in results { counts[result.outcome, default: 0] += 1 }
                let platform = batch.platform?.rawValue ?? "none"
                for (outcome, count) in counts {
                    try await Self.addCount(batch.notificationId, platform: platform, outcome: outcome, count: Int64(count), on: connection)
                }
                try await connection.execute(
                    """
                    UPDATE notifications SET received = received + ?, expired = expired + ?, rejected = rejected + ?,
                        started_at = COALESCE(started_at, ?) WHERE notification_id = ?
                    """,
                    [.integer(Int64(results.count)), .integer(Int64(counts[.expired] ?? 0)), .integer(Int64(counts[.rejected] ?? 0)),
                     SQLValue(now), .text(batch.notificationId)])
            }
            try await Self.settleState(batch.notificationId, now: now, on: connection)
            return true
        }
    }

    /// Moves a notification to the state its counts call for; a cancelled one stays so.
    private static func settleState(_ id: String, now: Date, on connection: any SQLConnection) async throws {
        guard let row = try await connection.query(
            "SELECT state, expected, received, expired, rejected FROM notifications WHERE notification_id = ?", [.text(id)]
        ).first, let current = row.text("state").flatMap(NotificationState.init(rawValue:)), current != .cancelled
        else { return }
        let expected = row.integer("expected")
        let received = row.integer("received") ?? 0
        let state: NotificationState
        if (row.integer("rejected") ?? 0) > 0 {
            state = .abandoned
        } else if expected == 0 {
            state = .noTargetFound
        } else if let expected, received >= expected {
            state = (row.integer("expired") ?? 0) == received ? .abandoned : .completed
        } else {
            state = .processing
        }
        let ended = [.completed, .noTargetFound, .abandoned].contains(state)
        try await connection.execute(
            "UPDATE notifications SET state = ?, ended_at = CASE WHEN ? = 1 THEN COALESCE(ended_at, ?) ELSE NULL END WHERE notification_id = ?",
            [.text(state.rawValue), SQLValue(ended), SQLValue(now), .text(id)])
        // An ended notification's request need not be kept for publishing again.
        if ended { try await connection.execute("DELETE FROM unfinished_sends WHERE notification_id = ?", [.text(id)]) }
    }

    public func notification(hub: String, id: String) async throws -> NotificationOutcome? {
        try await database.read { connection in
            guard let row = try await connection.query(
                "SELECT * FROM notifications WHERE notification_id = ? AND hub = ?", [.text(id), .text(hub)]
            ).first else { return nil }
            var counts: [Platform: [Outcome: Int]] = [:]
            for count in try await connection.query("SELECT platform, outcome, count FROM notification_counts WHERE notification_id = ?", [.text(id)]) {
                guard let platform = count.text("platform").flatMap(Platform.init(rawValue:)),
                    let outcome = count.text("outcome").flatMap(Outcome.init(rawValue:))
                else { continue }
                counts[platform, default: [:]][outcome] = Int(count.integer("count") ?? 0)
            }
            return NotificationOutcome(
                notificationId: id, hub: hub, state: row.text("state").flatMap(NotificationState.init(rawValue:)) ?? .enqueued,
                enqueuedAt: row.date("enqueued_at") ?? Date(timeIntervalSince1970: 0), startedAt: row.date("started_at"),
                endedAt: row.date("ended_at"), expectedTargets: row.integer("expected").map(Int.init), counts: counts,
                reason: row.text("reason"))
        }
    }

    public func pruneInvalidHandle(hub: String, registrationId: String) async throws {
        try await database.write { connection in
            guard let row = try await connection.query(
                "SELECT seq, installation_id FROM registrations WHERE hub = ? AND registration_id = ?", [.text(hub), .text(registrationId)]
            ).first else { return }
            if let installationId = row.text("installation_id") {
                try await connection.execute("DELETE FROM registrations WHERE hub = ? AND installation_id = ?", [.text(hub), .text(installationId)])
                if let document = try await connection.query(
                    "SELECT document FROM installations WHERE hub = ? AND installation_id = ?", [.text(hub), .text(installationId)]
                ).first?.text("document") {
                    var installation = try WireCoding.makeDecoder().decode(Installation.self, from: Data(document.utf8))
                    installation.pushChannelExpired = true
                    let updated = String(decoding: try WireCoding.makeEncoder().encode(installation), as: UTF8.self)
                    try await connection.execute(
                        "UPDATE installations SET document = ? WHERE hub = ? AND installation_id = ?",
                        [.text(updated), .text(hub), .text(installationId)])
                }
            } else if let seq = row.integer("seq") {
                try await connection.execute("DELETE FROM registrations WHERE seq = ?", [.integer(seq)])
            }
        }
    }
}
