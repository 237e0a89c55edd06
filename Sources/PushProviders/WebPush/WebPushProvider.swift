import Foundation
import PushConfiguration
import PushModel

/// RFC 8030 Web Push: the payload encrypted for the subscription (RFC 8291), VAPID (RFC 8292).
public final class WebPushProvider: PushProvider {
    public let platform = Platform.webpush
    /// How long a push service keeps a message when the send has no expiry (4 weeks).
    public static let defaultTTL = 2_419_200

    private let hubs: [String: VAPID]
    /// Each hub's allowed endpoints, by lowercased name; hubs not named get the default.
    private let endpoints: [String: EndpointPolicy]
    private let resolver: HostResolver
    private let http: PNSHTTPClient

    public init(hubs: [String: VAPID], endpoints: [String: EndpointPolicy] = [:], resolver: HostResolver = HostResolver(), http: PNSHTTPClient) {
        self.hubs = Dictionary(uniqueKeysWithValues: hubs.map { ($0.key.lowercased(), $0.value) })
        self.endpoints = Dictionary(endpoints.map { ($0.key.lowercased(), $0.value) }) { first, _ in first }
        self.resolver = resolver
        self.http = http
    }

    /// From each hub's `webPush` credentials in `pushhub.yaml`; a private key that is not
    /// base64url P-256 is an error naming the hub, never a hub left out.
    public convenience init(
        credentials: [String: WebPushCredentials], endpoints: [String: EndpointPolicy] = [:], resolver: HostResolver = HostResolver(),
        http: PNSHTTPClient
    ) throws {
        var keys: [String: VAPID] = [:]
        for (hub, webPush) in credentials {
            guard let privateKey = Base64URL.decode(webPush.privateKey) else {
                throw VAPIDKeyError(description: "hub \(hub): webPush.privateKey is not base64url")
            }
            keys[hub] = try VAPID(subject: webPush.subject, privateKey: privateKey)
        }
        self.init(hubs: keys, endpoints: endpoints, resolver: resolver, http: http)
    }

    public struct VAPIDKeyError: Error, CustomStringConvertible {
        public var description: String
    }

    /// The endpoint's URL once its host is known to lead to an address the hub allows.
    enum Endpoint {
        case allowed(URL)
        case refused(PNSAnswer)
    }

    func allowedEndpoint(_ delivery: PNSDelivery) async -> Endpoint {
        let policy = endpoints[delivery.hub.lowercased()] ?? EndpointPolicy()
        let url: URL
        switch policy.url(delivery.handle, platform: .webpush) {
        case .success(let allowed): url = allowed
        case .failure(let refusal): return .refused(.notSent(.misconfigured("EndpointNotAllowed: the endpoint \(refusal.reason)"), "not sent"))
        }
        let host = url.host ?? ""
        let addresses: [String]
        do { addresses = try await resolver.addresses(of: host) } catch {
            return .refused(PNSAnswer(.retry(retryAfter: nil), reason: "transport: \(error)"))
        }
        if let refusal = policy.allowsResolved(addresses, host: host, port: url.port ?? (url.scheme == "https" ? 443 : 80)) {
            return .refused(.notSent(.misconfigured("EndpointNotAllowed: the endpoint \(refusal.reason)"), "not sent"))
        }
        return .allowed(url)
    }

    public func deliver(_ delivery: PNSDelivery) async -> PNSAnswer {
        guard let vapid = hubs[delivery.hub.lowercased()] else {
            return .notSent(.misconfigured("NoCredentials"), "NoCredentials: hub \(delivery.hub) has no Web Push VAPID keys")
        }
        let endpoint: URL
        switch await allowedEndpoint(delivery) {
        case .allowed(let url): endpoint = url
        case .refused(let answer): return answer
        }
        guard let keys = delivery.webPush, let p256dh = Base64URL.decode(keys.p256dh), let auth = Base64URL.decode(keys.auth) else {
            return .notSent(.invalidHandle, "the subscription's keys are not base64url")
        }
        let body: Data
        do { body = try WebPushEncryption.encrypt(Data(delivery.body.utf8), p256dh: p256dh, auth: auth) } catch {
            return .notSent(error.message.contains("record") ? .payloadRejected : .invalidHandle, error.message)
        }
        let ttl =
            delivery.header("TTL")
            ?? delivery.expiresAt.map { String(max(0, Int($0.timeIntervalSinceNow))) } ?? String(Self.defaultTTL)
        guard Int(ttl) != nil else { return .notSent(.payloadRejected, "TTL: not a number of seconds") }
        var headers = [("content-encoding", "aes128gcm"), ("content-type", "application/octet-stream"), ("ttl", ttl)]
        if let urgency = delivery.header("Urgency") {
            guard ["very-low", "low", "normal", "high"].contains(urgency) else {
                return .notSent(.payloadRejected, "Urgency: \(urgency) is not an RFC 8030 urgency")
            }
            headers.append(("urgency", urgency))
        }
        if let topic = delivery.header("Topic") {
            guard topic.count <= 32, Base64URL.decode(topic) != nil else {
                return .notSent(.payloadRejected, "Topic: at most 32 base64url characters")
            }
            headers.append(("topic", topic))
        } else {
            headers.append(("topic", CollapseKey.webPushTopic(delivery)))
        }
        do { headers.append(("authorization", try vapid.authorization(for: endpoint))) } catch {
            return .notSent(.misconfigured("VAPID"), "VAPID: \(error)")
        }
        let response: PNSHTTPClient.Response
        do { response = try await http.send(.POST, endpoint.absoluteString, headers: headers, body: body) } catch {
            return PNSAnswer(.retry(retryAfter: nil), reason: "transport: \(error)")
        }
        let classification = Self.classify(status: response.status, retryAfter: RetryAfter.parse(response.headers.first(name: "retry-after")))
        let reason = (200..<300).contains(response.status) ? nil : String(decoding: response.body.prefix(200), as: UTF8.self)
        return PNSAnswer(classification, status: response.status, reason: reason)
    }

    /// RFC 8030 answers.
    public static func classify(status: Int, retryAfter: Duration? = nil) -> PNSClassification {
        switch status {
        case 200, 201, 202: .delivered
        case 404, 410: .invalidHandle
        case 400, 413: .payloadRejected
        case 401, 403: .misconfigured("VAPID refused (\(status))")
        case 429: .throttled(retryAfter: retryAfter)
        case 500...599: .retry(retryAfter: retryAfter)
        default: .unknown(String(status))
        }
    }
}
