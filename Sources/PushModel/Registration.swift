import Foundation

/// A device registration: one handle on one platform, with tags, and a template for
/// template registrations.
public struct Registration: Sendable, Equatable {
    public var registrationId: String
    public var hub: String
    /// The native format of the handle's platform (`gcm` and `fcmv1` differ on FCM).
    public var format: NotificationFormat
    public var handle: String
    public var webPush: WebPushKeys?
    /// Sorted, without duplicates.
    public var tags: [String]
    /// Set for template registrations.
    public var template: RegistrationTemplate?
    /// Set for registrations an installation is stored as.
    public var installationId: String?
    public var userId: String?
    public var expiresAt: Date?
    /// Grows with every change; the ETag of the registration.
    public var version: Int64
    public var updatedAt: Date

    public init(
        registrationId: String, hub: String, format: NotificationFormat, handle: String, webPush: WebPushKeys? = nil,
        tags: [String], template: RegistrationTemplate? = nil, installationId: String? = nil, userId: String? = nil,
        expiresAt: Date? = nil, version: Int64 = 1, updatedAt: Date
    ) {
        self.registrationId = registrationId
        self.hub = hub
        self.format = format
        self.handle = handle
        self.webPush = webPush
        self.tags = tags
        self.template = template
        self.installationId = installationId
        self.userId = userId
        self.expiresAt = expiresAt
        self.version = version
        self.updatedAt = updatedAt
    }

    public var platform: Platform { format.platform ?? .apns }

    /// The id of a registration that stands for an installation (or one of its templates).
    public static func installationRegistrationId(_ installationId: String, template: String?) -> String {
        guard let template else { return "installation.\(installationId)" }
        let encoded = template.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? template
        return "installation.\(installationId).\(encoded)"
    }
}

/// The template of a template registration.
public struct RegistrationTemplate: Codable, Sendable, Equatable {
    /// The installation's name for it; registrations made through the registrations API may
    /// name it too (`TemplateName`).
    public var name: String?
    public var body: String
    /// WNS headers, which may hold expressions.
    public var headers: [String: String]?
    /// The APNs expiry, which may be an expression.
    public var expiry: String?

    public init(name: String? = nil, body: String, headers: [String: String]? = nil, expiry: String? = nil) {
        self.name = name
        self.body = body
        self.headers = headers
        self.expiry = expiry
    }
}
