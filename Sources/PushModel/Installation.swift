import Foundation

/// A device's installation, as the Azure Notification Hubs installation API has it (JSON).
/// PushHub stores it as registrations: one native, one per template.
public struct Installation: Codable, Sendable, Equatable {
    /// Platforms as installations name them.
    public enum InstallationPlatform: String, Codable, Sendable, CaseIterable {
        case apns, gcm, fcmv1, wns, browser, hms, adm, xiaomi, baidu

        /// The native format of this platform's sends.
        public var format: NativeFormat {
            switch self {
            case .apns: .apple
            case .gcm: .gcm
            case .fcmv1: .fcmv1
            case .wns: .windows
            case .browser: .browser
            case .hms: .hms
            case .adm: .adm
            case .xiaomi: .xiaomi
            case .baidu: .baidu
            }
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let platform = Self(rawValue: text.lowercased()) else {
                throw DecodingError.dataCorruptedError(
                    in: container, debugDescription: "must be one of \(Self.allCases.map(\.rawValue).joined(separator: ", ")), not \"\(text)\"")
            }
            self = platform
        }
    }

    public var installationId: String
    public var userId: String?
    public var platform: InstallationPlatform
    /// The device token or channel URI; for browsers the subscription endpoint.
    public var pushChannel: String
    /// A browser subscription's keys.
    public var webPush: WebPushKeys?
    public var pushChannelExpired: Bool
    public var tags: [String]
    public var templates: [String: Template]
    public var expirationTime: Date?
    public var lastUpdate: Date?

    public init(
        installationId: String, userId: String? = nil, platform: InstallationPlatform, pushChannel: String,
        webPush: WebPushKeys? = nil, pushChannelExpired: Bool = false, tags: [String] = [],
        templates: [String: Template] = [:], expirationTime: Date? = nil, lastUpdate: Date? = nil
    ) {
        self.installationId = installationId
        self.userId = userId
        self.platform = platform
        self.pushChannel = pushChannel
        self.webPush = webPush
        self.pushChannelExpired = pushChannelExpired
        self.tags = tags
        self.templates = templates
        self.expirationTime = expirationTime
        self.lastUpdate = lastUpdate
    }

    enum CodingKeys: String, CodingKey {
        case installationId, userId, platform, pushChannel, pushChannelExpired, tags, templates, expirationTime, lastUpdate
    }

    /// A browser's push channel: `{"endpoint", "p256dh", "auth"}`.
    struct BrowserChannel: Codable {
        var endpoint: String
        var p256dh: String
        var auth: String
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        installationId = try container.decode(String.self, forKey: .installationId)
        userId = try container.decodeIfPresent(String.self, forKey: .userId)
        platform = try container.decode(InstallationPlatform.self, forKey: .platform)
        if platform == .browser {
            let channel = try container.decode(BrowserChannel.self, forKey: .pushChannel)
            pushChannel = channel.endpoint
            webPush = WebPushKeys(p256dh: channel.p256dh, auth: channel.auth)
        } else {
            pushChannel = try container.decode(String.self, forKey: .pushChannel)
            webPush = nil
        }
        pushChannelExpired = try container.decodeIfPresent(Bool.self, forKey: .pushChannelExpired) ?? false
        tags = try container.decodeIfPresent([String].self, forKey: .tags) ?? []
        // A template's name is its key here: a `name` member is not the installation's.
        templates = (try container.decodeIfPresent([String: Template].self, forKey: .templates) ?? [:]).mapValues { template in
            var unnamed = template
            unnamed.name = nil
            return unnamed
        }
        expirationTime = try container.decodeIfPresent(Date.self, forKey: .expirationTime)
        lastUpdate = try container.decodeIfPresent(Date.self, forKey: .lastUpdate)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(installationId, forKey: .installationId)
        try container.encodeIfPresent(userId, forKey: .userId)
        try container.encode(platform, forKey: .platform)
        if let webPush {
            try container.encode(BrowserChannel(endpoint: pushChannel, p256dh: webPush.p256dh, auth: webPush.auth), forKey: .pushChannel)
        } else {
            try container.encode(pushChannel, forKey: .pushChannel)
        }
        try container.encode(pushChannelExpired, forKey: .pushChannelExpired)
        try container.encode(tags, forKey: .tags)
        if !templates.isEmpty { try container.encode(templates, forKey: .templates) }
        try container.encodeIfPresent(expirationTime, forKey: .expirationTime)
        try container.encodeIfPresent(lastUpdate, forKey: .lastUpdate)
    }

    /// Most characters of an installation id.
    public static let maximumIdLength = 256

    /// True for an id of 1 to 256 letters, digits and `_ @ # . : - $ ! ~`: the ids of
    /// installations, and those an import job may give registrations.
    /// What `isAllowedId` asks, for errors.
    public static let idRule = "must be 1 to \(maximumIdLength) letters, digits and _ @ # . : - $ ! ~"

