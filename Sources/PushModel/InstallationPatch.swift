import Foundation

/// One JSON-Patch operation on an installation, as `PATCH /{hub}/installations/{id}` takes
/// them: add, remove or replace on `/tags`, `/tags/-`, `/tags/{tag}`, `/userId`,
/// `/pushChannel`, `/templates/{name}` and its `/body`, `/headers`, `/expiry`, `/tags`.
public struct InstallationPatchOperation: Decodable, Sendable, Equatable {
    /// Most operations in one JSON-Patch document.
    public static let maximumOperations = 100

    public enum Op: String, Decodable, Sendable {
        case add, remove, replace
    }

    public var op: Op
    public var path: String
    public var value: PatchValue?

    public init(op: Op, path: String, value: PatchValue? = nil) {
        self.op = op
        self.path = path
        self.value = value
    }
}

/// The `value` of a patch operation: a string, a list of strings, or an object.
public enum PatchValue: Decodable, Sendable, Equatable {
    case string(String)
    case strings([String])
    case object([String: PatchValue])
    case other

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let text = try? container.decode(String.self) {
            self = .string(text)
        } else if let list = try? container.decode([String].self) {
            self = .strings(list)
        } else if let object = try? container.decode([String: PatchValue].self) {
            self = .object(object)
        } else {
            self = .other
        }
    }

    var string: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    var strings: [String]? {
        switch self {
        case .strings(let list): list
        case .string(let text): [text]
        default: nil
        }
    }

    var stringDictionary: [String: String]? {
        guard case .object(let object) = self else { return nil }
        var result: [String: String] = [:]
        for (key, value) in object {
            guard let text = value.string else { return nil }
            result[key] = text
        }
        return result
    }
}

extension Installation {
    /// Applies `operations` in order; the result is validated as a whole. Errors name the
    /// operation, e.g. `[2].path`.
    public func applying(_ operations: [InstallationPatchOperation]) throws(WireError) -> Installation {
        var installation = self
        for (index, operation) in operations.enumerated() {
            try installation.apply(operation, field: "[\(index)]")
        }
        try installation.validate()
        return installation
    }

    private mutating func apply(_ operation: InstallationPatchOperation, field: String) throws(WireError) {
        let segments = operation.path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map {
            String($0).replacingOccurrences(of: "~1", with: "/").replacingOccurrences(of: "~0", with: "~")
        }
        guard operation.path.hasPrefix("/"), let head = segments.first else {
            throw .invalidField(field: "\(field).path", reason: "must be a JSON pointer such as /tags, not \"\(operation.path)\"")
        }
        func value<T>(_ read: (PatchValue) -> T?, _ what: String) throws(WireError) -> T {
            guard let value = operation.value, let typed = read(value) else {
                throw .invalidField(field: "\(field).value", reason: "\(operation.op.rawValue) \(operation.path) needs \(what)")
            }
            return typed
        }
        switch (head, segments.count, operation.op) {
        case ("tags", 1, .add):
            tags = Tags.normalized(tags + (try value(\.strings, "a tag or a list of tags")))
        case ("tags", 1, .replace):
            tags = Tags.normalized(try value(\.strings, "a list of tags"))
        case ("tags", 1, .remove):
            tags = []
        case ("tags", 2, .add) where segments[1] == "-":
            tags = Tags.normalized(tags + [try value(\.string, "a tag")])
        case ("tags", 2, .remove):
            guard tags.contains(segments[1]) else {
                throw .invalidField(field: "\(field).path", reason: "the installation has no tag \"\(segments[1])\"")
            }
            tags.removeAll { $0 == segments[1] }
        case ("userId", 1, .add), ("userId", 1, .replace):
            userId = try value(\.string, "a string")
        case ("userId", 1, .remove):
            userId = nil
        case ("pushChannel", 1, .add), ("pushChannel", 1, .replace):
            if platform == .browser {
                let channel = try value(\.stringDictionary, "an object with endpoint, p256dh and auth")
                guard let endpoint = channel["endpoint"], let p256dh = channel["p256dh"], let auth = channel["auth"] else {
                    throw .invalidField(field: "\(field).value", reason: "a browser push channel needs endpoint, p256dh and auth")
                }
                pushChannel = endpoint
                webPush = WebPushKeys(p256dh: p256dh, auth: auth)
            } else {
                pushChannel = try value(\.string, "a string")
            }
            pushChannelExpired = false
        case ("templates", 2, .add), ("templates", 2, .replace):
            let object = try value(\.objectValue, "a template object")
            guard let body = object["body"]?.string else {
                throw .invalidField(field: "\(field).value.body", reason: "a template needs a body")
            }
            templates[segments[1]] = Template(
                body: body, headers: object["headers"]?.stringDictionary, expiry: object["expiry"]?.string,
                tags: object["tags"]?.strings)
        case ("templates", 2, .remove):
            guard templates.removeValue(forKey: segments[1]) != nil else {
                throw .invalidField(field: "\(field).path", reason: "the installation has no template \"\(segments[1])\"")
            }
        case ("templates", 3, let op):
            let name = segments[1]
            guard var template = templates[name] else {
                throw .invalidField(field: "\(field).path", reason: "the installation has no template \"\(name)\"")
            }
            switch (segments[2], op) {
            case ("body", .add), ("body", .replace): template.body = try value(\.string, "a string")
            case ("headers", .add), ("headers", .replace): template.headers = try value(\.stringDictionary, "an object of strings")
            case ("headers", .remove): template.headers = nil
            case ("expiry", .add), ("expiry", .replace): template.expiry = try value(\.string, "a string")
            case ("expiry", .remove): template.expiry = nil
            case ("tags", .add): template.tags = Tags.normalized((template.tags ?? []) + (try value(\.strings, "a tag or a list of tags")))
            case ("tags", .replace): template.tags = Tags.normalized(try value(\.strings, "a list of tags"))
            case ("tags", .remove): template.tags = nil
            default:
                throw .invalidField(field: "\(field).path", reason: "\(op.rawValue) is not supported on \(operation.path)")
            }
            templates[name] = template
        default:
            throw .invalidField(field: "\(field).path", reason: "\(operation.op.rawValue) is not supported on \(operation.path)")
        }
    }
}

extension PatchValue {
    var objectValue: [String: PatchValue]? {
        if case .object(let object) = self { return object }
        return nil
    }
}
