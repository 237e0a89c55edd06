import Foundation
import PushConfiguration
import PushModel

/// RFC 8030 Web Push: the payload encrypted for the subscription (RFC 8291), VAPID (RFC 8292).
public final class WebPushProvider: PushProvider {
    public let platform = Platform.webpush

    private let hubs: [String: VAPID]
    /// Each hub's allowed endpoints, by lowercased name; hubs not named get the default.
    private let endpoints: [String: EndpointPolicy]
    private let resolver: HostResolver
    private let vapidHeaders = VAPIDHeaders()
    private let transport: any PNSTransport

    public init(
        hubs: [String: VAPID], endpoints: [String: EndpointPolicy] = [:], resolver: HostResolver = HostResolver(), transport: any PNSTransport
    ) {
        self.hubs = Dictionary(uniqueKeysWithValues: hubs.map { ($0.key.lowercased(), $0.value) })
        self.endpoints = Dictionary(endpoints.map { ($0.key.lowercased(), $0.value) }) { first, _ in first }
        self.resolver = resolver
        self.transport = transport
    }

    /// From each hub's `webPush` credentials in `pushhub.yaml`; a private key that is not
    /// base64url P-256 is an error naming the hub, never a hub left out.
    public convenience init(
        credentials: [String: WebPushCredentials], endpoints: [String: EndpointPolicy] = [:], resolver: HostResolver = HostResolver(),
        transport: any PNSTransport
    ) throws {
        var keys: [String: VAPID] = [:]
        for (hub, webPush) in credentials {
            guard let privateKey = Base64URL.decode(webPush.privateKey) else {
                throw VAPIDKeyError(description: "hub \(hub): webPush.privateKey is not base64url")
            }
            keys[hub] = try VAPID(subject: webPush.subject, privateKey: privateKey)
        }
        self.init(hubs: keys, endpoints: endpoints, resolver: resolver, transport: transport)
    }

    public struct VAPIDKeyError: Error, CustomStringConvertible {
        public var description: String
    }

    /// The endpoint's URL once its host is known to lead to an address the hub allows.
    enum Endpoint {
        case allowed(URL)
        case refused(PNSAnswer)
    }

    func allowedEndpoint(_ delivery: PNSDelivery, hub: String) async -> Endpoint {
        let policy = endpoints[hub] ?? EndpointPolicy()
        let url: URL
        switch policy.url(delivery.handle, platform: .webpush) {
        case .success(let allowed): url = allowed
        case .failure(let refusal): return .refused(.notSent(.endpointNotAllowed("the endpoint \(refusal.reason)")))
        }
        let (host, port) = url.hostAndPort ?? ("", 443)
        let addresses: [String]
        do { addresses = try await resolver.addresses(of: host) } catch {
            return .refused(.transportFailed(error))
        }
        if let refusal = policy.allowsResolved(addresses, host: host, port: port) {
            return .refused(.notSent(.endpointNotAllowed("the endpoint \(refusal.reason)")))
        }
        // The connection goes to these addresses, the ones just checked.
        transport.pin(host: host, port: port, addresses: addresses)
        return .allowed(url)
    }

    public func deliver(_ delivery: PNSDelivery) async -> PNSAnswer {
        await deliverAll([delivery])[0]
    }

    /// Checks each endpoint, encrypts each payload for its subscription, signs once per hub and
    /// push-service origin, sends the requests together, and classifies the answers.
    public func deliverAll(_ deliveries: [PNSDelivery]) async -> [PNSAnswer] {
        var answers = [PNSAnswer?](repeating: nil, count: deliveries.count)
        var requests: [PNSRequest] = []
        var sent: [Int] = []
        var hubNames = HubNames()
        // A stopping worker's pushes not yet encrypted are not sent (a batch of 500 takes
        // seconds to encrypt in a debug build).
        let stop = SendingStop.current
        for (index, delivery) in deliveries.enumerated() {
            if let stop, stop.isStopped {
                answers[index] = .stopped
                continue
            }
            switch await request(for: delivery, hub: hubNames.key(delivery.hub)) {
            case .success(let request):
                requests.append(request)
                sent.append(index)
            case .failure(let notSent): answers[index] = notSent.answer
            }
        }
        let exchanges = await transport.sendAll(requests)
        for (exchange, index) in zip(exchanges, sent) {
            answers[index] = await .reading(exchange) { response in
                let classification = Self.classify(status: response.status, retryAfter: response.retryAfter)
                let reason = (200..<300).contains(response.status) ? nil : String(decoding: response.body.prefix(200), as: UTF8.self)
                return PNSAnswer(classification, status: response.status, reason: reason)
            }
        }
        return answers.map { $0! }
    }