    public static func isAllowedId(_ id: String) -> Bool {
        !id.isEmpty && id.count <= maximumIdLength && id.unicodeScalars.allSatisfy({ Tags.isAllowed($0) || $0 == "$" || $0 == "!" || $0 == "~" })
    }

    public func validate() throws(WireError) {
        guard Self.isAllowedId(installationId) else { throw .invalidField(field: "installationId", reason: Self.idRule) }
        // The user id becomes the implicit tag $UserId:{…}, and is stored in a comma-separated
        // tag list: no commas, braces, spaces or control characters, and a tag's length.
        if let userId {
            guard !userId.isEmpty, userId.unicodeScalars.count <= Tags.maximumLength,
                userId.unicodeScalars.allSatisfy({
                    $0.value > 0x20 && $0.value != 0x7F && !",{}".unicodeScalars.contains($0) && !$0.properties.isWhitespace
                })
            else {
                throw .invalidField(
                    field: "userId", reason: "must be 1 to \(Tags.maximumLength) characters without commas, braces, spaces or control characters")
            }
        }
        try FieldCheck.notEmpty(pushChannel, "pushChannel")
        try FieldCheck.handle(pushChannel, "pushChannel")
        if platform == .baidu {
            guard let hyphen = pushChannel.firstIndex(of: "-"), hyphen != pushChannel.startIndex,
                pushChannel.index(after: hyphen) != pushChannel.endIndex
            else { throw .invalidField(field: "pushChannel", reason: "a Baidu push channel is {userId}-{channelId}") }
        }
        if platform == .browser {
            guard let webPush else { throw .invalidField(field: "pushChannel", reason: "a browser push channel needs endpoint, p256dh and auth") }
            try webPush.validate(field: "pushChannel")
        }
        try Tags.validate(tags, field: "tags")
        if templates.count > Self.maximumTemplates {
            throw .invalidField(field: "templates", reason: "at most \(Self.maximumTemplates) templates per installation, not \(templates.count)")
        }
        for (name, template) in templates {
            // In bytes: the name goes into its registration's id, escaped (up to three bytes a byte).
            guard !name.isEmpty, name.utf8.count <= 200 else {
                throw .invalidField(field: "templates", reason: "a template name must be 1 to 200 bytes")
            }
            try FieldCheck.noControlCharacters(name, "templates")
            try FieldCheck.notEmpty(template.body, "templates.\(name).body")
            // A body may hold line breaks and tabs, but not U+0000, which PostgreSQL refuses.
            if template.body.utf8.contains(0) {
                throw .invalidField(field: "templates.\(name).body", reason: "must not hold U+0000")
            }
            if let expiry = template.expiry { try FieldCheck.noControlCharacters(expiry, "templates.\(name).expiry") }
            try TemplateRenderer.validate(
                body: template.body, headers: template.headers, expiry: template.expiry, format: platform.format, field: "templates.\(name)")
            try Tags.validate(template.tags ?? [], field: "templates.\(name).tags")
            try FieldCheck.headers(template.headers ?? [:], "templates.\(name).headers")
        }
    }

    /// Most templates an installation has.
    public static let maximumTemplates = 10

    /// The tags an installation is queried by: its own, with its implicit ones.
    public var queriedTags: [String] {
        Tags.normalized(tags + [Tags.installation(installationId)] + (userId.map { [Tags.user($0)] } ?? []))
    }

    /// The registrations this installation is stored as: the native one, then one per template.
    /// Each carries the installation's tags and the implicit `$InstallationId:{…}` (and
    /// `$UserId:{…}`) tags; a template's registration adds the template's own tags.
    public func registrations(hub: String, now: Date) -> [Registration] {
        var common = tags + [Tags.installation(installationId)]
        if let userId { common.append(Tags.user(userId)) }
        var registrations = [
            Registration(
                registrationId: Registration.installationRegistrationId(installationId, template: nil), hub: hub,
                format: platform.format, handle: pushChannel, webPush: webPush, tags: Tags.normalized(common),
                installationId: installationId, userId: userId, expiresAt: expirationTime, updatedAt: now)
        ]
        for (name, template) in templates.sorted(by: { $0.key < $1.key }) {
            registrations.append(
                Registration(
                    registrationId: Registration.installationRegistrationId(installationId, template: name), hub: hub,
                    format: platform.format, handle: pushChannel, webPush: webPush,
                    tags: Tags.normalized(common + (template.tags ?? [])),
                    template: Template(name: name, body: template.body, headers: template.headers, expiry: template.expiry),
                    installationId: installationId, userId: userId, expiresAt: expirationTime, updatedAt: now))
        }
        return registrations
    }
}
