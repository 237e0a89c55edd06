import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import PushConfiguration
import PushModel
import PushProviders
import Synchronization
import _CryptoExtras

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// The simulator's credentials, counters, recorded deliveries and faults, and the handlers.
final class SimulatorState: Sendable {
    struct APNsKey: Sendable {
        var teamId: String
        var publicKey: Data
        var bundleIds: Set<String>
    }

    struct Counts: Sendable {
        var requests = 0
        /// Of them, those that came over HTTP/2.
        var http2 = 0
        var statuses: [Int: Int] = [:]
    }

    struct Delivery: Sendable {
        var platform: Platform
        var handle: String
        var payload: String
        var headers: [String: String]
        var receivedAt: Date
    }

    struct Mutable: Sendable {
        var faults: SimulatorFaults
        var counts: [Platform: Counts] = [:]
        var tokenRequests: [String: Int] = [:]
        var deliveries: [String: [Delivery]] = [:]
        /// Provider tokens already verified: their `iat` and the key's bundle ids.
        var verifiedProviderTokens: [String: (issuedAt: Int, bundleIds: Set<String>)] = [:]
        /// VAPID headers already verified, by audience and header: their token's expiry.
        var verifiedVAPID: [String: Int] = [:]
        /// Payloads found to be JSON objects lately (a broadcast repeats one).
        var validPayloads: Set<Data> = []
        /// WNS XML payloads found well-formed lately.
        var wellFormedXML: Set<Data> = []
        /// FCM messages found valid lately, without their token (`fcmMessageToken`).
        var validFCMMessages: Set<Data> = []
        var fcmAccessTokens: [String: Set<String>] = [:]
        var wnsAccessTokens: Set<String> = []
        /// Huawei access token → the app id it was issued for.
        var hmsAccessTokens: [String: String] = [:]
        var admAccessTokens: Set<String> = []
    }

    let apnsKeys: [String: APNsKey]
    /// Service-account email → (RSA public key DER, projects).
    let fcmClients: [String: (publicKey: Data, projects: Set<String>)]
    let wnsClients: [String: String]
    let vapidKeys: Set<String>
    /// Huawei OAuth client id → (secret, app id).
    let hmsClients: [String: (secret: String, appId: String)]
    /// ADM client id → secret.
    let admClients: [String: String]
    /// Xiaomi app secret → package names.
    let xiaomiApps: [String: Set<String>]
    /// Baidu API key → secret key.
    let baiduApps: [String: String]
    let deliveriesPerHandle: Int
    let recordedHandles: Int
    let mutable: Mutex<Mutable>
    /// Numbers the answers' message ids (`uniqueID`).
    private let answered = Atomic<Int>(0)
    /// This process's start of every message id.
    private let idPrefix = String(UUID().uuidString.prefix(24))

    init(hubs: HubsConfiguration, faults: SimulatorFaults, deliveriesPerHandle: Int, recordedHandles: Int) throws {
        var apnsKeys: [String: APNsKey] = [:]
        var fcmClients: [String: (publicKey: Data, projects: Set<String>)] = [:]
        var wnsClients: [String: String] = [:]
        var vapidKeys: Set<String> = []
        var hmsClients: [String: (secret: String, appId: String)] = [:]
        var admClients: [String: String] = [:]
        var xiaomiApps: [String: Set<String>] = [:]
        var baiduApps: [String: String] = [:]
        for hub in hubs.hubs {
            if let hms = hub.credentials.hms { hmsClients[hms.resolvedClientId] = (hms.clientSecret, hms.appId) }
            if let adm = hub.credentials.adm { admClients[adm.clientId] = adm.clientSecret }
            if let xiaomi = hub.credentials.xiaomi { xiaomiApps[xiaomi.appSecret, default: []].insert(xiaomi.packageName) }
            if let baidu = hub.credentials.baidu { baiduApps[baidu.apiKey] = baidu.secretKey }
            if let apns = hub.credentials.apns {
                let key = try P256.Signing.PrivateKey(pemRepresentation: apns.privateKey).publicKey.rawRepresentation
                apnsKeys[apns.keyId, default: APNsKey(teamId: apns.teamId, publicKey: key, bundleIds: [])].bundleIds.insert(apns.bundleId)
            }
            if let fcm = hub.credentials.fcm {
                let key = try _RSA.Signing.PrivateKey(pemRepresentation: fcm.privateKey).publicKey.derRepresentation
                fcmClients[fcm.clientEmail, default: (key, [])].projects.insert(fcm.projectId)
            }
            if let wns = hub.credentials.wns { wnsClients[wns.packageSid] = wns.secret }
            if let webPush = hub.credentials.webPush { vapidKeys.insert(webPush.publicKey) }
        }
        self.apnsKeys = apnsKeys
        self.fcmClients = fcmClients
        self.wnsClients = wnsClients
        self.vapidKeys = vapidKeys
        self.hmsClients = hmsClients
        self.admClients = admClients
        self.xiaomiApps = xiaomiApps
        self.baiduApps = baiduApps
        self.deliveriesPerHandle = deliveriesPerHandle
        self.recordedHandles = recordedHandles
        mutable = Mutex(Mutable(faults: faults))
    }

