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
    private struct Shape {
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

        /// Whether `delivery` has this shape: compared in place, not copied into a shape of its
        /// own (a copy a push was four retains and releases more).
        func fits(_ delivery: PNSDelivery) -> Bool {
            hub == delivery.hub && notificationId == delivery.notificationId && body == delivery.body && headers == delivery.headers
                && expiresAt == delivery.expiresAt && collapseVariant == delivery.collapseVariant
        }
    }

    /// A shape's requests as built: the headers with the provider token, the payload, and where
    /// they go.
    private struct Built {
        var fields: PNSHeaderFields
        var payload: Data
        var origin: String
        var tokens: APNsTokenManager
        var jwt: String
    }

    /// Builds every request (the headers once per shape, the provider token once per hub), sends
    /// them together, and classifies the answers.
    public func deliverAll(_ deliveries: [PNSDelivery]) async -> [PNSAnswer] {
        var answers = [PNSAnswer?](repeating: nil, count: deliveries.count)
        var requests: [PNSRequest] = []
        // Each request's delivery, and the shape it was built from (in `shapes`).
        var sent: [(index: Int, shape: Int)] = []
        var shapes: [Built] = []
        requests.reserveCapacity(deliveries.count)
        sent.reserveCapacity(deliveries.count)
        var jwts: [String: String] = [:]
        var last: (shape: Shape, built: Result<Int, NotSent>)?
        for (index, delivery) in deliveries.enumerated() {
            if let refused = APNsRequest.checkToken(delivery.handle) {
                answers[index] = APNsRequest.notSent(refused)
                continue
            }
            if last?.shape.fits(delivery) != true {
                let built = await build(delivery, jwts: &jwts).map { built in
                    shapes.append(built)
                    return shapes.count - 1
                }
                last = (Shape(delivery), built)
            }
            switch last!.built {
            case .failure(let notSent):
                answers[index] = notSent.answer
            case .success(let shape):
                requests.append(
                    APNsRequest.request(
                        to: delivery.handle, origin: shapes[shape].origin, headers: shapes[shape].fields, payload: shapes[shape].payload))
                sent.append((index, shape))
            }
        }
        let exchanges = await transport.sendAll(requests)
        var renewed: Set<String> = []
        for (exchange, request) in zip(exchanges, sent) {
            switch exchange.result {
            case .success(let response) where response.status == 200:
                // Nearly every answer: nothing in it to read.
                answers[request.index] = PNSAnswer(.delivered, status: 200, latency: exchange.latency)
            case .success(let response):
                let reason = (response.json?["reason"] as? String).map(APNsReason.init)
                let classification = APNsResponse.classify(status: response.status, reason: reason, retryAfter: response.retryAfter)
                // The token is renewed here, once per token; resending is the worker's.
                let built = shapes[request.shape]
                if classification == .renewToken, renewed.insert(built.jwt).inserted { await built.tokens.expired(built.jwt) }
                answers[request.index] = PNSAnswer(classification, status: response.status, reason: reason?.description, latency: exchange.latency)
            case .failure(let error):
                answers[request.index] = .transportFailed(error)
            }
        }
        return answers.map { $0! }
    }

    /// The headers with the hub's provider token, and the payload, for pushes shaped like
    /// `delivery`; or why none of them is sent.
    private func build(_ delivery: PNSDelivery, jwts: inout [String: String]) async -> Result<Built, NotSent> {
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
        return .success(Built(fields: fields, payload: payload, origin: credentials.resolvedEndpoint, tokens: tokens, jwt: jwt))
    }
}
