import Foundation

extension Installation {
    /// The installation's JSON written straight to bytes: what `WireCoding.makeEncoder()`
    /// writes (sorted keys, unescaped slashes, RFC 3339 dates), without its containers. The
    /// store keeps every installation as this document, and the load generator sends it.
    public func wireJSON() -> Data {
        var out = JSONBytes(capacity: 256 + pushChannel.utf8.count + templates.values.reduce(0) { $0 + $1.body.utf8.count + 64 })
        out.byte(UInt8(ascii: "{"))
        if let expirationTime {
            out.key("expirationTime", first: true)
            out.string(RFC3339.format(expirationTime))
        }
        out.key("installationId", first: expirationTime == nil)
        out.string(installationId)
        out.field("lastUpdate", lastUpdate.map(RFC3339.format))
        out.key("platform")
        out.string(platform.rawValue)
        out.key("pushChannel")
        if let webPush {
            out.byte(UInt8(ascii: "{"))
            out.key("auth", first: true)
            out.string(webPush.auth)
            out.key("endpoint")
            out.string(pushChannel)
            out.key("p256dh")
            out.string(webPush.p256dh)
            out.byte(UInt8(ascii: "}"))
        } else {
            out.string(pushChannel)
        }
        out.key("pushChannelExpired")
        out.literal(pushChannelExpired ? "true" : "false")
        out.key("tags")
        out.array(tags) { tag, out in out.string(tag) }
        if !templates.isEmpty {
            out.key("templates")
            out.byte(UInt8(ascii: "{"))
            for (index, name) in templates.keys.sorted(by: JSONBytes.sortedKeyOrder).enumerated() {
                out.key(name, first: index == 0)
                templates[name]!.write(to: &out)
            }
            out.byte(UInt8(ascii: "}"))
        }
        out.field("userId", userId)
        out.byte(UInt8(ascii: "}"))
        return Data(out.bytes)
    }
}

extension Template {
    /// The template as its synthesized `Codable` writes it, keys sorted; absent optionals left out.
    fileprivate func write(to out: inout JSONBytes) {
        out.byte(UInt8(ascii: "{"))
        out.key("body", first: true)
        out.string(body)
        out.field("expiry", expiry)
        if let headers {
            out.key("headers")
            out.object(headers)
        }
        out.field("name", name)
        if let tags {
            out.key("tags")
            out.array(tags) { tag, out in out.string(tag) }
        }
        out.byte(UInt8(ascii: "}"))
    }
}
