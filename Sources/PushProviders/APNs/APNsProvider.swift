import Foundation
import PushConfiguration
import PushModel

/// APNs over HTTP/2: `POST /3/device/{token}` with a provider token shared by every hub and
/// connection that uses the same key.
public final class APNsProvider: PushProvider {
    public let platform = Platform.apns
    /// The largest payload of an alert push (VoIP pushes may be larger: `APNsPushType.maximumPayload`).
    public static let maximumPayload = 4096

    private let hubs: [String: (credentials: APNsCredentials, tokens: APNsTokenManager)]
    private let transport: any PNSTransport

    /// `hubs` by name. `now` is the provider tokens' clock.
    public init(hubs: [String: APNsCredentials], transport: any PNSTransport, now: @escaping @Sendable () -> Date = { Date() }) throws {
        var managers: [String: APNsTokenManager] = [:]
        var entries: [String: (APNsCredentials, APNsTokenManager)] = [:]
        for (hub, credentials) in hubs {
            let key = "\(credentials.teamId)/\(credentials.keyId)"
            let manager =
                try managers[key]
                ?? APNsTokenManager(keyId: credentials.keyId, teamId: credentials.teamId, privateKeyPEM: credentials.privateKey, now: now)
            managers[key] = manager
            entries[hub.lowercased()] = (credentials, manager)
        }
        self.hubs = entries.mapValues { (credentials: $0.0, tokens: $0.1) }
        self.transport = transport
    }

    public func deliver(_ delivery: PNSDelivery) async -> PNSAnswer {
        guard let (credentials, tokens) = hubs[delivery.hub.lowercased()] else {
            return .notSent(.noCredentials(hub: delivery.hub, platform: .apns))
        }
        var request: PNSRequest
        switch APNsRequest.make(delivery, bundleId: credentials.bundleId, origin: credentials.resolvedEndpoint) {
        case .success(let made): request = made
        case .failure(let reason): return APNsRequest.notSent(reason)
        }
        let jwt: String
        do { jwt = try await tokens.token() } catch { return .notSent(.invalidProviderKey) }
        request.headers.add("authorization", "bearer \(jwt)")
        let response: PNSResponse
        do { response = try await transport.send(request) } catch { return .transportFailed(error) }
        let reason = response.status == 200 ? nil : (response.json?["reason"] as? String).map(APNsReason.init)
        let classification = APNsResponse.classify(status: response.status, reason: reason, retryAfter: response.retryAfter)
        // The token is renewed here; resending is the worker's, which retries `renewToken` at
        // once within its retry budget (one place, so one target cannot cost two budgets).
        if classification == .renewToken { await tokens.expired(jwt) }
        return PNSAnswer(classification, status: response.status, reason: reason?.description)
    }
}
