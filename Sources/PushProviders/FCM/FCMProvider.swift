import Foundation
import PushConfiguration
import PushModel

/// FCM HTTP v1: `POST /v1/projects/{project}/messages:send` with an OAuth access token from
/// the service account; one rate limit per project. A batch's message is parsed and serialized
/// once, and each device's token spliced in.
public struct FCMService: PerDeviceService {
    public static let platform = Platform.fcm
    /// FCM's limit on a message.
    public static let maximumPayload = 4096

    /// A hub's project: where it sends, its access tokens, and the project's rate limit (shared
    /// by the hubs of one project).
    public struct Credentials: Sendable {
        var url: String
        var tokens: FCMAccessTokens
        var limiter: RateLimiter
    }

    public typealias Shared = SplicedJSON

    public init() {}

    public func accessTokens(_ credentials: Credentials, transport: any PNSTransport, now: @escaping @Sendable () -> Date) -> CachedAccessToken? {
        credentials.tokens.cache
    }

    public func shared(_ delivery: PNSDelivery, credentials: Credentials) -> Result<Shared, NotSent> {
        FCMMessage.template(body: delivery.body, format: delivery.format).mapError { NotSent(.payloadRejected, "INVALID_ARGUMENT: \($0.message)") }
    }

    public func address(of handle: String, credentials: Credentials) -> Result<String, NotSent> {
        handle.isEmpty ? .failure(NotSent(.invalidHandle, "UNREGISTERED")) : .success(handle)
    }

    public func request(_ shared: Shared, to token: String, credentials: Credentials) -> Result<PNSRequest, NotSent> {
        FCMMessage.make(token, from: shared, url: credentials.url).mapError { NotSent(.payloadRejected, "INVALID_ARGUMENT: \($0.message)") }
    }

    public func admit(_ credentials: Credentials) async { await credentials.limiter.acquire() }

    public func classify(_ response: PNSResponse) -> PNSAnswer {
        let code = response.status == 200 ? nil : FCMMessage.errorCode(response)
        let classification = FCMMessage.classify(status: response.status, errorCode: code, retryAfter: response.retryAfter)
        return PNSAnswer(classification, status: response.status, reason: code?.description ?? (response.status == 401 ? "UNAUTHENTICATED" : nil))
    }
}

/// FCM's provider.
public typealias FCMProvider = PerDeviceProvider<FCMService>

extension PerDeviceProvider where Service == FCMService {
    /// Each hub's service account; hubs of one project share its rate limit.
    public convenience init(hubs: [String: FCMCredentials], transport: any PNSTransport, now: @escaping @Sendable () -> Date = { Date() }) throws {
        var limiters: [String: RateLimiter] = [:]
        var projects: [String: FCMService.Credentials] = [:]
        for (hub, credentials) in hubs {
            let tokens = try FCMAccessTokens(
                clientEmail: credentials.clientEmail, privateKeyPEM: credentials.privateKey, tokenURI: credentials.tokenURI,
                exchange: { assertion, tokenURI in
                    try await OAuthTokenAnswer.fetch(
                        tokenURI, [("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"), ("assertion", assertion)], through: transport)
                }, now: now)
            let limiter = limiters[credentials.projectId] ?? RateLimiter(perMinute: credentials.resolvedRatePerMinute)
            limiters[credentials.projectId] = limiter
            projects[hub] = FCMService.Credentials(
                url: "\(credentials.resolvedEndpoint)/v1/projects/\(credentials.projectId)/messages:send", tokens: tokens, limiter: limiter)
        }
        self.init(FCMService(), hubs: projects, transport: transport, now: now)
    }
}
