import Foundation
import PushModel

/// Turns what a send names (format, tags or handles, headers, body) into a SendRequest, with
/// every check the hub API, `pushhub send` and other producers share: each failure says what
/// is wrong and nothing is published.
public struct SendRequestBuilder: Sendable {
    /// Headers passed through to the PNS: APNs `apns-*`, WNS `X-WNS-*`, Web Push `TTL`,
    /// `Urgency`, `Topic`, Baidu's `X-Baidu-Message-Type`, and `ServiceBusNotification-Apns-Expiry`.
    public static func passThrough(_ name: String) -> Bool {
        // Compared without making a lowercased copy: every header of every send is asked.
        let bytes = name.utf8
        return MediaType.hasPrefixIgnoringCase(bytes, "apns-") || MediaType.hasPrefixIgnoringCase(bytes, "x-wns-")
            || passedWhole.contains { bytes.count == $0.utf8.count && MediaType.hasPrefixIgnoringCase(bytes, $0) }
    }

    private static let passedWhole = ["ttl", "urgency", "topic", "servicebusnotification-apns-expiry", "x-baidu-message-type"]

    public init() {}

    /// - Parameters:
    ///   - tags: a tag or tag expression; nil for every registration of the hub.
    ///   - handles: the device handles of a direct send (no registration); nil otherwise. An
    ///     empty list is refused, never read as everyone.
    public func build(
        hub: String, format formatText: String?, tags: String?, handles: [DirectHandle]? = nil, headers: [String: String], body: Data,
        contentType: String?, now: Date = Date()
    ) throws(WireError) -> SendRequest {
        try buildChecked(hub: hub, format: formatText, tags: tags, handles: handles, headers: headers, body: body, contentType: contentType, now: now)
            .request
    }

    /// `build`, with the tag expression it parsed while checking (nil for other audiences), so
    /// the ingress does not parse it again to resolve the audience.
    func buildChecked(
        hub: String, format formatText: String?, tags: String?, handles: [DirectHandle]? = nil, headers: [String: String], body: Data,
        contentType: String?, now: Date = Date()
    ) throws(WireError) -> (request: SendRequest, expression: TagExpression?) {
        guard let formatText, let format = NotificationFormat(rawValue: formatText.lowercased()) else {
            throw .invalidField(
                field: "ServiceBusNotification-Format",
                reason: "must be one of \(NotificationFormat.allCases.map(\.rawValue).joined(separator: ", ")), not \(formatText ?? "(missing)")")
        }
        try Self.checkContentType(contentType, format: format, headers: headers)
        // Before the body is read as text; `validate` checks it again, as for any producer.
        let limit = format.sizeLimit(headers: headers)
        guard body.count <= limit else {
            throw .invalidField(
                field: "body", reason: "\(body.count) bytes is more than the \(limit) bytes \(format.rawValue) notifications may have")
        }
        guard let text = String(data: body, encoding: .utf8) else { throw .invalidField(field: "body", reason: "must be UTF-8 text") }
        // JSON's grammar refuses a raw U+0000; a Windows body's XML is not parsed here, and the
        // body is stored with the send (PostgreSQL refuses U+0000 in text).
        // Looked for with memchr: through `Data`'s iterator, byte by byte, it was half of a
        // single-user send's checks.
        let nul = body.withUnsafeBytes { $0.isEmpty ? false : memchr($0.baseAddress!, 0, $0.count) != nil }
        guard !nul else { throw .invalidField(field: "body", reason: "must not hold U+0000") }
        // A native body that is a JSON object is within the depth limit (`isObject` checks it),
        // so only one that is not is scanned again, to say whether its depth is the reason.
        if format != .windows, format != .template {
            guard JSONLimits.isObject(body) else {
                try JSONLimits.checkDepth(body, field: "body")
                throw .invalidField(field: "body", reason: "a \(format.rawValue) notification's body must be a JSON object")
            }
        } else if format == .template {
            try JSONLimits.checkDepth(body, field: "body")
        }
        let audience: Audience
        if let handles {
            guard !handles.isEmpty else { throw .invalidField(field: "devices", reason: "a direct send needs at least one device handle") }
            audience = .handles(handles)
        } else if let tags, !tags.trimmingSpaces.isEmpty {
            audience = .tags(tags)
        } else {
            audience = .broadcast
        }
        let request = SendRequest(
            notificationId: RandomID.timeOrdered(now: now), hub: hub, audience: audience, format: format, body: text,
            headers: headers.filter { Self.passThrough($0.key) }, expiresAt: nil, enqueuedAt: RFC3339.truncated(now))
        // Checked once (the passed headers' names and values too: `FieldCheck.passedHeader`),
        // the tag expression parsed once; its errors name the header it came from.
        do {
            return (request, try request.validatedExpression())
        } catch .invalidField(field: "audience.tags", let reason) {
            let shown = tags.map { $0.count > 64 ? "\($0.prefix(64))…" : $0 } ?? ""
            throw .invalidField(field: "ServiceBusNotification-Tags", reason: "\"\(shown)\" \(reason)")
        }
    }

    /// The content types a body of `format` may have, the first being the usual one.
    public static func acceptedContentTypes(for format: NotificationFormat, headers: [String: String]) throws(WireError) -> [String] {
        guard format == .windows else { return ["application/json"] }
        let type = headers.first { $0.key.lowercased() == "x-wns-type" }?.value.lowercased()
        guard let type, ["wns/toast", "wns/tile", "wns/badge", "wns/raw"].contains(type) else {
            throw .invalidField(field: "X-WNS-Type", reason: "a windows notification needs X-WNS-Type: wns/toast, wns/tile, wns/badge or wns/raw")
        }
        return type == "wns/raw" ? ["application/octet-stream"] : ["application/xml", "text/xml"]
    }

    static func checkContentType(_ contentType: String?, format: NotificationFormat, headers: [String: String]) throws(WireError) {
        let accepted = try acceptedContentTypes(for: format, headers: headers)
        guard accepted.contains(where: { MediaType.matches(contentType, $0) }) else {
            throw .invalidField(
                field: "Content-Type", reason: "must be \(accepted.joined(separator: " or ")) for \(format.rawValue), not \(contentType ?? "(none)")")
        }
    }
}
