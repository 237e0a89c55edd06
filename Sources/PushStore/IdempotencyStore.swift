import Foundation
import PushModel

/// What a caller's `Idempotency-Key` found.
public enum IdempotencyClaim: Sendable, Equatable {
    /// New (or its last use is past the window, or abandoned): the caller sends, then
    /// `completeIdempotencyKey` or `releaseIdempotencyKey` with `token`, which names this
    /// claim (a later claim of an abandoned key has another).
    /// `reusing`: the notification id a request with this key and fingerprint was given
    /// before, which could not be queued for certain (Kafka did not answer): the retry sends
    /// under it, so a record written after all is dispatched once.
    case claimed(token: String, reusing: String? = nil)
    /// Sent before with the same request: answer as then.
    case replay(notificationId: String, collection: String)
    /// Used before with another request.
    case differentRequest
    /// The first request with this key is still being accepted.
    case inProgress

    /// The claim's token, when the key was claimed.
    public var token: String? {
        if case .claimed(let token, _) = self { return token }
        return nil
    }

    /// The notification id a claim sends under again, when it does.
    public var reusing: String? {
        if case .claimed(_, let reusing) = self { return reusing }
        return nil
    }
}

/// Idempotency keys of sends, and the SendRequests the dispatcher took (PushHub's additions).
public protocol IdempotencyStore: Sendable {
    /// Claims `key` in `scope` for a request whose fingerprint is `fingerprint`. A key used
    /// more than `window` ago is new again; one claimed and neither completed nor released
    /// within `pendingTimeout` (its ingress went away) may be claimed again.
    func claimIdempotencyKey(
        scope: String, key: String, fingerprint: String, now: Date, window: TimeInterval, pendingTimeout: TimeInterval
    ) async throws -> IdempotencyClaim
    /// Records what a claimed key's request answered; false when the claim `token` names was
    /// taken over (abandoned, then claimed again).
    @discardableResult
    func completeIdempotencyKey(scope: String, key: String, token: String, notificationId: String, collection: String) async throws -> Bool
    /// Notes that a claimed key's request may or may not have been queued under
    /// `notificationId` (the queue did not answer): a retry with the same request sends under
    /// that id again; only the claim `token` names.
    func failIdempotencyKey(scope: String, key: String, token: String, notificationId: String) async throws
    /// Forgets a claimed key whose request was not accepted, so a retry may send; only the
    /// claim `token` names.
    func releaseIdempotencyKey(scope: String, key: String, token: String) async throws
    /// Notes that the dispatcher takes `notificationId` of `hub` from `source` (its record's
    /// topic, partition and offset). False when it took it from another record within
    /// `window`: a SendRequest produced twice. The same record again (a redelivery) is true.
    func claimDispatch(hub: String, notificationId: String, source: String, now: Date, window: TimeInterval) async throws -> Bool
    /// Forgets the note `claimDispatch` made from `source`, when the record could not be
    /// dispatched at all (dead-lettered), so a corrected one with the id may be.
    func releaseDispatch(hub: String, notificationId: String, source: String) async throws
}

