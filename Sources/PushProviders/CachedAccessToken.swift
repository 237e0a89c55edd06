import Foundation

/// An OAuth access token kept until shortly before it expires: one fetch shared by concurrent
/// callers, renewal inside the last `margin`, `invalidate` after the PNS refused it (401).
/// FCM fetches with a signed service-account assertion, WNS with client credentials.
public actor CachedAccessToken {
    public typealias Fetch = @Sendable () async throws -> (accessToken: String, expiresIn: TimeInterval)

    /// Renew this long before expiry, so no request leaves with a token about to lapse.
    public static let margin: TimeInterval = 5 * 60

    private let fetch: Fetch
    private let now: @Sendable () -> Date
    private var cached: (token: String, expiresAt: Date)?
    private var pending: Task<(token: String, expiresAt: Date), any Error>?

    public init(now: @escaping @Sendable () -> Date = { Date() }, fetch: @escaping Fetch) {
        self.fetch = fetch
        self.now = now
    }

    /// A valid access token.
    public func token() async throws -> String {
        if let cached, cached.expiresAt.timeIntervalSince(now()) > Self.margin { return cached.token }
        if let pending { return try await pending.value.token }
        let (fetch, now) = (self.fetch, self.now)
        let task = Task { () throws -> (token: String, expiresAt: Date) in
            let issued = now()
            let answer = try await fetch()
            return (answer.accessToken, issued.addingTimeInterval(answer.expiresIn))
        }
        pending = task
        defer { pending = nil }
        let fresh = try await task.value
        cached = fresh
        return fresh.token
    }

    /// The PNS refused the token: the next call fetches a new one.
    public func invalidate() {
        cached = nil
    }

    /// Tokens from an OAuth 2.0 client-credentials grant at `tokenURI` (WNS, Huawei, ADM).
    static func clientCredentials(
        tokenURI: String, clientId: String, secret: String, scope: String?, transport: any PNSTransport, now: @escaping @Sendable () -> Date
    ) -> CachedAccessToken {
        CachedAccessToken(now: now) {
            var fields = [("grant_type", "client_credentials"), ("client_id", clientId), ("client_secret", secret)]
            if let scope { fields.append(("scope", scope)) }
            return try await OAuthTokenAnswer.fetch(tokenURI, fields, through: transport)
        }
    }
}
