import Foundation
import PushConfiguration
import PushModel

/// FCM HTTP v1: `POST /v1/projects/{project}/messages:send` with an OAuth access token from
/// the service account; one rate limit per project.
public final class FCMProvider: PushProvider {
    public let platform = Platform.fcm
    /// FCM's limit on a message.
    public static let maximumPayload = 4096

    struct Project: Sendable {
        var url: String
        var tokens: FCMAccessTokens
        var limiter: RateLimiter
    }

    private let hubs: [String: Project]
    private let transport: any PNSTransport

    public init(hubs: [String: FCMCredentials], transport: any PNSTransport, now: @escaping @Sendable () -> Date = { Date() }) throws {
        var limiters: [String: RateLimiter] = [:]
        var projects: [String: Project] = [:]
        for (hub, credentials) in hubs {
            let tokens = try FCMAccessTokens(
                clientEmail: credentials.clientEmail, privateKeyPEM: credentials.privateKey, tokenURI: credentials.tokenURI,
                exchange: { assertion, tokenURI in
                    try await OAuthTokenAnswer.fetch(
                        tokenURI, [("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"), ("assertion", assertion)], through: transport)
                }, now: now)
            let limiter = limiters[credentials.projectId] ?? RateLimiter(perMinute: credentials.resolvedRatePerMinute)
            limiters[credentials.projectId] = limiter
            projects[hub.lowercased()] = Project(
                url: "\(credentials.resolvedEndpoint)/v1/projects/\(credentials.projectId)/messages:send", tokens: tokens, limiter: limiter)
        }
        self.hubs = projects
        self.transport = transport
    }

    public func deliver(_ delivery: PNSDelivery) async -> PNSAnswer {
        guard let project = hubs[delivery.hub.lowercased()] else {
            return .notSent(.noCredentials(hub: delivery.hub, platform: .fcm))
        }
        guard !delivery.handle.isEmpty else { return .notSent(.invalidHandle, "UNREGISTERED") }
        var request: PNSRequest
        switch FCMMessage.make(delivery, url: project.url) {
        case .success(let made): request = made
        case .failure(let failure): return .notSent(.payloadRejected, "INVALID_ARGUMENT: \(failure.message)")
        }
        await project.limiter.acquire()
        let accessToken: String
        do { accessToken = try await project.tokens.token() } catch { return PNSAnswer(.retry(retryAfter: nil), reason: "OAuth: \(error)") }
        request.headers.add("authorization", "Bearer \(accessToken)")
        let response: PNSResponse
        do { response = try await transport.send(request) } catch { return .transportFailed(error) }
        let code = response.status == 200 ? nil : FCMMessage.errorCode(response)
        let classification = FCMMessage.classify(status: response.status, errorCode: code, retryAfter: response.retryAfter)
        // The token is dropped here; resending is the worker's (one place for every provider).
        if classification == .renewToken { await project.tokens.invalidate() }
        return PNSAnswer(classification, status: response.status, reason: code?.description ?? (response.status == 401 ? "UNAUTHENTICATED" : nil))
    }
}
