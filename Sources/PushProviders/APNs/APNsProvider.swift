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
        await deliverAll([delivery])[0]
    }

    /// What pushes of one shape share, so a native batch builds its headers once.
    private struct Shape: Equatable {
        var hub: String
        var notificationId: String
        var body: String
        var headers: [String: String]
        var expiresAt: Date?
        var collapseVariant: String?

        init(_ delivery: PNSDelivery) {
            hub = delivery.hub
            notificationId = delivery.notificationId
            body = delivery.body
            headers = delivery.headers
            expiresAt = delivery.expiresAt
            collapseVariant = delivery.collapseVariant
        }
    }

    /// Builds every request (the headers once per shape, the provider token once per hub), sends
    /// them together, and classifies the answers.
    public func deliverAll(_ deliveries: [PNSDelivery]) async -> [PNSAnswer] {
        var answers = [PNSAnswer?](repeating: nil, count: deliveries.count)
        var requests: [PNSRequest] = []
        var sent: [(index: Int, tokens: APNsTokenManager, jwt: String)] = []
        requests.reserveCapacity(deliveries.count)
        sent.reserveCapacity(deliveries.count)
        var jwts: [String: String] = [:]
        var last: (shape: Shape, built: Result<(PNSHeaderFields, Data, String), NotSent>)?
        var hubNames = HubNames()
        for (index, delivery) in deliveries.enumerated() {
            if let refused = APNsRequest.checkToken(delivery.handle) {
                answers[index] = APNsRequest.notSent(refused)
                continue
            }
            let shape = Shape(delivery)
            if last?.shape != shape {
                last = (shape, await build(delivery, jwts: &jwts))
            }
            switch last!.built {
            case .failure(let notSent):
                answers[index] = notSent.answer
            case .success(let (fields, payload, jwt)):
                let (credentials, tokens) = hubs[hubNames.key(delivery.hub)]!
                requests.append(APNsRequest.request(to: delivery.handle, origin: credentials.resolvedEndpoint, headers: fields, payload: payload))
                sent.append((index, tokens, jwt))
            }
        }
        let exchanges = await transport.sendAll(requests)
        var renewed: Set<String> = []
        for (exchange, request) in zip(exchanges, sent) {
            answers[request.index] = await .reading(exchange) { response in
                let reason = response.status == 200 ? nil : (response.json?["reason"] as? String).map(APNsReason.init)
                let classification = APNsResponse.classify(status: response.status, reason: reason, retryAfter: response.retryAfter)
                // The token is renewed here, once per token; resending is the worker's.
                if classification == .renewToken, renewed.insert(request.jwt).inserted { await request.tokens.expired(request.jwt) }
                return PNSAnswer(classification, status: response.status, reason: reason?.description)
            }
        }
        return answers.map { $0! }
    }

    /// The headers with the hub's provider token, and the payload, for pushes shaped like
    /// `delivery`; or why none of them is sent.
    private func build(_ delivery: PNSDelivery, jwts: inout [String: String]) async -> Result<(PNSHeaderFields, Data, String), NotSent> {
        let hub = delivery.hub.lowercased()
        guard let (credentials, tokens) = hubs[hub] else {
            return .failure(NotSent(.notSent(.noCredentials(hub: delivery.hub, platform: .apns))))
        }
        let headers: APNsHeaders
        let payload: Data
        switch APNsRequest.shared(delivery, bundleId: credentials.bundleId) {
        case .success(let shared): (headers, payload) = shared
        case .failure(let reason): return .failure(NotSent(APNsRequest.notSent(reason)))
        }
        let jwt: String
        if let known = jwts[hub] {
            jwt = known
        } else {
            do { jwt = try await tokens.token() } catch { return .failure(NotSent(.notSent(.invalidProviderKey))) }
            jwts[hub] = jwt
        }
        var fields = headers.fields
        fields.add("authorization", "bearer \(jwt)")
        return .success((fields, payload, jwt))
    }
}
