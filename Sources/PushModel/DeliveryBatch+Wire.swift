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
            // Body, headers and expiry: a target keeps no more (`template`'s setter).
            template.write(to: &out)
        }
        if let webPush {
            out.key("webPush")
            webPush.write(to: &out)
        }
        out.byte(UInt8(ascii: "}"))
    }
}

extension WebPushKeys {
    /// The keys as a JSON object with sorted keys, as targets and direct handles carry them.
    func write(to out: inout JSONBytes) {
        out.byte(UInt8(ascii: "{"))
        out.key("auth", first: true)
        out.string(auth)
        out.key("p256dh")
        out.string(p256dh)
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
            let read = reader.fields(Self.wireKeys, depth: 2) { reader, key in
                switch key {
                case "schema": return reader.string(into: &schema)
                case "notificationId": return reader.string(into: &notificationId)
                case "hub": return reader.string(into: &hub)
                case "body": return reader.string(into: &body)
                case "platform":
                    platform = reader.string().flatMap(Platform.init(rawValue:))
                    return platform != nil
                case "kind":
                    kind = reader.string().flatMap(Kind.init(rawValue:))
                    return kind != nil
                case "attempt": return reader.integer(into: &attempt)
                case "format":
                    if reader.takeNull() { return true }
                    format = reader.string().flatMap(NotificationFormat.init(rawValue:))
                    return format != nil
                case "headers":
                    if reader.takeNull() { return true }
                    guard let read = reader.stringMap() else { return false }
                    headers = read
                    return true
                case "targets":
                    // A batch's targets usually share their template: one the same bytes as the
                    // last one read is that template, not read again.
                    var lastTemplate: (bytes: Range<Int>, template: Template)?
                    targets = reader.array { Target.fromWireJSON(&$0, lastTemplate: &lastTemplate) }
                    return targets != nil
                default:
                    // The dates: expiresAt, enqueuedAt, notBefore.
                    if reader.takeNull() { return true }
                    guard let date = reader.string().flatMap(RFC3339.parse) else { return false }
                    switch key {
                    case "expiresAt": expiresAt = date
                    case "enqueuedAt": enqueuedAt = date
                    default: notBefore = date
                    }
                    return true
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

extension DeliveryBatch {
    /// The keys `fromWireJSON` reads.
    static let wireKeys = [
        "schema", "notificationId", "hub", "platform", "kind", "format", "body", "headers", "expiresAt", "enqueuedAt", "attempt", "notBefore",
        "targets",
    ]
}

extension DeliveryBatch.Target {
    /// The keys `fromWireJSON` reads.
    static let wireKeys = ["registrationId", "handle", "webPush", "template"]

    /// One target object, as `DeliveryBatch.fromWireJSON` reads it; nil for anything else.
    fileprivate static func fromWireJSON(_ reader: inout JSONReader, lastTemplate: inout (bytes: Range<Int>, template: Template)?)
        -> DeliveryBatch.Target?
    {
        var registrationId: String?
        var handle: String?
        var webPush: WebPushKeys?
        var template: Template?
        let read = reader.fields(Self.wireKeys, depth: 4) { reader, key in
            switch key {
            case "handle": return reader.string(into: &handle)
            case "registrationId": return reader.takeNull() || reader.string(into: &registrationId)
            case "webPush":
                if reader.takeNull() { return true }
                var p256dh: String?
                var auth: String?
                guard
                    reader.fields(
                        ["p256dh", "auth"], depth: 5,
                        { reader, key in key == "auth" ? reader.string(into: &auth) : reader.string(into: &p256dh) }),
                    let p256dh, let auth
                else { return false }
                webPush = WebPushKeys(p256dh: p256dh, auth: auth)
                return true
            default:
                if reader.takeNull() { return true }
                if let last = lastTemplate, reader.takeRepeat(of: last.bytes) {
                    template = last.template
                    return true
                }
                // Read as JSONDecoder reads it, a name and tags too; the target keeps what is
                // delivered (`forDelivery`).
                let start = reader.valueStart()
                template = Template.fromJSON(&reader, depth: 5)?.forDelivery
                if let template { lastTemplate = (start..<reader.offset, template) }
                return template != nil
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
