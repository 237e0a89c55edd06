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
    func write(to out: inout JSONBytes) {
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

extension Installation {
    /// The keys `fromJSON` reads.
    static let wireKeys = [
        "installationId", "userId", "platform", "pushChannel", "pushChannelExpired", "tags", "templates", "expirationTime", "lastUpdate",
    ]

    /// The installation read straight from JSON bytes, not yet validated; nil for anything
    /// `JSONReader` does not take, which the caller then decodes with JSONDecoder (through
    /// `init(from:)`) for its error. Every registration through the installations API reads
    /// one, and JSONDecoder was a sixteenth of the ingress's time for it.
    public static func fromJSON(_ bytes: UnsafeRawBufferPointer) -> Installation? {
        var reader = JSONReader(bytes)
        var installationId: String?
        var userId: String?
        var platformName: String?
        var channel: String?
        var browserChannel: (endpoint: String, keys: WebPushKeys)?
        var expired: Bool?
        var tags: [String]?
        var templates: [String: Template]?
        var expirationTime: Date?
        var lastUpdate: Date?
        let read = reader.fields(Self.wireKeys, depth: 2) { reader, key in
            switch key {
            case "installationId": return reader.string(into: &installationId)
            case "userId": return reader.takeNull() || reader.string(into: &userId)
            case "platform": return reader.string(into: &platformName)
            case "pushChannel":
                // A string, or a browser's object: which one is wanted depends on `platform`,
                // which may come later.
                if reader.string(into: &channel) { return true }
                var endpoint: String?
                var p256dh: String?
                var auth: String?
                guard
                    reader.fields(
                        ["endpoint", "p256dh", "auth"], depth: 3,
                        { reader, key in
                            switch key {
                            case "endpoint": return reader.string(into: &endpoint)
                            case "p256dh": return reader.string(into: &p256dh)
                            default: return reader.string(into: &auth)
                            }
                        }),
                    let endpoint, let p256dh, let auth
                else { return false }
                browserChannel = (endpoint, WebPushKeys(p256dh: p256dh, auth: auth))
                return true
            case "pushChannelExpired":
                if reader.takeNull() { return true }
                expired = reader.bool()
                return expired != nil
            case "tags":
                if reader.takeNull() { return true }
                tags = reader.array(of: { $0.string() })
                return tags != nil
            case "templates":
                if reader.takeNull() { return true }
                var read: [String: Template] = [:]
                let taken = reader.object { reader, name in
                    guard read[name] == nil, let template = Template.fromJSON(&reader, depth: 4) else { return false }
                    read[name] = template
                    return true
                }
                templates = read
                return taken
            default:
                // The dates: expirationTime, lastUpdate.
                if reader.takeNull() { return true }
                guard let date = reader.string().flatMap(RFC3339.parse) else { return false }
                if key == "expirationTime" { expirationTime = date } else { lastUpdate = date }
                return true
            }
        }
        guard read, reader.atEnd(), let installationId, let platform = platformName.flatMap({ InstallationPlatform(rawValue: $0.lowercased()) })
        else { return nil }
        let pushChannel: String
        var webPush: WebPushKeys?
        if platform == .browser {
            guard let browserChannel else { return nil }
            pushChannel = browserChannel.endpoint
            webPush = browserChannel.keys
        } else {
            guard let channel else { return nil }
            pushChannel = channel
        }
        return Installation(
            installationId: installationId, userId: userId, platform: platform, pushChannel: pushChannel, webPush: webPush,
            pushChannelExpired: expired ?? false, tags: tags ?? [], templates: templates ?? [:], expirationTime: expirationTime,
            lastUpdate: lastUpdate)
    }
}

extension Template {
    /// A template object as its synthesized `Codable` reads it, its name left out (an
    /// installation's key names it; a delivery target has none); nil for anything
    /// `JSONReader` does not take. Its members are read at `depth`.
    static func fromJSON(_ reader: inout JSONReader, depth: Int) -> Template? {
        var body: String?
        var headers: [String: String]?
        var expiry: String?
        var tags: [String]?
        let read = reader.fields(["name", "body", "headers", "expiry", "tags"], depth: depth) { reader, key in
            switch key {
            case "name":
                var name: String?
                return reader.takeNull() || reader.string(into: &name)
            case "body": return reader.string(into: &body)
            case "headers":
                if reader.takeNull() { return true }
                headers = reader.stringMap()
                return headers != nil
            case "expiry": return reader.takeNull() || reader.string(into: &expiry)
            default:
                if reader.takeNull() { return true }
                tags = reader.array(of: { $0.string() })
                return tags != nil
            }
        }
        guard read, let body else { return nil }
        return Template(body: body, headers: headers, expiry: expiry, tags: tags)
    }
}
