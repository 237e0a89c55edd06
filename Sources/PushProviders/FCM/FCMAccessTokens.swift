import Crypto
import Foundation
import PushModel
import _CryptoExtras

/// OAuth 2.0 access tokens for FCM HTTP v1 from a Google service account: an RS256 JWT
/// assertion is exchanged at the token endpoint (the exchange is injected; the HTTP client lives
/// with the worker), and the access token is cached by `CachedAccessToken`.
public struct FCMAccessTokens: Sendable {
    public typealias Exchange = @Sendable (_ assertion: String, _ tokenURI: String) async throws -> (accessToken: String, expiresIn: TimeInterval)

    public static let scope = "https://www.googleapis.com/auth/firebase.messaging"
    public static let defaultTokenURI = "https://oauth2.googleapis.com/token"

    private let clientEmail: String
    private let privateKeyDER: Data
    private let tokenURI: String
    let cache: CachedAccessToken

    public init(
        clientEmail: String, privateKeyPEM: String, tokenURI: String?, exchange: @escaping Exchange, now: @escaping @Sendable () -> Date = { Date() }
    ) throws {
        let privateKeyDER = try _RSA.Signing.PrivateKey(pemRepresentation: privateKeyPEM).derRepresentation
        let tokenURI = tokenURI ?? Self.defaultTokenURI
        self.clientEmail = clientEmail
        self.privateKeyDER = privateKeyDER
        self.tokenURI = tokenURI
        cache = CachedAccessToken(now: now) {
            let assertion = try Self.assertion(clientEmail: clientEmail, privateKeyDER: privateKeyDER, tokenURI: tokenURI, at: now())
            return try await exchange(assertion, tokenURI)
        }
    }

    /// A valid access token; concurrent callers share one exchange.
    public func token() async throws -> String { try await cache.token() }

    /// FCM refused the token (401): the next call fetches a new one.
    public func invalidate() async { await cache.invalidate() }

    /// The RS256 JWT Google's token endpoint takes (`grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`).
    public func makeAssertion(at time: Date) throws -> String {
        try Self.assertion(clientEmail: clientEmail, privateKeyDER: privateKeyDER, tokenURI: tokenURI, at: time)
    }

    static func assertion(clientEmail: String, privateKeyDER: Data, tokenURI: String, at time: Date) throws -> String {
        let header = Base64URL.encode(try JSONSerialization.data(withJSONObject: ["alg": "RS256", "typ": "JWT"], options: .sortedKeys))
        let issued = Int(time.timeIntervalSince1970)
        let claims: [String: Any] = ["iss": clientEmail, "scope": Self.scope, "aud": tokenURI, "iat": issued, "exp": issued + 3600]
        let payload = Base64URL.encode(try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys, .withoutEscapingSlashes]))
        let key = try _RSA.Signing.PrivateKey(derRepresentation: privateKeyDER)
        let signature = try key.signature(for: Data("\(header).\(payload)".utf8), padding: .insecurePKCS1v1_5)
        return "\(header).\(payload).\(Base64URL.encode(signature.rawRepresentation))"
    }
}
