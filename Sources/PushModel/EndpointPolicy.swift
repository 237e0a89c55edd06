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
    public var wnsHosts: [String] { didSet { wnsPatterns = wnsHosts.map(HostPattern.init) } }
    public var webPushHosts: [String] { didSet { webPushPatterns = webPushHosts.map(HostPattern.init) } }
    /// The lists read once: a worker matches every channel and endpoint it delivers to.
    private var wnsPatterns: [HostPattern]
    private var webPushPatterns: [HostPattern]

    public static let defaultWNSHosts = ["*.notify.windows.com"]

    public init(wnsHosts: [String] = EndpointPolicy.defaultWNSHosts, webPushHosts: [String] = []) {
        self.wnsHosts = wnsHosts
        self.webPushHosts = webPushHosts
        wnsPatterns = wnsHosts.map(HostPattern.init)
        webPushPatterns = webPushHosts.map(HostPattern.init)
    }

    enum CodingKeys: String, CodingKey { case wnsHosts, webPushHosts }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            wnsHosts: try container.decodeIfPresent([String].self, forKey: .wnsHosts) ?? Self.defaultWNSHosts,
            webPushHosts: try container.decodeIfPresent([String].self, forKey: .webPushHosts) ?? [])
    }

    /// A host pattern as read: its host in lowercase without brackets (for `*.domain`, the
    /// `.domain` a subdomain ends in) and its port, if it names one.
    struct HostPattern: Sendable, Equatable {
        var host: String
        var port: Int?
        var anySubdomain: Bool

        init(_ pattern: String) {
            let (host, port) = EndpointPolicy.split(EndpointPolicy.lowercased(pattern))
            self.port = port
            anySubdomain = host.hasPrefix("*.")
            self.host = anySubdomain ? String(host.dropFirst(1)) : host
        }

        /// Whether it matches `host` (lowercase, without brackets) at `port`.
        func matches(host: String, port: Int) -> Bool {
            if let ownPort = self.port, ownPort != port { return false }
            return anySubdomain ? host.hasSuffix(self.host) && host.count > self.host.count : host == self.host
        }

        /// It names a port and is no wildcard: what may use plain http.
        var isExplicit: Bool { port != nil && !anySubdomain }
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
        if let plain = Self.plainReading(handle) {
            if let refusal = refusal(of: plain, platform: platform) { return .failure(refusal) }
            // A plain URL is one URL(string:) takes as it is (EndpointPolicyTextTests).
            if let url = URL(string: handle) { return .success(url) }
        }
        let read: (reading: Reading, url: URL)
        switch Self.fullReading(handle) {
        case .success(let success): read = success
        case .failure(let refusal): return .failure(refusal)
        }
        if let refusal = refusal(of: read.reading, platform: platform) { return .failure(refusal) }
        return .success(read.url)
    }

    /// `url(handle, platform:)`'s text: the handle itself when it is a plain URL, read without
    /// Foundation's parser (a worker checks every WNS channel it delivers to).
    public func checkedText(_ handle: String, platform: Platform) -> Result<String, EndpointRefusal> {
        guard handle.utf8.count <= Self.maximumURLLength else { return .failure(.init("is longer than \(Self.maximumURLLength) bytes")) }
        if let plain = Self.plainReading(handle) {
            if let refusal = refusal(of: plain, platform: platform) { return .failure(refusal) }
            return .success(handle)
        }
        return url(handle, platform: platform).map(\.absoluteString)
    }

    /// What the checks read of a URL: its scheme and host, lowercased, and its port.
    struct Reading: Equatable {
        var scheme: String
        var host: String
        var port: Int
    }

    /// The reading of a plain URL, or nil for any other text: `http` or `https` in lowercase,
    /// a host of lowercase letters, digits, dots and hyphens, an optional port of up to five
    /// digits, then nothing, or a path or query of RFC 3986's characters with whole
    /// percent-escapes (no fragment). Nothing in such a URL reads two ways; anything else
    /// (capitals, brackets, user info, a fragment, stray characters) gets `fullReading`.
    static func plainReading(_ handle: String) -> Reading? {
        var handle = handle
        return handle.withUTF8 { bytes -> Reading? in
            let scheme: String
            var index: Int
            if Self.hasPrefix(bytes, "https://") {
                (scheme, index) = ("https", 8)
            } else if Self.hasPrefix(bytes, "http://") {
                (scheme, index) = ("http", 7)
            } else {
                return nil
            }
            let hostStart = index
            while index < bytes.count, Self.isHostByte(bytes[index]) { index += 1 }
            guard index > hostStart else { return nil }
            let host = String(decoding: UnsafeBufferPointer(rebasing: bytes[hostStart..<index]), as: UTF8.self)
            var port = scheme == "https" ? 443 : 80
            if index < bytes.count, bytes[index] == UInt8(ascii: ":") {
                index += 1
                let digitsStart = index
                var value = 0
                while index < bytes.count, index - digitsStart < 6, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
                    value = value * 10 + Int(bytes[index] - UInt8(ascii: "0"))
                    index += 1
                }
                guard index > digitsStart, index - digitsStart <= 5, value <= 65535 else { return nil }
                port = value
            }
            guard index == bytes.count || bytes[index] == UInt8(ascii: "/") || bytes[index] == UInt8(ascii: "?") else { return nil }
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "%") {
                    guard index + 2 < bytes.count, JSONReader.hexDigit(bytes[index + 1]) != nil, JSONReader.hexDigit(bytes[index + 2]) != nil
                    else { return nil }
                    index += 3
                    continue
                }
                guard Self.isPathByte(byte) else { return nil }
                index += 1
            }
            return Reading(scheme: scheme, host: host, port: port)
        }
    }

    private static func hasPrefix(_ bytes: UnsafeBufferPointer<UInt8>, _ prefix: StaticString) -> Bool {
        bytes.count >= prefix.utf8CodeUnitCount && memcmp(bytes.baseAddress!, prefix.utf8Start, prefix.utf8CodeUnitCount) == 0
    }

    private static func isHostByte(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
            || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-")
    }

    /// RFC 3986's unreserved characters, sub-delimiters, `:`, `@`, `/` and `?`.
    private static func isPathByte(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || "-._~!$&'()*+,;=:@/?".utf8.contains(byte)
    }

    /// The reading of any URL, by Foundation's parser, with the URL it makes.
    static func fullReading(_ handle: String) -> Result<(reading: Reading, url: URL), EndpointRefusal> {
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
        // Foundation takes any run of digits as a port; a socket's is 16 bits.
        if let port = components.port, !(0...65535).contains(port) { return .failure(.init("has no port \(port)")) }
        return .success((Reading(scheme: scheme, host: host, port: components.port ?? (scheme == "https" ? 443 : 80)), url))
    }

    /// Why the policy refuses a URL read as `reading` on `platform`, or nil when it allows it.
    private func refusal(of reading: Reading, platform: Platform) -> EndpointRefusal? {
        let (scheme, host, port) = (reading.scheme, reading.host, reading.port)
        switch platform {
        case .wns:
            guard Self.matches(wnsPatterns, host: host, port: port) else {
                return .init("must be at a WNS host this hub allows (\(wnsHosts.joined(separator: ", "))), not \(host)")
            }
            guard scheme == "https" || Self.matchesExplicitly(wnsPatterns, host: host, port: port) else { return .init("must be https") }
            return nil
        case .webpush:
            if Self.matchesExplicitly(webPushPatterns, host: host, port: port)
                || (scheme == "https" && Self.matches(webPushPatterns, host: host, port: port))
            {
                return nil
            }
            guard scheme == "https" else { return .init("must be https") }
            return Self.specialPurpose(host)
        case .apns, .fcm, .hms, .adm, .xiaomi, .baidu:
            return .init("is not a URL handle on \(platform.rawValue)")
        }
    }

    /// Whether the addresses a Web Push host resolved to may be used (none special-purpose),
    /// unless the host is one the configuration names.
    public func allowsResolved(_ addresses: [String], host: String, port: Int) -> EndpointRefusal? {
        if Self.matches(webPushPatterns, host: host.lowercased(), port: port) { return nil }
        guard !addresses.isEmpty else { return EndpointRefusal("resolves to no address") }
        for address in addresses {
            if let refusal = Self.specialPurpose(address) { return EndpointRefusal("resolves to \(address), which \(refusal.reason)") }
        }
        return nil
    }

    static func matches(_ patterns: [HostPattern], host: String, port: Int) -> Bool {
        let host = unbracketed(host)
        return patterns.contains { $0.matches(host: host, port: port) }
    }

    /// A match on a pattern that names a port or an address literal: what may use plain http.
    static func matchesExplicitly(_ patterns: [HostPattern], host: String, port: Int) -> Bool {
        let host = unbracketed(host)
        return patterns.contains { $0.isExplicit && $0.matches(host: host, port: port) }
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
        func ipv4(at start: Int) -> UInt32 {
            UInt32(bytes[start]) << 24 | UInt32(bytes[start + 1]) << 16 | UInt32(bytes[start + 2]) << 8 | UInt32(bytes[start + 3])
        }
        if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF {  // ::ffff:a.b.c.d
            return isSpecialIPv4(ipv4(at: 12))
        }
        // ::ffff:0:a.b.c.d (IPv4-translated) and 2002:aabb:ccdd:: (6to4) carry an IPv4 address
        // a translator or relay may lead to.
        if bytes[0..<8].allSatisfy({ $0 == 0 }) && bytes[8] == 0xFF && bytes[9] == 0xFF && bytes[10] == 0 && bytes[11] == 0 {
            return isSpecialIPv4(ipv4(at: 12))
        }
        if bytes[0] == 0x20 && bytes[1] == 0x02 { return isSpecialIPv4(ipv4(at: 2)) }
        if bytes[0] == 0x20 && bytes[1] == 0x01 && bytes[2] == 0 && bytes[3] == 0 { return true }  // 2001::/32 Teredo
        if bytes[0] == 0x01 && bytes[1..<8].allSatisfy({ $0 == 0 }) { return true }  // 100::/64 discard-only
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
