import Foundation

/// A template: a body with expressions, and the WNS headers and APNs expiry that may hold
/// expressions too. One type wherever a template lives: an installation's (by name, with tags
/// of its own), a registration's (which may name it), and a delivery target's (body, headers
/// and expiry only: `forDelivery`).
public struct Template: Codable, Sendable, Equatable {
    /// The installation's name for it; registrations made through the registrations API may
    /// name it too (`TemplateName`).
    public var name: String?
    public var body: String
    /// WNS headers, which may hold expressions.
    public var headers: [String: String]?
    /// The APNs expiry, which may be an expression.
    public var expiry: String?
    /// An installation template's own tags, added to the installation's.
    public var tags: [String]?

    public init(name: String? = nil, body: String, headers: [String: String]? = nil, expiry: String? = nil, tags: [String]? = nil) {
        self.name = name
        self.body = body
        self.headers = headers
        self.expiry = expiry
        self.tags = tags
    }

    /// What a delivery target carries of it: the wire schema has body, headers and expiry.
    public var forDelivery: Template { Template(body: body, headers: headers, expiry: expiry) }

    /// The last second `apns-expiration` may name: the end of year 9999, RFC 3339's last.
    public static let latestExpiration = 253_402_300_799

    /// An APNs expiry as it was filled (seconds since 1970, or an RFC 3339 time) in the seconds
    /// since 1970 `apns-expiration` carries; nil for anything else, and for a time before 1970
    /// or after `latestExpiration` (converted, a larger one would trap).
    public static func expirationSeconds(_ text: String) -> Int? {
        let seconds: Int?
        if let whole = Int(text) {
            seconds = whole
        } else if let date = RFC3339.parse(text) {
            seconds = Int(exactly: date.timeIntervalSince1970.rounded(.down))
        } else {
            seconds = nil
        }
        guard let seconds, (0...latestExpiration).contains(seconds) else { return nil }
        return seconds
    }

    /// Whether an expiry holds no expression (`$(`, `#(`, `%(`, `.(`, `{…}`, `'…'`): its text
    /// is what every push gets, so it can be checked when the template is registered.
    static func isLiteral(_ value: String) -> Bool {
        !value.utf8.contains { $0 == UInt8(ascii: "(") || $0 == UInt8(ascii: "{") || $0 == UInt8(ascii: "'") }
    }
}

// The names the template had before it was one type, for code that uses PushModel.
extension Installation {
    public typealias Template = PushModel.Template
}

extension DeliveryBatch {
    public typealias Template = PushModel.Template
}

@available(*, deprecated, renamed: "Template")
public typealias RegistrationTemplate = Template

extension Template {
    /// Whether `other` has the same bytes in body, headers and expiry, all that rendering it,
    /// checking it and `CollapseKey.variant(of:)` read (no headers and empty headers alike).
    /// Swift's `==` on strings takes canonically equivalent ones for equal; these are compared
    /// byte by byte, as the checks count bytes and pushes carry them.
    public func hasSameBytes(as other: Template) -> Bool {
        guard Self.sameBytes(body, other.body) else { return false }
        switch (expiry, other.expiry) {
        case (nil, nil): break
        case (let one?, let another?): guard Self.sameBytes(one, another) else { return false }
        default: return false
        }
        let (mine, theirs) = (headers ?? [:], other.headers ?? [:])
        guard mine.count == theirs.count else { return false }
        for (name, value) in mine {
            // A dictionary holds no two canonically equivalent keys: the one found is the only candidate.
            guard let index = theirs.index(forKey: name), Self.sameBytes(theirs[index].key, name), Self.sameBytes(theirs[index].value, value)
            else { return false }
        }
        return true
    }

    static func sameBytes(_ first: String, _ second: String) -> Bool {
        var (first, second) = (first, second)
        return first.withUTF8 { one in
            second.withUTF8 { other in one.count == other.count && (one.isEmpty || memcmp(one.baseAddress!, other.baseAddress!, one.count) == 0) }
        }
    }
}
