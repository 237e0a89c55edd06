import Foundation
import PushModel
import Synchronization

/// The addresses a check approved for a host and port (a Web Push endpoint's, before each
/// push), which the connections to that origin go to: the name is not looked up again between
/// the check and the connection, so a name whose answers change (DNS rebinding) cannot lead a
/// connection to an address the check would have refused. Each check replaces its host's
/// addresses. Bounded: past `maximum` hosts the map starts again, and a pinned request's origin
/// left without its addresses fails to connect until its next check pins them.
final class PinnedAddresses: Sendable {
    private let entries = Mutex<[String: [String]]>([:])
    static let maximum = 10_000

    /// A host (brackets and case aside) and port, as both sides name them.
    static func key(host: String, port: Int) -> String { "\(EndpointPolicy.unbracketed(host).lowercased()) \(port)" }

    func pin(_ key: String, _ addresses: [String]) {
        entries.withLock { entries in
            if entries.count >= Self.maximum, entries[key] == nil { entries.removeAll() }
            entries[key] = addresses
        }
    }

    /// The addresses pinned for `host`:`port` now; nil when none are.
    func addresses(host: String, port: Int) -> [String]? {
        let key = Self.key(host: host, port: port)
        return entries.withLock { $0[key] }
    }

    /// Where a pinned client of `host`:`port` connects: to the addresses pinned at the time it
    /// connects; none (the connection fails) when none are.
    func source(host: String, port: Int) -> @Sendable () -> [String]? {
        { [self] in addresses(host: host, port: port) }
    }
}

extension URL {
    /// Its host and port, the scheme's when it names none: how a check names the origin it
    /// pins (`WebPushProvider`) and a client the origin it connects to, alike.
    var hostAndPort: (host: String, port: Int)? {
        host.map { ($0, port ?? (scheme?.lowercased() == "https" ? 443 : 80)) }
    }
}
