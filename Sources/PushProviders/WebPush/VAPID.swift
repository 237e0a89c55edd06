import Crypto
import Foundation
import PushModel
import Synchronization

/// RFC 8292 voluntary application server identification: an ES256 JWT for the push
/// service's origin, sent as `Authorization: vapid t=…, k=…`.
public struct VAPID: Sendable {
    /// `mailto:` or `https:` contact of the application server.
    public let subject: String
    /// The raw P-256 private key (32 bytes); swift-crypto's key type is not Sendable.
    private let privateKey: Data
    /// The uncompressed public key, base64url, as the subscription was made with.
    public let publicKey: String
    /// How long a token is valid (at most 24 hours by RFC 8292).
    public let lifetime: TimeInterval

    public init(subject: String, privateKey: Data, lifetime: TimeInterval = 12 * 3600) throws {
        let key = try P256.Signing.PrivateKey(rawRepresentation: privateKey)
        self.subject = subject
        self.privateKey = privateKey
        self.publicKey = Base64URL.encode(key.publicKey.x963Representation)
        self.lifetime = min(lifetime, 24 * 3600)
    }

    /// The audience of a push endpoint: its origin (`https://host[:port]`).
    public static func audience(of endpoint: URL) -> String? {
        guard let scheme = endpoint.scheme, let host = endpoint.host else { return nil }
        return "\(scheme)://\(host)" + (endpoint.port.map { ":\($0)" } ?? "")
    }

    /// The `Authorization` header value for a request to `endpoint`.
    public func authorization(for endpoint: URL, now: Date = Date()) throws -> String {
        guard let audience = Self.audience(of: endpoint) else { throw WebPushEncryption.Failure(message: "the endpoint has no origin") }
        let header = Base64URL.encode(Data(#"{"typ":"JWT","alg":"ES256"}"#.utf8))
        let claims: [String: Any] = ["aud": audience, "exp": Int(now.timeIntervalSince1970 + lifetime), "sub": subject]
        let payload = Base64URL.encode(try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys, .withoutEscapingSlashes]))
        let signingInput = Data("\(header).\(payload)".utf8)
        let signature = try P256.Signing.PrivateKey(rawRepresentation: privateKey).signature(for: signingInput).rawRepresentation
        return "vapid t=\(header).\(payload).\(Base64URL.encode(signature)), k=\(publicKey)"
    }
}

/// Signed VAPID headers kept per hub and push-service origin until half their lifetime has
/// passed: one ES256 signature per origin, not one per push.
final class VAPIDHeaders: Sendable {
    private let entries = Mutex<[String: (value: String, renewAt: Date)]>([:])

    /// The `Authorization` header for `endpoint` with `vapid`, signed again when due.
    func authorization(_ vapid: VAPID, hub: String, endpoint: URL, now: Date = Date()) throws -> String {
        let key = hub + "\n" + (VAPID.audience(of: endpoint) ?? "")
        if let kept = entries.withLock({ $0[key] }), now < kept.renewAt { return kept.value }
        let value = try vapid.authorization(for: endpoint, now: now)
        entries.withLock {
            if $0.count >= 10_000 { $0.removeAll() }
            $0[key] = (value, now.addingTimeInterval(vapid.lifetime / 2))
        }
        return value
    }
}
