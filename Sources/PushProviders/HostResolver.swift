import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Resolves host names to addresses (as text) off the cooperative pool, and remembers each
/// answer for a while, so that a Web Push endpoint can be refused when its name leads to a
/// loopback, private or reserved address.
public final class HostResolver: Sendable {
    private let cache = Mutex<[String: (addresses: [String], at: ContinuousClock.Instant)]>([:])
    private let lifetime: Duration
    private static let maximumCached = 10_000

    public init(lifetime: Duration = .seconds(60)) {
        self.lifetime = lifetime
    }

    /// The addresses of `host`; an address literal is its own answer. Throws when the name
    /// does not resolve.
    public func addresses(of host: String) async throws -> [String] {
        let host = host.trimmingCharacters(in: CharacterSet(charactersIn: "[]")).lowercased()
        let now = ContinuousClock.now
        if let cached = cache.withLock({ $0[host] }), now - cached.at < lifetime { return cached.addresses }
        let addresses = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[String], any Error>) in
            DispatchQueue.global().async { continuation.resume(with: Result { try Self.resolve(host) }) }
        }
        cache.withLock { entries in
            if entries.count >= Self.maximumCached { entries.removeAll() }
            entries[host] = (addresses, now)
        }
        return addresses
    }

    struct ResolutionFailed: Error, CustomStringConvertible {
        var host: String
        var code: Int32
        var description: String { "\(host) does not resolve (\(String(cString: gai_strerror(code))))" }
    }

    static func resolve(_ host: String) throws -> [String] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let code = getaddrinfo(host, nil, &hints, &list)
        guard code == 0 else { throw ResolutionFailed(host: host, code: code) }
        defer { freeaddrinfo(list) }
        var addresses: [String] = []
        var next = list
        while let entry = next {
            var buffer = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            if getnameinfo(entry.pointee.ai_addr, entry.pointee.ai_addrlen, &buffer, socklen_t(buffer.count), nil, 0, NI_NUMERICHOST) == 0 {
                addresses.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
            }
            next = entry.pointee.ai_next
        }
        return addresses
    }
}
