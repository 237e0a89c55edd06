import Foundation

/// A request to send one notification: what the ingress and other services produce into
/// `pushhub.requests`, keyed by `notificationId`.
public struct SendRequest: WireMessage, Equatable {
    public static let schema = "pushhub.send-request.v1"
    /// Most handles or installation ids one request may name (the direct-batch limit).
    public static let maximumAudienceEntries = 1000
    /// Most bytes of handles (and Web Push keys) a direct send names: with its body, the
    /// request stays within what PushHub produces as one record (`WireCoding.maximumRecordBytes`).
    public static let maximumHandleBytes = 384 * 1024

    public var notificationId: String
    public var hub: String
    public var audience: Audience
    public var format: NotificationFormat
    /// The native payload, or for `template` the properties as a JSON object of strings.
    public var body: String
    /// Pass-through headers such as `apns-priority` or `X-WNS-Type`.
    public var headers: [String: String]
    /// When delivery is abandoned; PushHub uses 30 minutes after `enqueuedAt` when absent.
    public var expiresAt: Date?
    public var enqueuedAt: Date

    public init(
        notificationId: String, hub: String, audience: Audience, format: NotificationFormat, body: String,
        headers: [String: String] = [:], expiresAt: Date? = nil, enqueuedAt: Date
    ) {
        self.notificationId = notificationId
        self.hub = hub
        self.audience = audience
        self.format = format
        self.body = body
        self.headers = headers
        self.expiresAt = expiresAt
        self.enqueuedAt = enqueuedAt
    }

    enum CodingKeys: String, CodingKey {
        case notificationId, hub, audience, format, body, headers, expiresAt, enqueuedAt
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        notificationId = try container.decode(String.self, forKey: .notificationId)
        hub = try container.decode(String.self, forKey: .hub)
        audience = try container.decode(Audience.self, forKey: .audience)
        format = try container.decode(NotificationFormat.self, forKey: .format)
        body = try container.decode(String.self, forKey: .body)
        headers = try container.decodeIfPresent([String: String].self, forKey: .headers) ?? [:]
        expiresAt = try container.decodeIfPresent(Date.self, forKey: .expiresAt)
        enqueuedAt = try container.decode(Date.self, forKey: .enqueuedAt)
    }

    public func validate() throws(WireError) {
        _ = try validatedExpression()
    }

    /// Checks the request as `validate()` does, and returns its tag expression parsed (nil for
    /// other audiences), so whoever needs the expression parses it once.
    public func validatedExpression() throws(WireError) -> TagExpression? {
        try FieldCheck.uuid(notificationId, "notificationId")
        try FieldCheck.hubName(hub, "hub")
        let expression = try audience.validate(for: format)
        try FieldCheck.notEmpty(body, "body")
        // The limits the hub API's sends meet, for those produced straight into Kafka too: the
        // body goes into every batch of the send, and the headers to the PNS.
        let limit = format.sizeLimit(headers: headers)
        guard body.utf8.count <= limit else {
            throw .invalidField(
                field: "body", reason: "\(body.utf8.count) bytes is more than the \(limit) bytes \(format.rawValue) notifications may have")
        }
        if format == .template { try TemplateProperties.validate(body, field: "body") }
        guard headers.count <= FieldCheck.maximumPassedHeaders else {
            throw .invalidField(field: "headers", reason: "at most \(FieldCheck.maximumPassedHeaders) headers, not \(headers.count)")
        }
        try FieldCheck.headers(headers, "headers")
        for (name, value) in headers { try FieldCheck.passedHeader(name: name, value: value) }
        if let expiresAt, expiresAt <= enqueuedAt {
            throw .invalidField(field: "expiresAt", reason: "must be after enqueuedAt")
        }
        return expression
    }
}

/// Who a notification is for.
public enum Audience: Codable, Sendable, Equatable {
    /// Registrations matching a tag or tag expression, e.g. `Sports && !Politics`.
    case tags(String)
    /// Every registration of the hub.
    case broadcast
    /// The registrations of these installations.
    case installationIds([String])
    /// Device handles with no registration (direct send).
    case handles([DirectHandle])

