import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Where PushHub may send a handle that is a URL (WNS channel URIs, Web Push endpoints). The
/// URL comes from a device, so the hub's configuration decides, never the device:
///
/// - WNS: https to a host that matches `wnsHosts` (`*.notify.windows.com` by default), so the
///   hub's WNS access token only ever goes to WNS.
/// - Web Push: https to a public host; loopback, link-local, private and other special-purpose
///   addresses (and names that resolve to them) are refused unless `webPushHosts` names them.
/// - Plain http only to a host:port the lists name (a simulator in development).
///
/// Patterns are `host`, `*.domain` (any subdomain) or `[::1]`, each with an optional `:port`.
public struct EndpointPolicy: Sendable, Equatable, Codable {
    public var wnsHosts: [String]
    public var webPushHosts: [String]

    public static let defaultWNSHosts = ["*.notify.windows.com"]

    public init(wnsHosts: [String] = EndpointPolicy.defaultWNSHosts, webPushHosts: [String] = []) {
        self.wnsHosts = wnsHosts
        self.webPushHosts = webPushHosts
    }

    enum CodingKeys: String, CodingKey { case wnsHosts, webPushHosts }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        wnsHosts = try container.decodeIfPresent([String].self, forKey: .wnsHosts) ?? Self.defaultWNSHosts
        webPushHosts = try container.decodeIfPresent([String].self, forKey: .webPushHosts) ?? []
    }

    /// This policy with `hostsAndPorts` (a simulator's listeners) allowed on both platforms, in
    /// place of any loopback entries an earlier run added.
    public func allowing(simulator hostsAndPorts: [String]) -> EndpointPolicy {
        let isLoopbackEntry: (String) -> Bool = { pattern in
            let host = Self.split(pattern).host
            return host == "localhost" || host == "::1" || host.hasPrefix("127.")
        }
        return EndpointPolicy(
            wnsHosts: wnsHosts.filter { !isLoopbackEntry($0) } + hostsAndPorts,
            webPushHosts: webPushHosts.filter { !isLoopbackEntry($0) } + hostsAndPorts)
    }

    /// Most bytes of a URL handle.
    public static let maximumURLLength = 2048

    /// The URL to deliver `handle` to on `platform`, or why it may not be used.
    public func url(_ handle: String, platform: Platform) -> Result<URL, EndpointRefusal> {
        guard handle.utf8.count <= Self.maximumURLLength else { return .failure(.init("is longer than \(Self.maximumURLLength) bytes")) }
        guard let components = URLComponents(string: handle), let scheme = components.scheme?.lowercased(),
            let host = components.host?.lowercased(), !host.isEmpty, let url = components.url
        else { return .failure(.init("is not an absolute URL")) }
        guard components.user == nil, components.password == nil else { return .failure(.init("must not carry a user name or password")) }
        // Only plain names and address literals: no percent-escapes, zone ids or other
        // characters that a resolver or client might read differently from this check.
        let rawHost = components.percentEncodedHost ?? ""
        guard rawHost == host || rawHost.lowercased() == host,
            host.unicodeScalars.allSatisfy({ ("a"..."z").contains($0) || ("0"..."9").contains($0) || ".-:[]".unicodeScalars.contains($0) })
        else { return .failure(.init("must name its host in plain letters, digits, dots and hyphens, or an address")) }
        guard scheme == "https" || scheme == "http" else { return .failure(.init("must be https, not \(scheme)")) }
        let port = components.port ?? (scheme == "https" ? 443 : 80)
        switch platform {
        case .wns:
            let listed = Self.matches(wnsHosts, host: host, port: port)
            guard listed else { return .failure(.init("must be at a WNS host this hub allows (\(wnsHosts.joined(separator: ", "))), not \(host)")) }
            guard scheme == "https" || Self.matchesExplicitly(wnsHosts, host: host, port: port) else {
                return .failure(.init("must be https"))
            }
            return .success(url)
        case .webpush:
            if Self.matchesExplicitly(webPushHosts, host: host, port: port)
                || (scheme == "https" && Self.matches(webPushHosts, host: host, port: port))
            {
                return .success(url)
            }
            guard scheme == "https" else { return .failure(.init("must be https")) }
            if let refusal = Self.specialPurpose(host) { return .failure(refusal) }
            return .success(url)
        case .apns, .fcm, .hms, .adm, .xiaomi, .baidu:
            return .failure(.init("is not a URL handle on \(platform.rawValue)"))
        }
    }

    /// Whether the addresses a Web Push host resolved to may be used (none special-purpose),
    /// unless the host is one the configuration names.
    public func allowsResolved(_ addresses: [String], host: String, port: Int) -> EndpointRefusal? {
        if Self.matches(webPushHosts, host: host.lowercased(), port: port) { return nil }
        guard !addresses.isEmpty else { return EndpointRefusal("resolves to no address") }
        for address in addresses {
            if let refusal = Self.specialPurpose(address) { return EndpointRefusal("resolves to \(address), which \(refusal.reason)") }
        }
        return nil
    }

    static func matches(_ patterns: [String], host: String, port: Int) -> Bool {
        patterns.contains { pattern in matches(pattern, host: host, port: port) }
    }

    /// A match on a pattern that names a port or an address literal: what may use plain http.
    static func matchesExplicitly(_ patterns: [String], host: String, port: Int) -> Bool {
        patterns.contains { pattern in
            let (patternHost, patternPort) = split(pattern)
            return patternPort != nil && !patternHost.hasPrefix("*.") && matches(pattern, host: host, port: port)
        }
    }

    static func matches(_ pattern: String, host: String, port: Int) -> Bool {
        let (patternHost, patternPort) = split(lowercased(pattern))
        if let patternPort, patternPort != port { return false }
        let host = unbracketed(host)
        if patternHost.hasPrefix("*.") {
            let suffix = patternHost.dropFirst(1)  // ".domain"
            return host.hasSuffix(suffix) && host.count > suffix.count
        }
        return host == patternHost
    }

    /// `text` without the brackets at either end, as `trimmingCharacters(in: "[]")` trims them
    /// (scalar by scalar), without making a CharacterSet each time: this runs for every WNS
    /// channel and Web Push endpoint delivered to, against each allowed host.
    public static func unbracketed(_ text: String) -> String {
        let scalars = text.unicodeScalars
        var start = scalars.startIndex
        var end = scalars.endIndex
        while start < end, scalars[start] == "[" || scalars[start] == "]" { start = scalars.index(after: start) }
        while end > start, scalars[scalars.index(before: end)] == "[" || scalars[scalars.index(before: end)] == "]" {
            end = scalars.index(before: end)
        }
        return start == scalars.startIndex && end == scalars.endIndex ? text : String(scalars[start..<end])
    }

    /// `text.lowercased()`, without a copy when it is lowercase ASCII already.
    static func lowercased(_ text: String) -> String {
        text.utf8.allSatisfy { $0 < 0x80 && !(UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) } ? text : text.lowercased()
    }

    /// A pattern's host (brackets removed) and port, if it names one.
    public static func split(_ pattern: String) -> (host: String, port: Int?) {
        if pattern.hasPrefix("["), let close = pattern.firstIndex(of: "]") {
            let host = String(pattern[pattern.index(after: pattern.startIndex)..<close])
            let rest = pattern[pattern.index(after: close)...]
            return (host, rest.hasPrefix(":") ? Int(rest.dropFirst()) : nil)
        }
        if let colon = pattern.lastIndex(of: ":"), let port = Int(pattern[pattern.index(after: colon)...]) {
            return (String(pattern[..<colon]), port)
        }
        return (pattern, nil)
    }

    /// Why `host` (a name or an address literal, in any form a resolver reads) may not be sent
    /// to, or nil when it names a public address or a name still to be resolved.
    static func specialPurpose(_ host: String) -> EndpointRefusal? {
        let host = lowercased(unbracketed(host))
        if host == "localhost" || host.hasSuffix(".localhost") || host.hasSuffix(".local") || host.hasSuffix(".internal") {
            return EndpointRefusal("names a local host (\(host))")
        }
        var v4 = in_addr()
        // inet_aton reads every form a resolver would (127.1, 2130706433, 0x7f.1), not only dotted quads.
        if !host.contains(":"), inet_aton(host, &v4) != 0 {
            return isSpecialIPv4(UInt32(bigEndian: v4.s_addr)) ? EndpointRefusal("is a loopback, private or reserved address (\(host))") : nil
        }
        var v6 = in6_addr()
        if host.contains(":"), inet_pton(AF_INET6, host, &v6) == 1 {
            let bytes = withUnsafeBytes(of: v6) { Array($0) }
            return isSpecialIPv6(bytes) ? EndpointRefusal("is a loopback, private or reserved address (\(host))") : nil
        }
        return nil
    }

    static func isSpecialIPv4(_ address: UInt32) -> Bool {
        let ranges: [(UInt32, Int)] = [
            (0x0000_0000, 8), (0x0A00_0000, 8), (0x6440_0000, 10), (0x7F00_0000, 8), (0xA9FE_0000, 16), (0xAC10_0000, 12),
            (0xC000_0000, 24), (0xC000_0200, 24), (0xC0A8_0000, 16), (0xC612_0000, 15), (0xC633_6400, 24), (0xCB00_7100, 24),
            (0xE000_0000, 4), (0xF000_0000, 4),
        ]
        return ranges.contains { base, bits in address >> (32 - bits) == base >> (32 - bits) }
    }

    static func isSpecialIPv6(_ bytes: [UInt8]) -> Bool {
        guard bytes.count == 16 else { return true }
        if bytes.allSatisfy({ $0 == 0 }) { return true }  // ::
        if bytes[0..<15].allSatisfy({ $0 == 0 }) && bytes[15] == 1 { return true }  // ::1
        if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF {  // ::ffff:a.b.c.d
            return isSpecialIPv4(UInt32(bytes[12]) << 24 | UInt32(bytes[13]) << 16 | UInt32(bytes[14]) << 8 | UInt32(bytes[15]))
        }
        if bytes[0..<12].allSatisfy({ $0 == 0 }) { return true }  // IPv4-compatible, deprecated
        if bytes[0] & 0xFE == 0xFC { return true }  // fc00::/7 unique local
        if bytes[0] == 0xFE && bytes[1] & 0xC0 == 0x80 { return true }  // fe80::/10 link-local
        if bytes[0] == 0xFE && bytes[1] & 0xC0 == 0xC0 { return true }  // fec0::/10 site-local, deprecated
        if bytes[0] == 0xFF { return true }  // multicast
        if bytes[0] == 0x20 && bytes[1] == 0x01 && bytes[2] == 0x0D && bytes[3] == 0xB8 { return true }  // documentation
        if bytes[0] == 0x00 && bytes[1] == 0x64 && bytes[2] == 0xFF && bytes[3] == 0x9B { return true }  // NAT64 to anything
        return false
    }
}

/// Why a URL handle may not be used.
public struct EndpointRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}
