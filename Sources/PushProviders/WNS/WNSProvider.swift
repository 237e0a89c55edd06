import Foundation
import PushConfiguration
import PushModel

/// WNS: `POST` to the channel URI with an access token from the client-credentials flow.
public final class WNSProvider: PushProvider {
    public let platform = Platform.wns
    public static let maximumPayload = 5000
    /// Headers of the send that WNS reads, passed through as they are.
    static let passedHeaders = [
        "X-WNS-Cache-Policy", "X-WNS-Tag", "X-WNS-Group", "X-WNS-Match", "X-WNS-SuppressPopup", "X-WNS-RequestForStatus", "X-WNS-PRIORITY",
    ]

    private let hubs: [String: CachedAccessToken]
    /// Each hub's allowed endpoints, by lowercased name; hubs not named get the default.
    private let endpoints: [String: EndpointPolicy]
    private let http: PNSHTTPClient

    public init(
        hubs: [String: WNSCredentials], endpoints: [String: EndpointPolicy] = [:], http: PNSHTTPClient,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.endpoints = Dictionary(endpoints.map { ($0.key.lowercased(), $0.value) }) { first, _ in first }
        self.hubs = Dictionary(
            uniqueKeysWithValues: hubs.map { hub, credentials in
                (
                    hub.lowercased(),
                    CachedAccessToken(now: now) {
                        let response = try await http.postForm(
                            credentials.resolvedTokenURI,
                            [
                                ("grant_type", "client_credentials"), ("client_id", credentials.packageSid), ("client_secret", credentials.secret),
                                ("scope", "notify.windows.com"),
                            ])
                        return try OAuthTokenAnswer.parse(response, endpoint: credentials.resolvedTokenURI)
                    }
                )
            })
        self.http = http
    }

    public func deliver(_ delivery: PNSDelivery) async -> PNSAnswer {
        guard let tokens = hubs[delivery.hub.lowercased()] else {
            return .notSent(.misconfigured("NoCredentials"), "NoCredentials: hub \(delivery.hub) has no WNS credentials")
        }
        let channel: URL
        switch (endpoints[delivery.hub.lowercased()] ?? EndpointPolicy()).url(delivery.handle, platform: .wns) {
        case .success(let url): channel = url
        case .failure(let refusal): return .notSent(.misconfigured("EndpointNotAllowed: the channel URI \(refusal.reason)"), "not sent")
        }
        let type = delivery.header("X-WNS-Type") ?? "wns/toast"
        guard let contentType = WNSResponse.contentType(forType: type) else {
            return .notSent(.payloadRejected, "X-WNS-Type \(type) is not one WNS knows")
        }
        let body = Data(delivery.body.utf8)
        guard body.count <= Self.maximumPayload else { return .notSent(.payloadRejected, "the payload is over 5000 bytes") }
        var headers = [("X-WNS-Type", type), ("content-type", contentType)]
        for name in Self.passedHeaders { if let value = delivery.header(name) { headers.append((name, value)) } }
        if let ttl = delivery.header("X-WNS-TTL") {
            headers.append(("X-WNS-TTL", ttl))
        } else if let expiresAt = delivery.expiresAt {
            headers.append(("X-WNS-TTL", String(max(1, Int(expiresAt.timeIntervalSinceNow)))))
        }
        // One new access token and resend after a 401.
        for attempt in 0..<2 {
            let accessToken: String
            do { accessToken = try await tokens.token() } catch { return PNSAnswer(.retry(retryAfter: nil), reason: "OAuth: \(error)") }
            let response: PNSHTTPClient.Response
            do {
                response = try await http.send(
                    .POST, channel.absoluteString, headers: headers + [("authorization", "Bearer \(accessToken)")], body: body)
            } catch {
                return PNSAnswer(.retry(retryAfter: nil), reason: "transport: \(error)")
            }
            if response.status == 401, attempt == 0 {
                await tokens.invalidate()
                continue
            }
            let description = response.headers.first(name: "X-WNS-Error-Description")
            let classification = WNSResponse.classify(
                status: response.status, description: description, retryAfter: RetryAfter.parse(response.headers.first(name: "retry-after")))
            let reason = response.status == 200 ? nil : description ?? response.headers.first(name: "X-WNS-Status") ?? "HTTP \(response.status)"
            return PNSAnswer(classification == .renewToken ? .misconfigured("Unauthorized") : classification, status: response.status, reason: reason)
        }
        return PNSAnswer(.misconfigured("Unauthorized"), status: 401, reason: "Unauthorized")
    }
}