    func setFaults(_ faults: SimulatorFaults) { mutable.withLock { $0.faults = faults } }

    /// A message id unique to this process, shaped as a UUID: a prefix drawn once and a
    /// counter (a random UUID per answer cost the simulator more than the rest of an answer).
    func uniqueID() -> String {
        let number = String(answered.add(1, ordering: .relaxed).newValue & 0xFFFF_FFFF_FFFF, radix: 16, uppercase: true)
        return idPrefix + String(repeating: "0", count: 12 - number.count) + number
    }

    /// Forgets every access token issued (FCM, WNS, Huawei, ADM): the next sends get 401.
    func revokeAccessTokens() {
        mutable.withLock {
            $0.fcmAccessTokens.removeAll()
            $0.wnsAccessTokens.removeAll()
            $0.hmsAccessTokens.removeAll()
            $0.admAccessTokens.removeAll()
        }
    }

    var faults: SimulatorFaults { mutable.withLock { $0.faults } }

    // MARK: Shared

    /// The faults now, after the configured latency.
    func prelude() async -> SimulatorFaults {
        let faults = self.faults
        if faults.latencyMs > 0 { try? await Task.sleep(for: .milliseconds(faults.latencyMs)) }
        return faults
    }

    /// The throttling or server error the faults call for on this request, if any.
    func injected<Answer>(_ faults: SimulatorFaults, throttle: () -> Answer, error: () -> Answer) -> Answer? {
        if faults.throttleRate > 0, Double.random(in: 0..<1) < faults.throttleRate { return throttle() }
        if faults.errorRate > 0, Double.random(in: 0..<1) < faults.errorRate { return error() }
        return nil
    }

