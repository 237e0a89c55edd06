import Foundation

/// A device registration: one handle on one platform, with tags, and a template for
/// template registrations.
public struct Registration: Sendable, Equatable {
    public var registrationId: String
    public var hub: String
    /// The native format of the handle's platform (`gcm` and `fcmv1` differ on FCM).
    public var format: NativeFormat
    public var handle: String
    public var webPush: WebPushKeys?
    /// Sorted, without duplicates.
    public var tags: [String]
    /// Set for template registrations.
    public var template: Template?
    /// Set for registrations an installation is stored as.
    public var installationId: String?
    public var userId: String?
    public var expiresAt: Date?
    /// Grows with every change; the ETag of the registration.
    public var version: Int64
    public var updatedAt: Date

    public init(
        registrationId: String, hub: String, format: NativeFormat, handle: String, webPush: WebPushKeys? = nil,
        tags: [String], template: Template? = nil, installationId: String? = nil, userId: String? = nil,
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

    public var platform: Platform { format.platform }

    /// The prefix of the ids of registrations that stand for installations; the registrations
    /// API does not write ids that start with it.
    public static let installationPrefix = "installation."

    /// True for an id that only an installation's registrations have.
    public static func isInstallationOwned(_ id: String) -> Bool { id.lowercased().hasPrefix(installationPrefix) }

    /// Most characters of a registration id an import takes.
    public static let maximumIdLength = 256

    /// What every registration written is checked for, whichever way it came (the hub API, the
    /// app backend): an id as an import's (the store indexes ids), and a handle of at most
    /// 2,048 bytes without U+0000 (the store indexes handles, and PostgreSQL refuses U+0000 in
    /// text and an index row over 2,704 bytes).
    public func validateStored() throws(WireError) {
        guard Self.isImportableId(registrationId) else {
            throw .invalidField(field: "RegistrationId", reason: "must be 1 to \(Self.maximumIdLength) characters without control characters")
        }
        guard handle.utf8.count <= EndpointPolicy.maximumURLLength, !handle.utf8.contains(0) else {
            throw .invalidField(field: "handle", reason: "must be at most \(EndpointPolicy.maximumURLLength) bytes, without U+0000")
        }
    }

    /// True for an id an import job takes: 1 to 256 characters, none a control character (an
    /// id is the last field of an output line, and one a line).
    public static func isImportableId(_ id: String) -> Bool {
        !id.isEmpty && id.unicodeScalars.count <= maximumIdLength && id.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value != 0x7F }
    }

    /// A new registration id, shaped like Azure Notification Hubs' ids: two random numbers and
    /// a counter.
    public static func newId() -> String {
        "\(UInt64.random(in: 1...UInt64(Int64.max)))-\(UInt64.random(in: 1...UInt64(Int64.max)))-1"
    }

    /// The id of a registration that stands for an installation (or one of its templates).
    /// Both names are escaped (`~` and two hex digits for everything but letters, digits, `-`
    /// and `_`), so the `.` between them is unambiguous: installation `a` with template `b`
    /// and installation `a.b` get different ids.
    public static func installationRegistrationId(_ installationId: String, template: String?) -> String {
        let base = installationPrefix + escapeIdPart(installationId)
        guard let template else { return base }
        return base + "." + escapeIdPart(template)
    }

    static func escapeIdPart(_ text: String) -> String {
        var escaped = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "_"):
                escaped.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                escaped += "~" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return escaped
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