extension SQLRegistrationStore: IdempotencyStore {
    public func claimIdempotencyKey(
        scope: String, key: String, fingerprint: String, now: Date, window: TimeInterval, pendingTimeout: TimeInterval
    ) async throws -> IdempotencyClaim {
        let dialect = database.dialect
        let token = RandomID.make()
        return try await database.write { connection in
            let inserted = try await Self.insertedOne(
                """
                INSERT INTO idempotency_keys (scope, idempotency_key, fingerprint, state, claim_token, created_at) VALUES (?, ?, ?, 'pending', ?, ?)
                ON CONFLICT (scope, idempotency_key) DO NOTHING
                """, returning: "scope", [.text(scope), .text(key), .text(fingerprint), .text(token), SQLValue(now)], on: connection)
            if inserted { return .claimed(token: token) }
            // Locked as it is read, on PostgreSQL: of two claims of a stale key, one renews it.
            guard
                let row = try await connection.query(
                    "SELECT fingerprint, state, notification_id, collection, created_at FROM idempotency_keys WHERE scope = ? AND idempotency_key = ?"
                        + (dialect == .postgres ? " FOR UPDATE" : ""), [.text(scope), .text(key)]
                ).first
            else { return .inProgress }
            let created = row.date("created_at") ?? .distantPast
            let pending = row.text("state") == "pending"
            if created < now.addingTimeInterval(-window) || (pending && created < now.addingTimeInterval(-pendingTimeout)) {
                try await connection.execute(
                    """
                    UPDATE idempotency_keys SET fingerprint = ?, state = 'pending', claim_token = ?, notification_id = NULL, collection = NULL,
                        created_at = ?
                    WHERE scope = ? AND idempotency_key = ?
                    """, [.text(fingerprint), .text(token), SQLValue(now), .text(scope), .text(key)])
                return .claimed(token: token)
            }
            if row.text("state") == "failed" {
                // Not queued for certain: sent again, under the same id when it is the same request.
                let same = row.text("fingerprint") == fingerprint
                let reusing = same ? row.text("notification_id") : nil
                try await connection.execute(
                    """
                    UPDATE idempotency_keys SET fingerprint = ?, state = 'pending', claim_token = ?, notification_id = ?, collection = NULL,
                        created_at = ?
                    WHERE scope = ? AND idempotency_key = ?
                    """, [.text(fingerprint), .text(token), reusing.map(SQLValue.text) ?? .null, SQLValue(now), .text(scope), .text(key)])
                return .claimed(token: token, reusing: reusing)
            }
            // While the first is being accepted, nothing is known yet of what it answers.
            if pending { return .inProgress }
            guard row.text("fingerprint") == fingerprint else { return .differentRequest }
            guard let id = row.text("notification_id"), let collection = row.text("collection") else { return .inProgress }
            return .replay(notificationId: id, collection: collection)
        }
    }

    @discardableResult
    public func completeIdempotencyKey(scope: String, key: String, token: String, notificationId: String, collection: String) async throws -> Bool {
        try await database.write { connection in
            try await Self.changedRows(
                """
                UPDATE idempotency_keys SET state = 'done', notification_id = ?, collection = ?
                WHERE scope = ? AND idempotency_key = ? AND claim_token = ?
                """, returning: "scope", [.text(notificationId), .text(collection), .text(scope), .text(key), .text(token)], on: connection) > 0
        }
    }

    public func failIdempotencyKey(scope: String, key: String, token: String, notificationId: String) async throws {
        try await database.write { connection in
            try await connection.execute(
                """
                UPDATE idempotency_keys SET state = 'failed', notification_id = ?
                WHERE scope = ? AND idempotency_key = ? AND claim_token = ? AND state = 'pending'
                """, [.text(notificationId), .text(scope), .text(key), .text(token)])
        }
    }

    public func releaseIdempotencyKey(scope: String, key: String, token: String) async throws {
        try await database.write { connection in
            try await connection.execute(
                "DELETE FROM idempotency_keys WHERE scope = ? AND idempotency_key = ? AND claim_token = ? AND state = 'pending'",
                [.text(scope), .text(key), .text(token)])
        }
    }

    public func releaseDispatch(hub: String, notificationId: String, source: String) async throws {
        try await database.write { connection in
            try await connection.execute(
                "DELETE FROM dispatched_requests WHERE hub = ? AND notification_id = ? AND source = ?",
                [.text(hub), .text(notificationId), .text(source)])
        }
    }

    public func claimDispatch(hub: String, notificationId: String, source: String, now: Date, window: TimeInterval) async throws -> Bool {
        let dialect = database.dialect
        return try await database.write { connection in
            let inserted = try await Self.insertedOne(
                """
                INSERT INTO dispatched_requests (hub, notification_id, source, dispatched_at) VALUES (?, ?, ?, ?)
                ON CONFLICT (hub, notification_id) DO NOTHING
                """, returning: "source", [.text(hub), .text(notificationId), .text(source), SQLValue(now)], on: connection)
            if inserted { return true }
            guard
                let row = try await connection.query(
                    "SELECT source, dispatched_at FROM dispatched_requests WHERE hub = ? AND notification_id = ?"
                        + (dialect == .postgres ? " FOR UPDATE" : ""), [.text(hub), .text(notificationId)]
                ).first
            else { return true }
            if row.text("source") == source { return true }
            guard (row.date("dispatched_at") ?? .distantPast) < now.addingTimeInterval(-window) else { return false }
            try await connection.execute(
                "UPDATE dispatched_requests SET source = ?, dispatched_at = ? WHERE hub = ? AND notification_id = ?",
                [.text(source), SQLValue(now), .text(hub), .text(notificationId)])
            return true
        }
    }
}
