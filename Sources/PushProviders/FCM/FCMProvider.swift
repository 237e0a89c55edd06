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
        await deliverAll([delivery])[0]
    }

    /// Builds every request (a batch's message parsed and serialized once, the access token
    /// fetched once per project), sends them together, and classifies the answers.
    public func deliverAll(_ deliveries: [PNSDelivery]) async -> [PNSAnswer] {
        var answers = [PNSAnswer?](repeating: nil, count: deliveries.count)
        var requests: [PNSRequest] = []
        var sent: [(index: Int, project: Project)] = []
        var accessTokens: [String: Result<String, any Error>] = [:]
        var last: (hub: String, body: String, format: NotificationFormat, template: Result<FCMMessage.BodyTemplate, FCMMessage.Failure>)?
        var hubNames = HubNames()
        for (index, delivery) in deliveries.enumerated() {
            let hub = hubNames.key(delivery.hub)
            guard let project = hubs[hub] else {
                answers[index] = .notSent(.noCredentials(hub: delivery.hub, platform: .fcm))
                continue
            }
            guard !delivery.handle.isEmpty else {
                answers[index] = .notSent(.invalidHandle, "UNREGISTERED")
                continue
            }
            if last == nil || last!.hub != hub || last!.body != delivery.body || last!.format != delivery.format {
                last = (hub, delivery.body, delivery.format, FCMMessage.template(body: delivery.body, format: delivery.format))
            }
            var request: PNSRequest
            switch last!.template.flatMap({ FCMMessage.make(delivery.handle, from: $0, url: project.url) }) {
            case .success(let made): request = made
            case .failure(let failure):
                answers[index] = .notSent(.payloadRejected, "INVALID_ARGUMENT: \(failure.message)")
                continue
            }
            if accessTokens[hub] == nil {
                do { accessTokens[hub] = .success(try await project.tokens.token()) } catch { accessTokens[hub] = .failure(error) }
            }
            switch accessTokens[hub]! {
            case .success(let accessToken): request.headers.add("authorization", "Bearer \(accessToken)")
            case .failure(let error):
                answers[index] = PNSAnswer(.retry(retryAfter: nil), reason: "OAuth: \(error)")
                continue
            }
            await project.limiter.acquire()
            requests.append(request)
            sent.append((index, project))
        }
        let exchanges = await transport.sendAll(requests)
        var dropped: Set<String> = []
        for (exchange, request) in zip(exchanges, sent) {
            answers[request.index] = await .reading(exchange) { response in
                let code = response.status == 200 ? nil : FCMMessage.errorCode(response)
                let classification = FCMMessage.classify(status: response.status, errorCode: code, retryAfter: response.retryAfter)
                // The token is dropped here, once per project; resending is the worker's.
                if classification == .renewToken, dropped.insert(request.project.url).inserted { await request.project.tokens.invalidate() }
                return PNSAnswer(
                    classification, status: response.status, reason: code?.description ?? (response.status == 401 ? "UNAUTHENTICATED" : nil))
            }
        }
        return answers.map { $0! }
    }
}