    enum CodingKeys: String, CodingKey, CaseIterable {
        case tags, broadcast, installationIds, handles
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let present = CodingKeys.allCases.filter { container.contains($0) }
        guard present.count == 1, let key = present.first else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "must have exactly one of tags, broadcast, installationIds, handles"))
        }
        switch key {
        case .tags: self = .tags(try container.decode(String.self, forKey: .tags))
        case .broadcast:
            guard try container.decode(Bool.self, forKey: .broadcast) else {
                throw DecodingError.dataCorruptedError(forKey: .broadcast, in: container, debugDescription: "must be true")
            }
            self = .broadcast
        case .installationIds: self = .installationIds(try container.decode([String].self, forKey: .installationIds))
        case .handles: self = .handles(try container.decode([DirectHandle].self, forKey: .handles))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .tags(let expression): try container.encode(expression, forKey: .tags)
        case .broadcast: try container.encode(true, forKey: .broadcast)
        case .installationIds(let ids): try container.encode(ids, forKey: .installationIds)
        case .handles(let handles): try container.encode(handles, forKey: .handles)
        }
    }

    /// The tag expression, parsed, for a `tags` audience.
    func validate(for format: NotificationFormat) throws(WireError) -> TagExpression? {
        switch self {
        case .tags(let expression):
            try FieldCheck.notEmpty(String(expression.trimmingSpaces), "audience.tags")
            do { return try TagExpression.parse(expression) } catch { throw .invalidField(field: "audience.tags", reason: error.description) }
        case .broadcast:
            break
        case .installationIds(let ids):
            try Self.checkCount(ids.count, "audience.installationIds")
            for (index, id) in ids.enumerated() where !Installation.isAllowedId(id) {
                throw .invalidField(field: "audience.installationIds[\(index)]", reason: Installation.idRule)
            }
        case .handles(let handles):
            try Self.checkCount(handles.count, "audience.handles")
            guard let platform = format.platform else {
                throw .invalidField(field: "format", reason: "a direct send needs a native format, not template")
            }
            var bytes = 0
            for (index, handle) in handles.enumerated() {
                try handle.validate(field: "audience.handles[\(index)]", format: format, platform: platform)
                bytes += handle.handle.utf8.count + (handle.webPush.map { $0.p256dh.utf8.count + $0.auth.utf8.count } ?? 0)
            }
            // A thousand handles of 2,048 bytes would make a request Kafka refuses for ever.
            guard bytes <= SendRequest.maximumHandleBytes else {
                throw .invalidField(
                    field: "audience.handles",
                    reason: "\(bytes) bytes of handles is more than the \(SendRequest.maximumHandleBytes) a send may name; send them in parts")
            }
        }
        return nil
    }

    private static func checkCount(_ count: Int, _ field: String) throws(WireError) {
        guard (1...SendRequest.maximumAudienceEntries).contains(count) else {
            throw .invalidField(field: field, reason: "must hold 1 to \(SendRequest.maximumAudienceEntries) entries, not \(count)")
        }
    }
}

/// A device handle addressed directly: an APNs token, FCM registration token, WNS channel
/// URI, or Web Push subscription endpoint (with its keys).
public struct DirectHandle: Codable, Sendable, Equatable {
    public var platform: Platform
    public var handle: String
    public var webPush: WebPushKeys?

    public init(platform: Platform, handle: String, webPush: WebPushKeys? = nil) {
        self.platform = platform
        self.handle = handle
        self.webPush = webPush
    }

    func validate(field: @autoclosure () -> String, format: NotificationFormat, platform formatPlatform: Platform) throws(WireError) {
        try FieldCheck.notEmpty(handle, "\(field()).handle")
        // As a registration's handle: its results are keyed and kept by it.
        try FieldCheck.handle(handle, "\(field()).handle")
        guard platform == formatPlatform else {
            throw .invalidField(
                field: "\(field()).platform",
                reason: "format \(format.rawValue) is delivered through \(formatPlatform.rawValue), not \(platform.rawValue)")
        }
        if platform == .webpush {
            guard let webPush else {
                throw .invalidField(field: "\(field()).webPush", reason: "missing: a Web Push subscription needs p256dh and auth")
            }
            try webPush.validate(field: "\(field()).webPush")
        }
    }
}

/// The keys of a Web Push subscription (RFC 8291), base64url as browsers give them.
public struct WebPushKeys: Codable, Sendable, Equatable, Hashable {
    public var p256dh: String
    public var auth: String

    public init(p256dh: String, auth: String) {
        self.p256dh = p256dh
        self.auth = auth
    }

    func validate(field: @autoclosure () -> String) throws(WireError) {
        try FieldCheck.notEmpty(p256dh, "\(field()).p256dh")
        try FieldCheck.notEmpty(auth, "\(field()).auth")
        try FieldCheck.noControlCharacters(p256dh, "\(field()).p256dh")
        try FieldCheck.noControlCharacters(auth, "\(field()).auth")
    }
}

/// The properties of a template notification: a flat JSON object whose values are strings.
public enum TemplateProperties {
    /// Parses `body`, or says why it is not a template notification's body.
    public static func parse(_ body: String, field: String = "body") throws(WireError) -> [String: String] {
        let object: Any
        do {
            try JSONLimits.checkDepth(body.utf8, field: field)
            object = try JSONSerialization.jsonObject(with: Data(body.utf8))
        } catch let error as WireError {
            throw error
        } catch {
            throw .invalidField(field: field, reason: "a template notification's body must be a JSON object of string properties; it is not JSON")
        }
        guard let dictionary = object as? [String: Any] else {
            throw .invalidField(field: field, reason: "a template notification's body must be a JSON object of string properties")
        }
        var properties: [String: String] = [:]
        for (name, value) in dictionary {
            guard let text = value as? String else {
                throw .invalidField(field: field, reason: "template property \"\(name)\" must be a string")
            }
            properties[name] = text
        }
        return properties
    }

    static func validate(_ body: String, field: String) throws(WireError) {
        _ = try parse(body, field: field)
    }
}
