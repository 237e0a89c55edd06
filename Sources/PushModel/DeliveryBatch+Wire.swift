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

extension DeliveryBatch {
    /// The batch read straight from its wire bytes, not yet validated; nil for anything
    /// `JSONReader` does not take (or a key given twice), which the caller then decodes with
    /// JSONDecoder for the error. A worker reads one batch per record, and JSONDecoder was a
    /// seventh of the APNs worker's CPU in a template broadcast. Public for the fuzz harness,
    /// which checks it against JSONDecoder; services read batches with `WireCoding.decode`.
    public static func fromWireJSON(_ data: Data) -> DeliveryBatch? {
        data.withUnsafeBytes { bytes -> DeliveryBatch? in
            var reader = JSONReader(bytes)
            var schema: String?
            var notificationId: String?
            var hub: String?
            var platform: Platform?
            var kind: Kind?
            var format: NotificationFormat?
            var body: String?
            var headers: [String: String] = [:]
            var expiresAt: Date?
            var enqueuedAt: Date?
            var attempt: Int?
            var notBefore: Date?
            var targets: [Target]?
            var seen = Set<String>()
            let read = reader.object { reader, key in
                guard seen.insert(key).inserted else { return false }
                switch key {
                case "schema": schema = reader.string()
                case "notificationId": notificationId = reader.string()
                case "hub": hub = reader.string()
                case "body": body = reader.string()
                case "platform": platform = reader.string().flatMap(Platform.init(rawValue:))
                case "kind": kind = reader.string().flatMap(Kind.init(rawValue:))
                case "attempt":
                    attempt = reader.integer()
                    return attempt != nil
                case "format":
                    if reader.takeNull() { return true }
                    format = reader.string().flatMap(NotificationFormat.init(rawValue:))
                    return format != nil
                case "headers":
                    if reader.takeNull() { return true }
                    guard let read = reader.stringMap() else { return false }
                    headers = read
                case "expiresAt", "enqueuedAt", "notBefore":
                    if reader.takeNull() { return true }
                    guard let date = reader.string().flatMap(RFC3339.parse) else { return false }
                    switch key {
                    case "expiresAt": expiresAt = date
                    case "enqueuedAt": enqueuedAt = date
                    default: notBefore = date
                    }
                case "targets":
                    var read: [Target] = []
                    guard
                        reader.array({ reader in
                            guard let target = Target.fromWireJSON(&reader) else { return false }
                            read.append(target)
                            return true
                        })
                    else { return false }
                    targets = read
                default: return reader.skipValue(depth: 2)
                }
                // The required strings and enumerations: nil gives the batch up.
                switch key {
                case "schema": return schema != nil
                case "notificationId": return notificationId != nil
                case "hub": return hub != nil
                case "body": return body != nil
                case "platform": return platform != nil
                case "kind": return kind != nil
                default: return true
                }
            }
            guard read, reader.atEnd(), schema == Self.schema, let notificationId, let hub, let platform, let kind, let body, let attempt,
                let targets
            else { return nil }
            return DeliveryBatch(
                notificationId: notificationId, hub: hub, platform: platform, kind: kind, format: format, body: body, headers: headers,
                expiresAt: expiresAt, enqueuedAt: enqueuedAt, attempt: attempt, notBefore: notBefore, targets: targets)
        }
    }
}

extension DeliveryBatch.Target {
    /// One target object, as `DeliveryBatch.fromWireJSON` reads it; nil for anything else.
    fileprivate static func fromWireJSON(_ reader: inout JSONReader) -> DeliveryBatch.Target? {
        var registrationId: String?
        var handle: String?
        var webPush: WebPushKeys?
        var template: Template?
        var seen: UInt8 = 0
        let read = reader.object { reader, key in
            let bit: UInt8
            switch key {
            case "registrationId": bit = 1
            case "handle": bit = 2
            case "webPush": bit = 4
            case "template": bit = 8
            default: return reader.skipValue(depth: 4)
            }
            guard seen & bit == 0 else { return false }
            seen |= bit
            if bit != 2, reader.takeNull() { return true }
            switch key {
            case "registrationId":
                registrationId = reader.string()
                return registrationId != nil
            case "handle":
                handle = reader.string()
                return handle != nil
            case "webPush":
                var p256dh: String?
                var auth: String?
                guard
                    reader.object({ reader, key in
                        switch key {
                        case "p256dh" where p256dh == nil:
                            p256dh = reader.string()
                            return p256dh != nil
                        case "auth" where auth == nil:
                            auth = reader.string()
                            return auth != nil
                        case "p256dh", "auth": return false
                        default: return reader.skipValue(depth: 5)
                        }
                    }), let p256dh, let auth
                else { return false }
                webPush = WebPushKeys(p256dh: p256dh, auth: auth)
                return true
            default:
                var body: String?
                var headers: [String: String]?
                var expiry: String?
                var fields = Set<String>()
                guard
                    reader.object({ reader, key in
                        guard fields.insert(key).inserted else { return false }
                        switch key {
                        case "body":
                            body = reader.string()
                            return body != nil
                        case "headers":
                            if reader.takeNull() { return true }
                            headers = reader.stringMap()
                            return headers != nil
                        case "expiry":
                            if reader.takeNull() { return true }
                            expiry = reader.string()
                            return expiry != nil
                        // A template's name and tags are not delivered; never written here.
                        case "name", "tags": return false
                        default: return reader.skipValue(depth: 5)
                        }
                    }), let body
                else { return false }
                template = Template(body: body, headers: headers, expiry: expiry)
                return true
            }
        }
        guard read, let handle else { return nil }
        return DeliveryBatch.Target(registrationId: registrationId, handle: handle, webPush: webPush, template: template)
    }
}

extension JSONReader {
    /// An object whose values are all strings, each key once; nil for anything else.
    mutating func stringMap() -> [String: String]? {
        var map: [String: String] = [:]
        let read = object { reader, key in
            guard map[key] == nil, let value = reader.string() else { return false }
            map[key] = value
            return true
        }
        return read ? map : nil
    }
}
