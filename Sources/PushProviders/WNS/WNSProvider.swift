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
        await deliverAll([delivery])[0]
    }

    /// Builds every request (the access token fetched once per hub), sends them together, and
    /// classifies the answers.
    public func deliverAll(_ deliveries: [PNSDelivery]) async -> [PNSAnswer] {
        var answers = [PNSAnswer?](repeating: nil, count: deliveries.count)
        var requests: [PNSRequest] = []
        var sent: [(index: Int, hub: String, tokens: CachedAccessToken)] = []
        var accessTokens: [String: Result<String, any Error>] = [:]
        var hubNames = HubNames()
        var last: (body: String, headers: [String: String], expiresAt: Date?, built: Result<PNSRequest, NotSent>)?
        for (index, delivery) in deliveries.enumerated() {
            let hub = hubNames.key(delivery.hub)
            guard let tokens = hubs[hub] else {
                answers[index] = .notSent(.noCredentials(hub: delivery.hub, platform: .wns))
                continue
            }
            let channel: URL
            switch (endpoints[hub] ?? EndpointPolicy()).url(delivery.handle, platform: .wns) {
            case .success(let url): channel = url
            case .failure(let refusal):
                answers[index] = .notSent(.endpointNotAllowed("the channel URI \(refusal.reason)"))
                continue
            }
            // A batch's pushes share body and headers: the request is built once per run of
            // equal ones, and only its channel changes.
            if last == nil || last!.body != delivery.body || last!.expiresAt != delivery.expiresAt || last!.headers != delivery.headers {
                last = (delivery.body, delivery.headers, delivery.expiresAt, WNSRequest.make(delivery, channel: channel))
            }
            var request: PNSRequest
            switch last!.built {
            case .success(let made):
                request = made
                request.target = .url(channel.absoluteString)
            case .failure(let notSent):
                answers[index] = notSent.answer
                continue
            }
            if accessTokens[hub] == nil {
                do { accessTokens[hub] = .success(try await tokens.token()) } catch { accessTokens[hub] = .failure(error) }
            }
            switch accessTokens[hub]! {
            case .success(let accessToken): request.headers.add("authorization", "Bearer \(accessToken)")
            case .failure(let error):
                answers[index] = PNSAnswer(.retry(retryAfter: nil), reason: "OAuth: \(error)")
                continue
            }
            requests.append(request)
            sent.append((index, hub, tokens))
        }
        let exchanges = await transport.sendAll(requests)
        var dropped: Set<String> = []
        for (exchange, request) in zip(exchanges, sent) {
            answers[request.index] = await .reading(exchange) { response in
                let description = response.headers.first(name: "X-WNS-Error-Description")
                let classification = WNSResponse.classify(status: response.status, description: description, retryAfter: response.retryAfter)
                // The token is dropped here, once per hub; resending is the worker's (one place for every provider).
                if classification == .renewToken, dropped.insert(request.hub).inserted { await request.tokens.invalidate() }
                let reason =
                    response.status == 200 ? nil : description ?? response.headers.first(name: "X-WNS-Status") ?? "HTTP \(response.status)"
                return PNSAnswer(classification, status: response.status, reason: reason)
            }
        }
        return answers.map { $0! }
    }
}
