import Crypto
import Foundation
import PushConfiguration

/// A SAS token as Azure Notification Hubs clients send it:
/// `SharedAccessSignature sr=<url-encoded resource>&sig=<url-encoded base64>&se=<unix expiry>&skn=<rule>`.
/// The signature is HMAC-SHA256, keyed with the rule's key as UTF-8 text, over the resource as
/// it appears in the token, a newline, and the expiry.
public struct SharedAccessSignature: Sendable, Equatable {
    /// `sr` as it stands in the token (what was signed).
    public var signedResource: String
    /// `sr` decoded: the URL the token is for.
    public var resource: String
    public var signature: Data
    public var expiry: Int64
    public var keyName: String

    /// Reads a token; the error says what is malformed.
    public static func parse(_ header: String) throws(SASError) -> SharedAccessSignature {
        let prefix = "SharedAccessSignature "
        guard header.count > prefix.count, header.prefix(prefix.count).lowercased() == prefix.lowercased() else {
            throw .malformed("the Authorization header is not a SharedAccessSignature token")
        }
        var fields: [String: String] = [:]
        for pair in header.dropFirst(prefix.count).split(separator: "&") {
            guard let equals = pair.firstIndex(of: "=") else { throw .malformed("\"\(pair)\" is not name=value") }
            fields[pair[..<equals].trimmingSpaces.lowercased()] = String(pair[pair.index(after: equals)...])
        }
        guard let sr = fields["sr"], !sr.isEmpty else { throw .malformed("sr (the resource) is missing") }
        guard let sig = fields["sig"]?.removingPercentEncoding, let signature = Data(base64Encoded: sig) else {
            throw .malformed("sig is missing or not base64")
        }
        guard let se = fields["se"], let expiry = Int64(se) else { throw .malformed("se (the expiry) is missing or not a number") }
        guard let keyName = fields["skn"]?.removingPercentEncoding, !keyName.isEmpty else { throw .malformed("skn (the key name) is missing") }
        let resource = sr.removingPercentEncoding ?? sr
        return SharedAccessSignature(signedResource: sr, resource: resource, signature: signature, expiry: expiry, keyName: keyName)
    }

    /// `resourceURI` with its scheme, host and hub name lowercased, as the Azure SDKs write
    /// them, and the rest of its path as given (ids are compared exactly).
    static func canonicalResource(_ resourceURI: String) -> String {
        guard let schemeEnd = resourceURI.range(of: "://") else { return resourceURI.lowercased() }
        let afterScheme = resourceURI[schemeEnd.upperBound...]
        let parts = afterScheme.split(separator: "/", maxSplits: 2, omittingEmptySubsequences: false)
        var canonical = resourceURI[..<schemeEnd.upperBound].lowercased() + parts[0].lowercased()
        if parts.count > 1 { canonical += "/" + parts[1].lowercased() }
        if parts.count > 2 { canonical += "/" + parts[2] }
        return canonical
    }

    /// A token for `resourceURI`, as the Azure SDKs make one from a connection string.
    public static func token(resourceURI: String, keyName: String, key: String, expiry: Date) -> String {
        let encoded = percentEncode(canonicalResource(resourceURI))
        let seconds = Int64(expiry.timeIntervalSince1970)
        let signature = sign("\(encoded)\n\(seconds)", key: key)
        return "SharedAccessSignature sr=\(encoded)&sig=\(percentEncode(signature.base64EncodedString()))&se=\(seconds)&skn=\(keyName)"
    }

    static func sign(_ text: String, key: String) -> Data {
        Data(HMAC<SHA256>.authenticationCode(for: Data(text.utf8), using: SymmetricKey(data: Data(key.utf8))))
    }

    static func percentEncode(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }

    /// Checks the token against a hub's rules for a request to `host` and `path`.
    /// - Returns: the rule that signed it.
    public func verify(
        rules: [HubsConfiguration.SASRule], host: String, path: String, right: AccessRight, now: Date
    ) throws(SASError) -> HubsConfiguration.SASRule {
        guard let rule = rules.first(where: { $0.name == keyName }) else { throw .unknownRule(keyName) }
        let expected = Self.sign("\(signedResource)\n\(expiry)", key: rule.key)
        guard constantTimeEqual(expected, signature) else {
            throw .badSignature
        }
        return try check(rules: rules, host: host, path: path, right: right, now: now)
    }

    /// The checks of `verify` that do not depend on the signature: the rule still exists, the
    /// token has not expired, it covers the request's resource and its rule has the right.
    /// For a token whose signature was verified before: never call it on one that was not.
    @discardableResult
    func check(
        rules: [HubsConfiguration.SASRule], host: String, path: String, right: AccessRight, now: Date
    ) throws(SASError) -> HubsConfiguration.SASRule {
        try check(rules: rules, scope: Scope(resource: resource), host: host, path: path, right: right, now: now)
    }

