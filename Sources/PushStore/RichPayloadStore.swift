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

public protocol RichPayloadStore: Sendable {
    /// Stores a payload; returns it with its new id.
    func storeRichPayload(_ payload: RichPayload) async throws -> RichPayload
    func richPayload(hub: String, id: Int64) async throws -> RichPayload?
}

extension SQLRegistrationStore: RichPayloadStore {
    public func storeRichPayload(_ payload: RichPayload) async throws -> RichPayload {
        try await database.write { connection in
            let rows = try await connection.query(
                """
                INSERT INTO rich_payloads (hub, sender, recipient, content_type, rich_type, message, payload, created_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id
                """,
                [.text(payload.hub), .text(payload.sender), .text(payload.recipient), .text(payload.contentType), .text(payload.richType),
                 .text(payload.message), .text(payload.bytes.base64EncodedString()), SQLValue(Date())])
            guard let id = rows.first?.integer("id") else { throw SQLError(message: "the rich payload insert returned no id") }
            var stored = payload
            stored.id = id
            return stored
        }
    }

    public func richPayload(hub: String, id: Int64) async throws -> RichPayload? {
        try await database.read { connection in
            guard let row = try await connection.query("SELECT * FROM rich_payloads WHERE hub = ? AND id = ?", [.text(hub), .integer(id)]).first,
                let bytes = row.text("payload").flatMap({ Data(base64Encoded: $0) })
            else { return nil }
            return RichPayload(
                id: id, hub: hub, sender: row.text("sender") ?? "", recipient: row.text("recipient") ?? "",
                contentType: row.text("content_type") ?? "application/octet-stream", richType: row.text("rich_type") ?? "",
                message: row.text("message") ?? "", bytes: bytes)
        }
    }
}
