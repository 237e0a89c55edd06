/// Tag rules: at most 60 per registration, each 1 to 120 characters of `[A-Za-z0-9_@#.:-]`.
/// PushHub adds the implicit tags `$InstallationId:{id}` and `$UserId:{id}` itself; they are
/// the only tags that may hold other characters.
public enum Tags {
    public static let maximumPerRegistration = 60
    public static let maximumLength = 120

    public static func isAllowed(_ character: Unicode.Scalar) -> Bool {
        switch character {
        case "a"..."z", "A"..."Z", "0"..."9", "_", "@", "#", ".", ":", "-": true
        default: false
        }
    }

    /// Checks tags a client sent; `field` names them in the error.
    public static func validate(_ tags: [String], field: String) throws(WireError) {
        guard tags.count <= maximumPerRegistration else {
            throw .invalidField(field: field, reason: "at most \(maximumPerRegistration) tags, not \(tags.count)")
        }
        for tag in tags {
            guard !tag.isEmpty, tag.unicodeScalars.count <= maximumLength, tag.unicodeScalars.allSatisfy(isAllowed) else {
                throw .invalidField(
                    field: field,
                    reason: "tag \"\(tag)\" must be 1 to \(maximumLength) characters of letters, digits and _ @ # . : -")
            }
        }
    }

    /// The implicit tag of an installation.
    public static func installation(_ installationId: String) -> String { "$InstallationId:{\(installationId)}" }

    /// The implicit tag of a user id.
    public static func user(_ userId: String) -> String { "$UserId:{\(userId)}" }

    /// What an implicit tag names: the one installation, or the user, whose registrations
    /// carry it.
    public enum Implicit: Equatable, Sendable {
        case installation(String)
        case user(String)
    }

    /// The installation or user `tag` names, if it is an implicit tag; nil for any other tag.
    /// Compared byte by byte, as the databases' LIKE and GLOB compare it (migration 20): by
    /// characters, a user id that starts with a combining mark would join the brace before it.
    public static func implicit(_ tag: String) -> Implicit? {
        let bytes = tag.utf8
        guard bytes.first == UInt8(ascii: "$"), bytes.last == UInt8(ascii: "}") else { return nil }
        for (prefix, make) in [("$InstallationId:{", Implicit.installation), ("$UserId:{", Implicit.user)]
        where bytes.count > prefix.utf8.count && bytes.starts(with: prefix.utf8) {
            return make(String(decoding: bytes.dropFirst(prefix.utf8.count).dropLast(), as: UTF8.self))
        }
        return nil
    }

    /// Tags as PushHub stores them: no duplicates, in order.
    public static func normalized<S: Sequence>(_ tags: S) -> [String] where S.Element == String {
        Array(Set(tags)).sorted()
    }
}