    /// A client-credentials token endpoint: the client's secret (and `scope`, when the service
    /// wants one) checked, a token issued and handed to `issued`.
    func clientCredentialsToken(
        _ request: SimRequest, service: String, scope: String?, secret: (String) -> String?, issued: (_ token: String, _ clientId: String) -> Void
    ) -> SimAnswer {
        let form = Self.form(request.body)
        mutable.withLock { $0.tokenRequests[service, default: 0] += 1 }
        guard form["grant_type"] == "client_credentials", scope == nil || form["scope"] == scope else {
            return Self.json(400, #"{"error":"invalid_request","error_description":"grant_type or scope"}"#)
        }
        guard let client = form["client_id"], let expected = secret(client), expected == form["client_secret"] else {
            return Self.json(400, #"{"error":"invalid_client","error_description":"The client credentials are invalid"}"#)
        }
        let token = "\(service)-sim-" + UUID().uuidString
        issued(token, client)
        return Self.json(200, #"{"access_token":"\#(token)","expires_in":3600,"token_type":"Bearer"}"#)
    }

    func bearer(_ request: SimRequest) -> String? {
        request.header("authorization").flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil }
    }

    func count(_ platform: Platform, _ answer: SimAnswer) -> SimAnswer {
        count(platform, answer.status)
        return answer
    }

    func count(_ platform: Platform, _ status: Int) {
        mutable.withLock {
            $0.counts[platform, default: Counts()].requests += 1
            $0.counts[platform, default: Counts()].statuses[status, default: 0] += 1
        }
    }

    /// Whether `document` passes `check`. A broadcast sends one document many times, so the
    /// last 64 that passed are remembered in `remembered` and not checked again.
    func passes(_ document: Data, remembered: WritableKeyPath<Mutable, Set<Data>>, _ check: (Data) -> Bool) -> Bool {
        if mutable.withLock({ $0[keyPath: remembered].contains(document) }) { return true }
        guard check(document) else { return false }
        remember(document, in: remembered)
        return true
    }

    /// Keeps `document` among the last 64 remembered in `remembered`.
    func remember(_ document: Data, in remembered: WritableKeyPath<Mutable, Set<Data>>) {
        mutable.withLock {
            if $0[keyPath: remembered].count >= 64 { $0[keyPath: remembered].removeAll() }
            $0[keyPath: remembered].insert(document)
        }
    }

    /// Whether deliveries are kept for `GET /sim/deliveries`.
    var recording: Bool { recordedHandles > 0 }

    /// Whether a delivery to `handle` would be kept for `GET /sim/deliveries`.
    func keeps(_ handle: String) -> Bool {
        recording && mutable.withLock { $0.deliveries[handle] != nil || $0.deliveries.count < recordedHandles }
    }

    /// Keeps a delivery and the headers named in `names` for `GET /sim/deliveries`.
    func record(_ platform: Platform, handle: String, payload: String, header: (String) -> String?, names: [String]) {
        // Past the handles kept, a new handle's delivery is not built at all.
        guard keeps(handle) else { return }
        var kept: [String: String] = [:]
        for name in names { if let value = header(name) { kept[name] = value } }
        let delivery = Delivery(platform: platform, handle: handle, payload: payload, headers: kept, receivedAt: Date())
        mutable.withLock {
            guard $0.deliveries[delivery.handle] != nil || $0.deliveries.count < recordedHandles else { return }
            $0.deliveries[delivery.handle, default: []].append(delivery)
            if $0.deliveries[delivery.handle]!.count > deliveriesPerHandle { $0.deliveries[delivery.handle]!.removeFirst() }
        }
    }

    func statsJSON() -> String {
        let (counts, tokens) = mutable.withLock { ($0.counts, $0.tokenRequests) }
        var object: [String: Any] = [:]
        for platform in Platform.allCases {
            let count = counts[platform] ?? Counts()
            object[platform.rawValue] =
                [
                    "requests": count.requests, "http2": count.http2,
                    "delivered": count.statuses.filter { (200..<300).contains($0.key) }.values.reduce(0, +),
                    "statuses": Dictionary(uniqueKeysWithValues: count.statuses.map { (String($0.key), $0.value) }),
                ] as [String: Any]
        }
        object["tokenRequests"] = tokens
        return String(decoding: try! JSONSerialization.data(withJSONObject: object, options: .sortedKeys), as: UTF8.self)
    }

    /// A handle is a device token, a registration token, or a channel or subscription URL.
    func deliveriesJSON(handle: String) -> String {
        var key = handle
        // Channels and subscriptions are kept under their path, so a WNS channel and a Web
        // Push subscription with the same id stay apart.
        if let url = URL(string: handle), url.scheme != nil { key = String(url.path.drop { $0 == "/" }) }
        let deliveries = mutable.withLock { $0.deliveries[key] ?? [] }
        let array = deliveries.map { delivery -> [String: Any] in
            [
                "platform": delivery.platform.rawValue, "handle": delivery.handle, "payload": delivery.payload, "headers": delivery.headers,
                "receivedAt": RFC3339.format(delivery.receivedAt),
            ]
        }
        return String(decoding: try! JSONSerialization.data(withJSONObject: array, options: [.sortedKeys, .withoutEscapingSlashes]), as: UTF8.self)
    }

    static func json(_ status: Int, _ body: String) -> SimAnswer {
        SimAnswer(status: status, headers: [("Content-Type", "application/json")], body: body)
    }

    static func text(_ status: Int, _ body: String) -> SimAnswer {
        SimAnswer(status: status, headers: [("Content-Type", "text/plain")], body: body)
    }

    static func withRetryAfter(_ answer: SimAnswer, _ seconds: Int) -> SimAnswer {
        var answer = answer
        answer.headers.append(("Retry-After", String(seconds)))
        return answer
    }

    static func jsonObject(_ base64url: String) -> [String: Any]? {
        Base64URL.decode(base64url).flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] }
    }

    static func form(_ buffer: ByteBuffer) -> [String: String] {
        guard buffer.readableBytes <= 64 * 1024 else { return [:] }
        var fields: [String: String] = [:]
        for pair in String(buffer: buffer).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map {
                String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? ""
            }
            if parts.count == 2 { fields[parts[0]] = parts[1] }
        }
        return fields
    }
}

/// A request to one of the simulated services, whichever listener carried it (HTTP/2 over
/// TLS, or plain HTTP/1.1).
struct SimRequest {
    /// A request header by name, whatever its case.
    var header: (String) -> String?
    var body: ByteBuffer
    /// `http` or `https`, and the authority the client addressed: a VAPID token's audience.
    var scheme: String
    var authority: String?

