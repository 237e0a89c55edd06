import Foundation
import PushConfiguration
import PushModel

/// WNS: `POST` to the channel URI with an access token from the client-credentials flow.
public final class WNSProvider: PushProvider {
    public let platform = Platform.wns
    public static let maximumPayload = WNSRequest.maximumPayload

    private let hubs: [String: CachedAccessToken]
    /// Each hub's allowed endpoints, by lowercased name; hubs not named get the default.
    private let endpoints: [String: EndpointPolicy]
    private let transport: any PNSTransport

    public init(
        hubs: [String: WNSCredentials], endpoints: [String: EndpointPolicy] = [:], transport: any PNSTransport,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.endpoints = Dictionary(endpoints.map { ($0.key.lowercased(), $0.value) }) { first, _ in first }
        self.hubs = Dictionary(
            uniqueKeysWithValues: hubs.map { hub, credentials in
                (
                    hub.lowercased(),
                    CachedAccessToken(now: now) {
                        try await OAuthTokenAnswer.fetch(
                            credentials.resolvedTokenURI,
                            [
                                ("grant_type", "client_credentials"), ("client_id", credentials.packageSid), ("client_secret", credentials.secret),
                                ("scope", "notify.windows.com"),
                            ], through: transport)
                    }
                )
            })
        self.transport = transport
    }

    public func deliver(_ delivery: PNSDelivery) async -> PNSAnswer {
        guard let tokens = hubs[delivery.hub.lowercased()] else {
            return .notSent(.noCredentials(hub: delivery.hub, platform: .wns))
        }
        let channel: URL
        switch (endpoints[delivery.hub.lowercased()] ?? EndpointPolicy()).url(delivery.handle, platform: .wns) {
        case .success(let url): channel = url
        case .failure(let refusal): return .notSent(.endpointNotAllowed("the channel URI \(refusal.reason)"))
        }
        var request: PNSRequest
        switch WNSRequest.make(delivery, channel: channel) {
        case .success(let made): request = made
        case .failure(let notSent): return notSent.answer
        }
        let accessToken: String
        do { accessToken = try await tokens.token() } catch { return PNSAnswer(.retry(retryAfter: nil), reason: "OAuth: \(error)") }
        request.headers.add("authorization", "Bearer \(accessToken)")
        let response: PNSResponse
        do { response = try await transport.send(request) } catch { return .transportFailed(error) }
        let description = response.headers.first(name: "X-WNS-Error-Description")
        let classification = WNSResponse.classify(status: response.status, description: description, retryAfter: response.retryAfter)
        // The token is dropped here; resending is the worker's (one place for every provider).
        if classification == .renewToken { await tokens.invalidate() }
        let reason = response.status == 200 ? nil : description ?? response.headers.first(name: "X-WNS-Status") ?? "HTTP \(response.status)"
        return PNSAnswer(classification, status: response.status, reason: reason)
    }
}
