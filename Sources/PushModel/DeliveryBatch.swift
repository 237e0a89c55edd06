import Foundation

/// Up to 500 targets of one notification on one platform: what the dispatcher produces into
/// `pushhub.deliveries.<platform>` and that platform's worker consumes.
public struct DeliveryBatch: WireMessage, Equatable {
    /// Targets per platform, every platform named (zero where none), as a dispatch summary
    /// says them.
    public static func counts(of targets: [Platform: [Target]]) -> [Platform: Int] {
        Dictionary(uniqueKeysWithValues: Platform.allCases.map { ($0, targets[$0]?.count ?? 0) })
    }

    public static let schema = "pushhub.delivery-batch.v1"
    public static let maximumTargets = 500
    /// The highest attempt a batch may be at: far past any worker's `maximumAttempts`, and low
    /// enough that the counts a worker adds to it never overflow.
    public static let maximumAttempt = 1_000

    public enum Kind: String, Codable, Sendable {
        /// Every target gets `body` as it is.
        case native
        /// Every target gets its own template filled with the properties in `body`.
        case template
    }

    public var notificationId: String
    public var hub: String
    public var platform: Platform
    public var kind: Kind
    /// The native format of a native batch (`gcm` and `fcmv1` differ on FCM); `nil` for templates.
    public var format: NotificationFormat?
    public var body: String
    public var headers: [String: String]
    public var expiresAt: Date?
    /// When the send request was accepted; results measure their dwell time from it.
    public var enqueuedAt: Date?
    /// 1 for the dispatcher's batch; a worker that hands a batch back adds one.
    public var attempt: Int
    /// A batch handed back for a retry is not worked on before this time.
    public var notBefore: Date?
    public var targets: [Target]

    public init(
        notificationId: String, hub: String, platform: Platform, kind: Kind, format: NotificationFormat? = nil,
        body: String, headers: [String: String] = [:], expiresAt: Date? = nil, enqueuedAt: Date? = nil,
        attempt: Int = 1, notBefore: Date? = nil, targets: [Target]
    ) {
        self.notificationId = notificationId
        self.hub = hub
        self.platform = platform
        self.kind = kind
        self.format = format
        self.body = body
        self.headers = headers
        self.expiresAt = expiresAt
        self.enqueuedAt = enqueuedAt
        self.attempt = attempt
        self.notBefore = notBefore
        self.targets = targets
    }

    /// One device to deliver to.
    public struct Target: Codable, Sendable, Equatable {
        /// `nil` for a direct send, which has no registration.
        public var registrationId: String?
        public var handle: String
        /// The subscription keys of a Web Push target.
        public var webPush: WebPushKeys?
        /// The registration's template, for template batches: body, headers and expiry only
        /// (the wire schema's), whatever it was made or read from.
        public var template: Template? {
            get { deliveredTemplate }
            set { deliveredTemplate = newValue?.forDelivery }
        }
        private var deliveredTemplate: Template?

        enum CodingKeys: String, CodingKey {
            case registrationId, handle, webPush
            case deliveredTemplate = "template"
        }

        public init(registrationId: String?, handle: String, webPush: WebPushKeys? = nil, template: Template? = nil) {
            self.registrationId = registrationId
            self.handle = handle
            self.webPush = webPush
            self.template = template
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            registrationId = try container.decodeIfPresent(String.self, forKey: .registrationId)
            handle = try container.decode(String.self, forKey: .handle)
            webPush = try container.decodeIfPresent(WebPushKeys.self, forKey: .webPush)
            deliveredTemplate = try container.decodeIfPresent(Template.self, forKey: .deliveredTemplate)?.forDelivery
        }
    }

    enum CodingKeys: String, CodingKey {
        case notificationId, hub, platform, kind, format, body, headers, expiresAt, enqueuedAt, attempt, notBefore, targets
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        notificationId = try container.decode(String.self, forKey: .notificationId)
        hub = try container.decode(String.self, forKey: .hub)
        platform = try container.decode(Platform.self, forKey: .platform)
        kind = try container.decode(Kind.self, forKey: .kind)
        format = try container.decodeIfPresent(NotificationFormat.self, forKey: .format)
        body = try container.decode(String.self, forKey: .body)
        headers = try container.decodeIfPresent([String: String].self, forKey: .headers) ?? [:]
        expiresAt = try container.decodeIfPresent(Date.self, forKey: .expiresAt)
        enqueuedAt = try container.decodeIfPresent(Date.self, forKey: .enqueuedAt)
        attempt = try container.decode(Int.self, forKey: .attempt)
        notBefore = try container.decodeIfPresent(Date.self, forKey: .notBefore)
        targets = try container.decode([Target].self, forKey: .targets)
    }

    public func validate() throws(WireError) {
        try FieldCheck.uuid(notificationId, "notificationId")
        try FieldCheck.hubName(hub, "hub")
        if let format {
            guard format.platform == platform else {
                throw .invalidField(field: "format", reason: "\(format.rawValue) is not delivered through \(platform.rawValue)")
            }
            if kind == .template {
                throw .invalidField(field: "format", reason: "a template batch has no native format")
            }
        }
        if kind == .template { try TemplateProperties.validate(body, field: "body") }
        try FieldCheck.headers(headers, "headers")
        guard (1...Self.maximumAttempt).contains(attempt) else {
            throw .invalidField(field: "attempt", reason: "must be 1 to \(Self.maximumAttempt), not \(attempt)")
        }
        guard (1...Self.maximumTargets).contains(targets.count) else {
            throw .invalidField(field: "targets", reason: "must hold 1 to \(Self.maximumTargets) targets, not \(targets.count)")
        }
        for (index, target) in targets.enumerated() {
            // The field is named only for an error: a worker checks every target it takes.
            func field(_ member: String) -> String { "targets[\(index)].\(member)" }
            try FieldCheck.notEmpty(target.handle, field("handle"))
            // Bounded as the store bounds them (their results carry both back, and must fit a
            // record); only their length: a handle with a tab, which some ways of registering
            // keep, fails its own push, not the batch's.
            try FieldCheck.storedLength(target.handle, field("handle"))
            if let registrationId = target.registrationId {
                try FieldCheck.notEmpty(registrationId, field("registrationId"))
                try FieldCheck.storedLength(registrationId, field("registrationId"))
            }
            switch (kind, target.template) {
            case (.template, nil): throw .invalidField(field: field("template"), reason: "missing in a template batch")
            case (.native, .some): throw .invalidField(field: field("template"), reason: "not allowed in a native batch")
            case (.template, .some(let template)): try FieldCheck.notEmpty(template.body, field("template.body"))
            case (.native, nil): break
            }
            if platform == .webpush {
                guard let keys = target.webPush else {
                    throw .invalidField(field: field("webPush"), reason: "missing: a Web Push target needs p256dh and auth")
                }
                try keys.validate(field: field("webPush"))
            }
        }
    }
}