    var origin: String? { authority.map { "\(scheme)://\($0)" } }
}

/// A simulated service's answer, whichever listener carries it back. Header names are spelt as
/// the service spells them on HTTP/1.1; the HTTP/2 listener lowercases them.
struct SimAnswer: Sendable {
    var status: Int
    var headers: [(String, String)] = []
    var body: String?
}

extension SimulatorState {
    /// The services' routes, the same on both listeners; nil for a path none of them serves.
    /// The latency fault is the listener's to apply.
    func serve(method: String, path: String, _ request: SimRequest, faults: SimulatorFaults) -> SimAnswer? {
        guard method == "POST" else { return Self.json(405, #"{"reason":"MethodNotAllowed"}"#) }
        // Byte by byte (this runs for every request): the path without its query.
        let bytes = path.utf8.prefix { $0 != UInt8(ascii: "?") }
        /// The one path segment after `prefix` (and before `suffix`), if the path is that.
        func segment(after prefix: StaticString, before suffix: StaticString = "") -> String? {
            let head = UnsafeRawBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount)
            let tail = UnsafeRawBufferPointer(start: suffix.utf8Start, count: suffix.utf8CodeUnitCount)
            guard bytes.count > head.count + tail.count, bytes.starts(with: head), bytes.reversed().starts(with: tail.reversed()) else {
                return nil
            }
            let value = bytes.dropFirst(head.count).dropLast(tail.count)
            return value.contains(UInt8(ascii: "/")) ? nil : String(decoding: value, as: UTF8.self)
        }
        let platform: Platform
        let answer: SimAnswer
        if let token = segment(after: "/3/device/") {
            (platform, answer) = (.apns, apns(token: token, header: request.header, payload: Data(request.body.readableBytesView), faults: faults))
        } else if let project = segment(after: "/v1/projects/", before: "/messages:send") {
            (platform, answer) = (.fcm, fcm(request, project: project, faults: faults))
        } else if let channel = segment(after: "/wns/channel/") {
            (platform, answer) = (.wns, wns(request, channel: channel, faults: faults))
        } else if let subscription = segment(after: "/webpush/") {
            (platform, answer) = (.webpush, webPush(request, subscription: subscription, faults: faults))
        } else if let app = segment(after: "/v1/", before: "/messages:send") {
            (platform, answer) = (.hms, hms(request, appId: app, faults: faults))
        } else if let registration = segment(after: "/messaging/registrations/", before: "/messages") {
            (platform, answer) = (.adm, adm(request, registrationId: registration, faults: faults))
        } else if bytes.elementsEqual("/v3/message/regid".utf8) {
            (platform, answer) = (.xiaomi, xiaomi(request, faults: faults))
        } else if bytes.elementsEqual(Self.baiduPath.utf8) {
            (platform, answer) = (.baidu, baidu(request, path: Self.baiduPath, faults: faults))
        } else if bytes.elementsEqual("/oauth2/token".utf8) {
            return googleToken(request)
        } else if bytes.elementsEqual("/wns/token".utf8) {
            return wnsToken(request)
        } else if bytes.elementsEqual("/hms/token".utf8) {
            return hmsToken(request)
        } else if bytes.elementsEqual("/adm/token".utf8) {
            return admToken(request)
        } else {
            return nil
        }
        if request.scheme == "https" { mutable.withLock { $0.counts[platform, default: Counts()].http2 += 1 } }
        return answer
    }

    /// Whether `path` is a token endpoint's, which the latency fault leaves alone.
    static func isTokenEndpoint(_ path: String) -> Bool {
        ["/oauth2/token", "/wns/token", "/hms/token", "/adm/token"].contains { path.hasPrefix($0) }
    }

    static let baiduPath = "/rest/3.0/push/single_device"
}

/// Whether a document is well-formed XML: one root, every element closed.
final class WellFormedXML: NSObject, XMLParserDelegate {
    private var depth = 0
    private var roots = 0

    static func check(_ data: Data) -> Bool {
        let parser = XMLParser(data: data)
        let checker = WellFormedXML()
        parser.delegate = checker
        return parser.parse() && checker.depth == 0 && checker.roots == 1
    }

    func parser(
        _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String] = [:]
    ) {
        if depth == 0 { roots += 1 }
        depth += 1
    }

    func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?) {
        depth -= 1
    }
}
