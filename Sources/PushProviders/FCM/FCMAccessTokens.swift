import Crypto
import Foundation
import PushModel
import _CryptoExtras

/// OAuth 2.0 access tokens for FCM HTTP v1 from a Google service account: an RS256 JWT
/// assertion is exchanged at the token endpoint, and the access token is reused until shortly
/// before it expires. The exchange itself is injected (the HTTP client lives with the worker).
public actor FCMAccessTokens {
    public typealias Exchange = @Sendable (_ assertion: String, _ tokenURI: String) async throws -> (accessToken: String, expiresIn: TimeInterval)

    public static let scope = "https://www.googleapis.com/auth/firebase.messaging"
    public static let defaultTokenURI = "https://oauth2.googleapis.com/token"
    /// Renew this long before expiry, so no request leaves with a token about to lapse.
    public static let margin: TimeInterval = 5 * 60

    private let clientEmail: String
    private let privateKeyDER: Data
    private let tokenURI: String
    private let exchange: Exchange
    private let now: @Sendable () -> Date
    private var cached: (token: String, expiresAt: Date)?
    private var pending: Task<(token: String, expiresAt: Date), any Error>?

    public init(clientEmail: String, privateKeyPEM: String, tokenURI: String?, exchange: @escaping Exchange, now: @escaping @Sendable () -> Date = { Date() }) throws {
        privateKeyDER = try _RSA.Signing.PrivateKey(pemRepresentation: privateKeyPEM).derRepresentation
        self.clientEmail = clientEmail
        self.tokenURI = tokenURI ?? Self.defaultTokenURI
        self.exchange = exchange
        self.now = now
    }

    /// A valid access token; concurrent callers share one exchange.
    public func token() async throws -> String {
        if let cached, cached.expiresAt.timeIntervalSince(now()) > Self.margin { return cached.token }
        if let pending { return try await pending.value.token }
        let assertion = try makeAssertion(at: now())
        let (exchange, tokenURI, now) = (self.exchange, self.tokenURI, self.now)
        let task = Task { () throws -> (token: String, expiresAt: Date) in
            let issued = now()
            let answer = try await exchange(assertion, tokenURI)
            return (answer.accessToken, issued.addingTimeInterval(answer.expiresIn))
        }
        pending = task
        defer { pending = nil }
        let fresh = try await task.value
        cached = fresh
        return fresh.token
    }

    /// FCM refused the token (401): the next call fetches a new one.
    public func invalidate() {
        cached = nil
    }

    /// The RS256 JWT Google's token endpoint takes (`grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`).
    public func makeAssertion(at time: Date) throws -> String {
        let header = Base64URL.encode(try JSONSerialization.data(withJSONObject: ["alg": "RS256", "typ": "JWT"], options: .sortedKeys))
        let issued = Int(time.timeIntervalSince1970)
        let claims: [String: Any] = ["iss": clientEmail, "scope": Self.scope, "aud": tokenURI, "iat": issued, "exp": issued + 3600]
        let payload = Base64URL.encode(try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys, .withoutEscapingSlashes]))
        let key = try _RSA.Signing.PrivateKey(derRepresentation: privateKeyDER)
        let signature = try key.signature(for: Data("\(header).\(payload)".utf8), padding: .insecurePKCS1v1_5)
        return "\(header).\(payload).\(Base64URL.encode(signature.rawRepresentation))"
    }
}
