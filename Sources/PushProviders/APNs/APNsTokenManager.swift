import Crypto
import Foundation
import PushModel

/// The provider token of one APNs signing key: an ES256 JWT (`kid`, `iss`, numeric `iat`)
/// shared by every connection that uses the key. Apple accepts a token for an hour and wants
/// it renewed no more than once every 20 minutes, so it is renewed after `refreshAfter`
/// (50 minutes by default), and at once when APNs answers `ExpiredProviderToken`.
public actor APNsTokenManager {
    public let keyId: String
    public let teamId: String
    private let privateKey: Data
    private let refreshAfter: TimeInterval
    private let now: @Sendable () -> Date
    private var current: (token: String, issuedAt: Date)?

    public init(
        keyId: String, teamId: String, privateKeyPEM: String, refreshAfter: TimeInterval = 50 * 60, now: @escaping @Sendable () -> Date = { Date() }
    ) throws {
        privateKey = try P256.Signing.PrivateKey(pemRepresentation: privateKeyPEM).rawRepresentation
        self.keyId = keyId
        self.teamId = teamId
        self.refreshAfter = min(max(refreshAfter, 20 * 60), 55 * 60)
        self.now = now
    }

    /// The token to send now.
    public func token() throws -> String {
        let time = now()
        if let current, time.timeIntervalSince(current.issuedAt) < refreshAfter { return current.token }
        let token = try Self.sign(keyId: keyId, teamId: teamId, key: privateKey, issuedAt: time)
        current = (token, time)
        return token
    }

    /// APNs refused `token` as expired. Only that token is dropped: when several connections
    /// report it, one renewal serves them all.
    public func expired(_ token: String) {
        if current?.token == token { current = nil }
    }

    static func sign(keyId: String, teamId: String, key: Data, issuedAt: Date) throws -> String {
        let header = Base64URL.encode(try JSONSerialization.data(withJSONObject: ["alg": "ES256", "kid": keyId], options: .sortedKeys))
        let claims = Base64URL.encode(
            try JSONSerialization.data(withJSONObject: ["iss": teamId, "iat": Int(issuedAt.timeIntervalSince1970)], options: .sortedKeys))
        let signature = try P256.Signing.PrivateKey(rawRepresentation: key).signature(for: Data("\(header).\(claims)".utf8))
        return "\(header).\(claims).\(Base64URL.encode(signature.rawRepresentation))"
    }
}