    /// `check`, with the token's resource read once (`Scope(resource:)`) for every use.
    @discardableResult
    func check(
        rules: [HubsConfiguration.SASRule], scope: Scope?, host: String, path: String, right: AccessRight, now: Date
    ) throws(SASError) -> HubsConfiguration.SASRule {
        guard let rule = rules.first(where: { $0.name == keyName }) else { throw .unknownRule(keyName) }
        guard Double(expiry) > now.timeIntervalSince1970 else { throw .expired }
        guard let scope, scope.covers(host: host, path: path) else { throw .wrongResource(resource) }
        guard rule.allows(right) else { throw .lacksRight(right, rule: rule.name) }
        return rule
    }

    /// What a token's resource grants: a host, and the path segments every request's path must
    /// start with.
    struct Scope: Sendable {
        let host: String
        let segments: [Substring]

        /// Nil for a resource that names no host, or a scheme other than sb, http or https.
        init?(resource: String) {
            guard let url = URLComponents(string: resource), let scheme = url.scheme?.lowercased(), ["sb", "http", "https"].contains(scheme),
                let host = url.host?.lowercased()
            else { return nil }
            self.host = host
            segments = url.path.split(separator: "/")
        }

        /// Same host, and the resource's path a prefix of the request's, segment by segment.
        /// Host and hub name (the first segment) are compared ignoring case, as hub names are;
        /// the rest exactly, as ids are.
        func covers(host requestHost: String, path: String) -> Bool {
            guard host == SharedAccessSignature.hostWithoutPort(requestHost).lowercased() else { return false }
            let requested = path.split(separator: "/")
            guard requested.count >= segments.count else { return false }
            for (index, (given, asked)) in zip(segments, requested).enumerated() {
                let same = index == 0 ? given.lowercased() == asked.lowercased() : given == asked
                guard same else { return false }
            }
            return true
        }
    }

    static func hostWithoutPort(_ host: String) -> String {
        if host.hasPrefix("["), let end = host.firstIndex(of: "]") { return String(host[host.index(after: host.startIndex)..<end]) }
        return host.split(separator: ":").first.map(String.init) ?? host
    }
}

/// Why a request's SAS token was refused: 401 except a missing right, 403.
public enum SASError: Error, Sendable, Equatable, CustomStringConvertible {
    case missing
    case malformed(String)
    case unknownRule(String)
    case badSignature
    case expired
    case wrongResource(String)
    case lacksRight(AccessRight, rule: String)

    public var description: String {
        switch self {
        case .missing: "Authorization header missing: send a SharedAccessSignature token"
        case .malformed(let why): "malformed SAS token: \(why)"
        // One answer for an unknown key, a wrong signature and an unknown hub: none tells which.
        case .unknownRule, .badSignature: "the SAS token's key name or signature does not match this hub"
        case .expired: "the SAS token has expired"
        case .wrongResource(let resource): "the SAS token is for \(resource), not this resource"
        case .lacksRight(let right, let rule): "key \"\(rule)\" lacks the \(right.rawValue) right"
        }
    }

    public var isForbidden: Bool {
        if case .lacksRight = self { return true }
        return false
    }
}

/// `Endpoint=sb://host/;SharedAccessKeyName=…;SharedAccessKey=…`.
public struct ConnectionString: Sendable, Equatable {
    public var endpoint: URL
    public var keyName: String
    public var key: String

    public init?(_ text: String) {
        var fields: [String: String] = [:]
        for part in text.split(separator: ";") {
            guard let equals = part.firstIndex(of: "=") else { continue }
            fields[part[..<equals].lowercased()] = String(part[part.index(after: equals)...])
        }
        guard let endpointText = fields["endpoint"], let endpoint = URL(string: endpointText),
            let keyName = fields["sharedaccesskeyname"], let key = fields["sharedaccesskey"]
        else { return nil }
        self.endpoint = endpoint
        self.keyName = keyName
        self.key = key
    }

    /// A token for a resource path (such as `/myhub`) under this endpoint, valid for `lifetime`.
    public func token(for path: String, lifetime: TimeInterval = 3600, now: Date = Date()) -> String {
        let host = endpoint.host.map { h in endpoint.port.map { "\(h):\($0)" } ?? h } ?? ""
        return SharedAccessSignature.token(
            resourceURI: "https://\(host)\(path)", keyName: keyName, key: key, expiry: now.addingTimeInterval(lifetime))
    }
}

/// Whether two byte strings are equal, in time that does not depend on where they differ
/// (only on their length): signatures and keys are compared with it.
func constantTimeEqual<A: Collection<UInt8>, B: Collection<UInt8>>(_ a: A, _ b: B) -> Bool {
    guard a.count == b.count else { return false }
    return zip(a, b).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
}
