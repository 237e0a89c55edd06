import Foundation
import PushModel

/// What a caller's `Idempotency-Key` found.
public enum IdempotencyClaim: Sendable, Equatable {
    /// New (or its last use is past the window, or abandoned): the caller sends, then
    /// `completeIdempotencyKey` or `releaseIdempotencyKey` with `token`, which names this
    /// claim (a later claim of an abandoned key has another).
    case claimed(token: String)
    /// Sent before with the same request: answer as then.
    case replay(notificationId: String, collection: String)
    /// Used before with another request.
    case differentRequest
    /// The first request with this key is still being accepted.
    case inProgress

    /// The claim's token, when the key was claimed.
    public var token: String? {
        if case .claimed(let token) = self { return token }
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
            let inserted = try await connection.query(
                """
                INSERT INTO idempotency_keys (scope, idempotency_key, fingerprint, state, claim_token, created_at) VALUES (?, ?, ?, 'pending', ?, ?)
                ON CONFLICT (scope, idempotency_key) DO NOTHING RETURNING scope
                """, [.text(scope), .text(key), .text(fingerprint), .text(token), SQLValue(now)])
            if !inserted.isEmpty { return .claimed(token: token) }
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
            !(try await connection.query(
                """
                UPDATE idempotency_keys SET state = 'done', notification_id = ?, collection = ?
                WHERE scope = ? AND idempotency_key = ? AND claim_token = ? RETURNING scope
                """, [.text(notificationId), .text(collection), .text(scope), .text(key), .text(token)]
            ).isEmpty)
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
            let inserted = try await connection.query(
                """
                INSERT INTO dispatched_requests (hub, notification_id, source, dispatched_at) VALUES (?, ?, ?, ?)
                ON CONFLICT (hub, notification_id) DO NOTHING RETURNING source
                """, [.text(hub), .text(notificationId), .text(source), SQLValue(now)])
            if !inserted.isEmpty { return true }
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
