import Foundation
import PushModel

extension SQLRegistrationStore: OutcomeStore {
    public func recordEnqueued(hub: String, notificationId: String, at enqueuedAt: Date) async throws {
        try await database.write { connection in
            try await connection.execute(
                """
                INSERT INTO notifications (notification_id, hub, state, enqueued_at, received, expired, rejected) VALUES (?, ?, ?, ?, 0, 0, 0)
                ON CONFLICT (notification_id) DO NOTHING
                """, [.text(notificationId), .text(hub), .text(NotificationState.enqueued.rawValue), SQLValue(enqueuedAt)])
        }
    }

    public func forgetEnqueued(hub: String, notificationId: String) async throws {
        try await database.write { connection in
            try await connection.execute(
                "DELETE FROM notifications WHERE notification_id = ? AND hub = ? AND state = ?",
                [.text(notificationId), .text(hub), .text(NotificationState.enqueued.rawValue)])
        }
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
            // ingress never saw: it starts here.
            try await connection.execute(
                """
                INSERT INTO notifications (notification_id, hub, state, enqueued_at, received, expired, rejected) VALUES (?, ?, ?, ?, 0, 0, 0)
                ON CONFLICT (notification_id) DO NOTHING
                """, [.text(batch.notificationId), .text(batch.hub), .text(NotificationState.enqueued.rawValue), SQLValue(now)])
            if let dispatched = batch.dispatched {
                try await connection.execute(
                    "UPDATE notifications SET expected = ?, started_at = COALESCE(started_at, ?) WHERE notification_id = ?",
                    [.integer(Int64(dispatched.values.reduce(0, +))), SQLValue(now), .text(batch.notificationId)])
            }
            if let results = batch.results {
                var counts: [Outcome: Int] = [:]
                for result in results { counts[result.outcome, default: 0] += 1 }
                let platform = batch.platform?.rawValue ?? "none"
                for (outcome, count) in counts {
                    try await connection.execute(
                        """
                        INSERT INTO notification_counts (notification_id, platform, outcome, count) VALUES (?, ?, ?, ?)
                        ON CONFLICT (notification_id, platform, outcome) DO UPDATE SET count = notification_counts.count + excluded.count
                        """, [.text(batch.notificationId), .text(platform), .text(outcome.rawValue), .integer(Int64(count))])
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
                endedAt: row.date("ended_at"), expectedTargets: row.integer("expected").map(Int.init), counts: counts)
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
