import Foundation

extension DeliveryBatch {
    /// This batch's wire JSON written straight to bytes: the fields, sorted keys and escaping of
    /// `WireCoding.encode`, as `ResultBatch.wireJSON` writes results. The dispatcher writes one
    /// batch of up to 500 targets per record, and the ingress one per small send.
    func wireJSON() -> Data {
        var out = JSONBytes(capacity: 400 + body.utf8.count + targets.count * 120)
        out.byte(UInt8(ascii: "{"))
        out.key("attempt", first: true)
        out.integer(attempt)
        out.key("body")
        out.string(body)
        out.field("enqueuedAt", enqueuedAt.map(RFC3339.format))
        out.field("expiresAt", expiresAt.map(RFC3339.format))
        out.field("format", format?.rawValue)
        out.key("headers")
        out.object(headers)
        out.key("hub")
        out.string(hub)
        out.key("kind")
        out.string(kind.rawValue)
        out.field("notBefore", notBefore.map(RFC3339.format))
        out.key("notificationId")
        out.string(notificationId)
        out.key("platform")
        out.string(platform.rawValue)
        out.key("schema")
        out.string(Self.schema)
        out.key("targets")
        out.array(targets) { target, out in target.write(to: &out) }
        out.byte(UInt8(ascii: "}"))
        return Data(out.bytes)
    }
}

extension DeliveryBatch.Target {
    /// The target as a JSON object with sorted keys; absent optionals are left out.
    fileprivate func write(to out: inout JSONBytes) {
        out.byte(UInt8(ascii: "{"))
        out.key("handle", first: true)
        out.string(handle)
        out.field("registrationId", registrationId)
        if let template {
            out.key("template")
            out.byte(UInt8(ascii: "{"))
            out.key("body", first: true)
            out.string(template.body)
            out.field("expiry", template.expiry)
            if let headers = template.headers {
                out.key("headers")
                out.object(headers)
            }
            out.byte(UInt8(ascii: "}"))
        }
        if let webPush {
            out.key("webPush")
            out.byte(UInt8(ascii: "{"))
            out.key("auth", first: true)
            out.string(webPush.auth)
            out.key("p256dh")
            out.string(webPush.p256dh)
            out.byte(UInt8(ascii: "}"))
        }
        out.byte(UInt8(ascii: "}"))
    }
}

extension JSONBytes {
    /// An object of strings, its keys sorted as JSONEncoder sorts them.
    mutating func object(_ values: [String: String]) {
        byte(UInt8(ascii: "{"))
        for (index, key) in values.keys.sorted(by: JSONBytes.sortedKeyOrder).enumerated() {
            self.key(key, first: index == 0)
            string(values[key]!)
        }
        byte(UInt8(ascii: "}"))
    }

    /// JSONEncoder's `.sortedKeys` order: by UTF-8 bytes, not by `String <`, which compares
    /// canonical equivalents as equal.
    static func sortedKeyOrder(_ a: String, _ b: String) -> Bool { a.utf8.lexicographicallyPrecedes(b.utf8) }
}
