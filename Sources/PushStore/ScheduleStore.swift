import Foundation
import PushModel

/// Sends kept until they are due. Several ingress replicas release them; a claim makes sure
/// one of them does, and a claim left by a replica that died is taken over after a while.
public protocol ScheduleStore: Sendable {
    /// Keeps `request` until `dueAt` (its outcome reads Enqueued meanwhile).
    func schedule(_ request: SendRequest, dueAt: Date) async throws
    /// Cancels a send not yet released; false when there is none to cancel.
    func cancelScheduled(hub: String, notificationId: String) async throws -> Bool
    /// Claims up to `limit` due sends for `claimant`: pending ones, and ones claimed more than
    /// `staleAfter` ago and never marked released.
    func claimDueScheduled(now: Date, claimant: String, limit: Int, staleAfter: TimeInterval) async throws -> [SendRequest]
    /// Records that a claimed send was published at `now`: it must end by `deadline`, and with
    /// `keep` its request is kept until it ends (as `OutcomeStore.recordEnqueued` keeps one).
    func markReleased(_ request: SendRequest, deadline: Date, keep: Bool, now: Date) async throws
}

extension SQLRegistrationStore: ScheduleStore {
    enum ScheduleState: String { case pending, claimed, released, cancelled }

    public func schedule(_ request: SendRequest, dueAt: Date) async throws {
        let text = String(decoding: try WireCoding.encode(request), as: UTF8.self)
        try await database.write { connection in
            try await connection.execute(
                "INSERT INTO scheduled_notifications (notification_id, hub, due_at, request, state) VALUES (?, ?, ?, ?, ?)",
                [.text(request.notificationId), .text(request.hub), SQLValue(dueAt), .text(text), .text(ScheduleState.pending.rawValue)])
            try await connection.execute(
                """
                INSERT INTO notifications (notification_id, hub, state, enqueued_at, received, expired, rejected) VALUES (?, ?, ?, ?, 0, 0, 0)
                ON CONFLICT (notification_id) DO NOTHING
                """, [.text(request.notificationId), .text(request.hub), .text(NotificationState.enqueued.rawValue), SQLValue(request.enqueuedAt)])
        }
    }

    public func cancelScheduled(hub: String, notificationId: String) async throws -> Bool {
        try await database.write { connection in
            let cancelled = try await Self.changedRows(
                "UPDATE scheduled_notifications SET state = ? WHERE notification_id = ? AND hub = ? AND state = ?", returning: "notification_id",
                [.text(ScheduleState.cancelled.rawValue), .text(notificationId), .text(hub), .text(ScheduleState.pending.rawValue)], on: connection)
            guard cancelled > 0 else { return false }
            // Its deadline is its end, as every ended send's (`sweepEndedSends`).
            let now = Date()
            try await connection.execute(
                "UPDATE notifications SET state = ?, ended_at = ?, deadline = ? WHERE notification_id = ?",
                [.text(NotificationState.cancelled.rawValue), SQLValue(now), SQLValue(now), .text(notificationId)])
            return true
        }
    }

    public func claimDueScheduled(now: Date, claimant: String, limit: Int, staleAfter: TimeInterval) async throws -> [SendRequest] {
        try await database.write { connection in
            // The state is checked again by the UPDATE itself: of replicas racing for a row,
            // the one whose update lands first takes it; the others find it claimed.
            let rows = try await connection.query(
                """
                UPDATE scheduled_notifications SET state = ?, claimed_by = ?, claimed_at = ?
                WHERE notification_id IN (
                    SELECT notification_id FROM scheduled_notifications
                    WHERE due_at <= ? AND (state = ? OR (state = ? AND claimed_at < ?))
                    ORDER BY due_at LIMIT ?)
                AND due_at <= ? AND (state = ? OR (state = ? AND claimed_at < ?))
                RETURNING request
                """,
                [
                    .text(ScheduleState.claimed.rawValue), .text(claimant), SQLValue(now),
                    SQLValue(now), .text(ScheduleState.pending.rawValue), .text(ScheduleState.claimed.rawValue),
                    SQLValue(now.addingTimeInterval(-staleAfter)),
                    .integer(Int64(limit)),
                    SQLValue(now), .text(ScheduleState.pending.rawValue), .text(ScheduleState.claimed.rawValue),
                    SQLValue(now.addingTimeInterval(-staleAfter)),
                ])
            return try rows.compactMap { $0.text("request") }.map { try WireCoding.decode(SendRequest.self, from: Data($0.utf8)) }
        }
    }

    public func markReleased(_ request: SendRequest, deadline: Date, keep: Bool, now: Date) async throws {
        let text = keep ? String(decoding: try WireCoding.encode(request), as: UTF8.self) : nil
        try await database.write { connection in
            try await connection.execute(
                "UPDATE scheduled_notifications SET state = ? WHERE notification_id = ?",
                [.text(ScheduleState.released.rawValue), .text(request.notificationId)])
            // The send may have ended already (a small one on a fast pipeline): then there is
            // nothing to keep.
            let open = try await Self.changedRows(
                "UPDATE notifications SET deadline = ?, progress_at = ? WHERE notification_id = ? AND state IN \(Self.openStates)",
                returning: "notification_id", [SQLValue(deadline), SQLValue(now), .text(request.notificationId)], on: connection)
            if let text, open > 0 { try await Self.keep(request, text: text, publishedAt: now, on: connection) }
        }
    }
}
