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
    private let http: PNSHTTPClient

    public init(hubs: [String: FCMCredentials], http: PNSHTTPClient, now: @escaping @Sendable () -> Date = { Date() }) throws {
        var limiters: [String: RateLimiter] = [:]
        var projects: [String: Project] = [:]
        for (hub, credentials) in hubs {
            let tokens = try FCMAccessTokens(
                clientEmail: credentials.clientEmail, privateKeyPEM: credentials.privateKey, tokenURI: credentials.tokenURI,
                exchange: { assertion, tokenURI in
                    let response = try await http.postForm(
                        tokenURI,
                        [
                            ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"), ("assertion", assertion),
                        ])
                    return try OAuthTokenAnswer.parse(response, endpoint: tokenURI)
                }, now: now)
            let limiter = limiters[credentials.projectId] ?? RateLimiter(perMinute: credentials.resolvedRatePerMinute)
            limiters[credentials.projectId] = limiter
            projects[hub.lowercased()] = Project(
                url: "\(credentials.resolvedEndpoint)/v1/projects/\(credentials.projectId)/messages:send", tokens: tokens, limiter: limiter)
        }
        self.hubs = projects
        self.http = http
    }

    public func deliver(_ delivery: PNSDelivery) async -> PNSAnswer {
        guard let project = hubs[delivery.hub.lowercased()] else {
            return .notSent(.misconfigured("NoCredentials"), "NoCredentials: hub \(delivery.hub) has no FCM credentials")
        }
        guard !delivery.handle.isEmpty else { return .notSent(.invalidHandle, "UNREGISTERED") }
        let body: Data
        do {
            body = try FCMMessage.request(body: delivery.body, format: delivery.format == .gcm ? "gcm" : "fcmv1", token: delivery.handle)
        } catch {
            return .notSent(.payloadRejected, "INVALID_ARGUMENT: \(error.message)")
        }
        guard body.count <= Self.maximumPayload + 512 else { return .notSent(.payloadRejected, "INVALID_ARGUMENT: message too big") }
        await project.limiter.acquire()
        // One new access token and resend when FCM says the token is no longer valid.
        for attempt in 0..<2 {
            let accessToken: String
            do { accessToken = try await project.tokens.token() } catch {
                return PNSAnswer(.retry(retryAfter: nil), reason: "OAuth: \(error)")
            }
            let response: PNSHTTPClient.Response
            do {
                response = try await http.send(
                    .POST, project.url, headers: [("authorization", "Bearer \(accessToken)"), ("content-type", "application/json")], body: body)
            } catch {
                return PNSAnswer(.retry(retryAfter: nil), reason: "transport: \(error)")
            }
            if response.status == 401, attempt == 0 {
                await project.tokens.invalidate()
                continue
            }
            let code = response.status == 200 ? nil : Self.errorCode(response)
            let classification = FCMMessage.classify(
                status: response.status, errorCode: code, retryAfter: RetryAfter.parse(response.headers.first(name: "retry-after")))
            return PNSAnswer(classification, status: response.status, reason: code)
        }
        return PNSAnswer(.misconfigured("UNAUTHENTICATED"), status: 401, reason: "UNAUTHENTICATED")
    }

    /// `FcmError.errorCode` from the details, else the error's `status`.
    static func errorCode(_ response: PNSHTTPClient.Response) -> String? {
        guard let error = response.json?["error"] as? [String: Any] else { return nil }
        for detail in (error["details"] as? [[String: Any]]) ?? [] {
            if let code = detail["errorCode"] as? String { return code }
        }
        return error["status"] as? String
    }
}