    /// The signed, encrypted request for one push, or why it is not sent.
    private func request(for delivery: PNSDelivery, hub: String) async -> Result<PNSRequest, NotSent> {
        guard let vapid = hubs[hub] else { return .failure(NotSent(.notSent(.noCredentials(hub: delivery.hub, platform: .webpush)))) }
        let endpoint: URL
        switch await allowedEndpoint(delivery, hub: hub) {
        case .allowed(let url): endpoint = url
        case .refused(let answer): return .failure(NotSent(answer))
        }
        var request: PNSRequest
        switch WebPushRequest.make(delivery, endpoint: endpoint) {
        case .success(let made): request = made
        case .failure(let notSent): return .failure(notSent)
        }
        do { request.headers.add("authorization", try vapidHeaders.authorization(vapid, hub: hub, endpoint: endpoint)) } catch {
            return .failure(NotSent(.notSent(.vapid("\(error)"))))
        }
        return .success(request)
    }

    /// RFC 8030 answers.
    public static func classify(status: Int, retryAfter: Duration? = nil) -> PNSClassification {
        switch status {
        case 200, 201, 202: .delivered
        case 404, 410: .invalidHandle
        case 400, 413: .payloadRejected
        case 401, 403: .misconfigured(.refusedByPNS("VAPID refused (\(status))"))
        case 429: .throttled(retryAfter: retryAfter)
        case 500...599: .retry(retryAfter: retryAfter)
        default: .unknown(String(status))
        }
    }
}

/// `Urgency` (RFC 8030): how soon the user agent should be woken for a push.
public enum WebPushUrgency: String, Sendable, CaseIterable {
    case veryLow = "very-low"
    case low, normal, high
}

/// Web Push requests built from a delivery, without a network: the payload encrypted for the
/// subscription (RFC 8291) and RFC 8030's headers.
public enum WebPushRequest {
    /// How long a push service keeps a message when the send has no expiry (4 weeks).
    public static let defaultTTL = 2_419_200
    /// RFC 8030's limit on `Topic`.
    public static let maximumTopic = 32

    /// The request for `delivery` to `endpoint`, without its VAPID authorization, or why it is not sent.
    public static func make(_ delivery: PNSDelivery, endpoint: URL, now: Date = Date()) -> Result<PNSRequest, NotSent> {
        guard let keys = delivery.webPush, let p256dh = Base64URL.decode(keys.p256dh), let auth = Base64URL.decode(keys.auth) else {
            return .failure(NotSent(.invalidHandle, "the subscription's keys are not base64url"))
        }
        let body: Data
        do { body = try WebPushEncryption.encrypt(Data(delivery.body.utf8), p256dh: p256dh, auth: auth) } catch {
            return .failure(NotSent(error.message.contains("record") ? .payloadRejected : .invalidHandle, error.message))
        }
        let ttl = delivery.header("TTL") ?? delivery.expiresAt.map { String(max(0, Int($0.timeIntervalSince(now)))) } ?? String(defaultTTL)
        guard Int(ttl) != nil else { return .failure(NotSent(.payloadRejected, "TTL: not a number of seconds")) }
        var headers: PNSHeaderFields = [("content-encoding", "aes128gcm"), ("content-type", "application/octet-stream"), ("ttl", ttl)]
        if let text = delivery.header("Urgency") {
            guard let urgency = WebPushUrgency(rawValue: text) else {
                return .failure(NotSent(.payloadRejected, "Urgency: \(text) is not an RFC 8030 urgency"))
            }
            headers.add("urgency", urgency.rawValue)
        }
        let topic = delivery.header("Topic") ?? CollapseKey.webPushTopic(delivery)
        guard topic.count <= maximumTopic, Base64URL.decode(topic) != nil else {
            return .failure(NotSent(.payloadRejected, "Topic: at most 32 base64url characters"))
        }
        headers.add("topic", topic)
        var request = PNSRequest(.url(endpoint.absoluteString), headers: headers, body: body)
        request.pinned = true
        return .success(request)
    }
}
