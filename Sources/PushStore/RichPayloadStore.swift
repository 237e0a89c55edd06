import Foundation

/// A rich push's content, kept for its recipient to fetch (`GET /api/notifications/{id}`).
public struct RichPayload: Sendable, Equatable {
    /// A number: the tutorials' clients read the id with `intValue`.
    public var id: Int64
    public var hub: String
    public var sender: String
    public var recipient: String
    public var contentType: String
    public var richType: String
    public var message: String
    public var bytes: Data

    public init(id: Int64 = 0, hub: String, sender: String, recipient: String, contentType: String, richType: String, message: String, bytes: Data) {
        self.id = id
        self.hub = hub
        self.sender = sender
        self.recipient = recipient
        self.contentType = contentType
        self.richType = richType
        self.message = message
        self.bytes = bytes
    }
}

/// How much one sender may keep stored, and for how long payloads are kept.
public struct RichPayloadQuota: Sendable, Equatable {
    public var maximumCount = 100
    public var maximumBytes = 20 * 1024 * 1024
    /// Payloads older than this are gone: no longer served, deleted when their sender stores
    /// another, and deleted by the recovery round's sweep after `defaultRetention` whatever
    /// their sender does.
    public var retention: TimeInterval = Self.defaultRetention

    /// A week.
    public static let defaultRetention: TimeInterval = 7 * 24 * 3600

    public init(maximumCount: Int = 100, maximumBytes: Int = 20 * 1024 * 1024, retention: TimeInterval = Self.defaultRetention) {
        self.maximumCount = maximumCount
        self.maximumBytes = maximumBytes
        self.retention = retention
    }
}

/// A sender's stored payloads would break their quota.
public struct RichPayloadQuotaExceeded: Error, Sendable, CustomStringConvertible {
    public var description: String
}

public protocol RichPayloadStore: Sendable {
    /// Stores a payload within its sender's quota; returns it with its new id. Throws
    /// `RichPayloadQuotaExceeded` when the sender keeps too many or too large payloads.
    func storeRichPayload(_ payload: RichPayload, quota: RichPayloadQuota) async throws -> RichPayload
    /// A payload kept no longer than `retention`.
    func richPayload(hub: String, id: Int64, retention: TimeInterval) async throws -> RichPayload?
    func deleteRichPayload(hub: String, id: Int64) async throws
}

extension SQLRegistrationStore: RichPayloadStore {
    public func storeRichPayload(_ payload: RichPayload, quota: RichPayloadQuota) async throws -> RichPayload {
        let now = Date()
        let dialect = database.dialect
        return try await database.write { connection in
            // One sender's stores are taken one at a time, so parallel uploads cannot all pass
            // the quota check (SQLite has a single writer already).
            if dialect == .postgres {
                _ = try await connection.query(
                    "SELECT pg_advisory_xact_lock(hashtext(?)) AS locked", [.text("rich:\(payload.hub):\(payload.sender)")])
            }
            try await connection.execute(
                "DELETE FROM rich_payloads WHERE hub = ? AND sender = ? AND created_at < ?",
                [.text(payload.hub), .text(payload.sender), SQLValue(now.addingTimeInterval(-quota.retention))])
            let usage = try await connection.query(
                "SELECT COUNT(*) AS stored, COALESCE(SUM(LENGTH(payload)), 0) AS encoded FROM rich_payloads WHERE hub = ? AND sender = ?",
                [.text(payload.hub), .text(payload.sender)]
            ).first
            let count = Int(usage?.integer("stored") ?? 0)
            let bytes = Int(usage?.integer("encoded") ?? 0) / 4 * 3
            guard count < quota.maximumCount else {
                throw RichPayloadQuotaExceeded(
                    description: "a user keeps at most \(quota.maximumCount) rich payloads; older ones go after \(Int(quota.retention / 3600)) hours")
            }
            guard bytes + payload.bytes.count <= quota.maximumBytes else {
                throw RichPayloadQuotaExceeded(
                    description:
                        "a user keeps at most \(quota.maximumBytes) bytes of rich payloads; older ones go after \(Int(quota.retention / 3600)) hours")
            }
            let rows = try await connection.query(
                """
                INSERT INTO rich_payloads (hub, sender, recipient, content_type, rich_type, message, payload, created_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id
                """,
                [
                    .text(payload.hub), .text(payload.sender), .text(payload.recipient), .text(payload.contentType), .text(payload.richType),
                    .text(payload.message), .text(payload.bytes.base64EncodedString()), SQLValue(now),
                ])
            guard let id = rows.first?.integer("id") else { throw SQLError(message: "the rich payload insert returned no id") }
            var stored = payload
            stored.id = id
            return stored
        }
    }

    public func deleteRichPayload(hub: String, id: Int64) async throws {
        try await database.write { connection in
            try await connection.execute("DELETE FROM rich_payloads WHERE hub = ? AND id = ?", [.text(hub), .integer(id)])
        }
    }

    public func richPayload(hub: String, id: Int64, retention: TimeInterval) async throws -> RichPayload? {
        let oldest = Date().addingTimeInterval(-retention)
        return try await database.read { connection in
            guard
                let row = try await connection.query(
                    "SELECT * FROM rich_payloads WHERE hub = ? AND id = ? AND created_at >= ?", [.text(hub), .integer(id), SQLValue(oldest)]
                ).first,
                let bytes = row.text("payload").flatMap({ Data(base64Encoded: $0) })
            else { return nil }
            return RichPayload(
                id: id, hub: hub, sender: row.text("sender") ?? "", recipient: row.text("recipient") ?? "",
                contentType: row.text("content_type") ?? "application/octet-stream", richType: row.text("rich_type") ?? "",
                message: row.text("message") ?? "", bytes: bytes)
        }
    }
}
