import Foundation

extension SendRequest {
    /// This request's wire JSON written straight to bytes: the fields, sorted keys and escaping
    /// of `WireCoding.encode`, as `DeliveryBatch.wireJSON` writes batches. The ingress keeps
    /// every accepted send's request for recovery, and JSONEncoder made that about 2.5 % of its
    /// time on single-user sends.
    func wireJSON() -> Data {
        var out = JSONBytes(capacity: 300 + body.utf8.count)
        out.byte(UInt8(ascii: "{"))
        out.key("audience", first: true)
        audience.write(to: &out)
        out.key("body")
        out.string(body)
        out.key("enqueuedAt")
        out.string(RFC3339.format(enqueuedAt))
        out.field("expiresAt", expiresAt.map(RFC3339.format))
        out.key("format")
        out.string(format.rawValue)
        out.key("headers")
        out.object(headers)
        out.key("hub")
        out.string(hub)
        out.key("notificationId")
        out.string(notificationId)
        out.key("schema")
        out.string(Self.schema)
        out.byte(UInt8(ascii: "}"))
        return Data(out.bytes)
    }
}

extension Audience {
    /// The audience as its one-key object.
    fileprivate func write(to out: inout JSONBytes) {
        out.byte(UInt8(ascii: "{"))
        switch self {
        case .tags(let expression):
            out.key("tags", first: true)
            out.string(expression)
        case .broadcast:
            out.key("broadcast", first: true)
            out.literal("true")
        case .installationIds(let ids):
            out.key("installationIds", first: true)
            out.array(ids) { id, out in out.string(id) }
        case .handles(let handles):
            out.key("handles", first: true)
            out.array(handles) { handle, out in
                out.byte(UInt8(ascii: "{"))
                out.key("handle", first: true)
                out.string(handle.handle)
                out.key("platform")
                out.string(handle.platform.rawValue)
                if let keys = handle.webPush {
                    out.key("webPush")
                    keys.write(to: &out)
                }
                out.byte(UInt8(ascii: "}"))
            }
        }
        out.byte(UInt8(ascii: "}"))
    }
}
