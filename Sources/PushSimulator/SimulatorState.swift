import Crypto
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import HTTPTypes
import Hummingbird
import NIOCore
import PushModel
import PushProviders
import Synchronization
import _CryptoExtras
import PushConfiguration

/// The simulator's credentials, counters, recorded deliveries and faults, and the handlers.
final class SimulatorState: Sendable {
    struct APNsKey: Sendable {
        var teamId: String
        var publicKey: Data
        var bundleIds: Set<String>
    }

    struct Counts: Sendable {
        var requests = 0
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
        var fcmAccessTokens: [String: Set<String>] = [:]
        var wnsAccessTokens: Set<String> = []
    }

    let apnsKeys: [String: APNsKey]
    /// Service-account email → (RSA public key DER, projects).
    let fcmClients: [String: (publicKey: Data, projects: Set<String>)]
    let wnsClients: [String: String]
    let vapidKeys: Set<String>
    let deliveriesPerHandle: Int
    let recordedHandles: Int
    private let mutable: Mutex<Mutable>

    init(hubs: HubsConfiguration, faults: SimulatorFaults, deliveriesPerHandle: Int, recordedHandles: Int) throws {
        var apnsKeys: [String: APNsKey] = [:]
        var fcmClients: [String: (publicKey: Data, projects: Set<String>)] = [:]
        var wnsClients: [String: String] = [:]
        var vapidKeys: Set<String> = []
        for hub in hubs.hubs {
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
        self.deliveriesPerHandle = deliveriesPerHandle
        self.recordedHandles = recordedHandles
        mutable = Mutex(Mutable(faults: faults))
    }

    func setFaults(_ faults: SimulatorFaults) { mutable.withLock { $0.faults = faults } }

    /// Forgets every FCM and WNS access token issued: the next sends get 401.
    func revokeAccessTokens() {
        mutable.withLock {
            $0.fcmAccessTokens.removeAll()
            $0.wnsAccessTokens.removeAll()
        }
    }

    var faults: SimulatorFaults { mutable.withLock { $0.faults } }

    // MARK: APNs

    /// An APNs answer, whatever carried the request: status, headers, JSON body.
    struct APNsAnswer: Sendable {
        var status: Int
        var headers: [(String, String)] = []
        var body: String?
    }

    /// APNs: `POST /3/device/{token}`; `header` reads a request header by lower-case name.
    func apns(token: String, header: (String) -> String?, payload: Data, faults: SimulatorFaults) -> APNsAnswer {
        let answer: APNsAnswer = {
            guard let authorization = header("authorization"), authorization.lowercased().hasPrefix("bearer ") else {
                return apnsError(403, "MissingProviderToken", faults)
            }
            let jwt = String(authorization.dropFirst(7))
            guard let verified = verifyProviderToken(jwt) else { return apnsError(403, "InvalidProviderToken", faults) }
            let now = Int(Date().timeIntervalSince1970)
            if now - verified.issuedAt > 3600 || verified.issuedAt < (faults.expireProviderTokensBefore ?? .min) {
                return apnsError(403, "ExpiredProviderToken", faults)
            }
            guard let topic = header("apns-topic") else { return apnsError(400, "MissingTopic", faults) }
            guard verified.bundleIds.contains(where: { topic == $0 || topic.hasPrefix($0 + ".") }) else { return apnsError(400, "TopicDisallowed", faults) }
            if let type = header("apns-push-type"),
                !["alert", "background", "location", "voip", "complication", "fileprovider", "mdm", "liveactivity", "pushtotalk"].contains(type)
            {
                return apnsError(400, "InvalidPushType", faults)
            }
            if let priority = header("apns-priority"), !["1", "5", "10"].contains(priority) { return apnsError(400, "BadPriority", faults) }
            if let collapse = header("apns-collapse-id"), collapse.utf8.count > 64 { return apnsError(400, "BadCollapseId", faults) }
            guard token.count >= 8, token.count <= 200, token.allSatisfy(\.isHexDigit) else { return apnsError(400, "BadDeviceToken", faults) }
            guard !payload.isEmpty else { return apnsError(400, "PayloadEmpty", faults) }
            guard payload.count <= 4096 else { return apnsError(413, "PayloadTooLarge", faults) }
            guard (try? JSONSerialization.jsonObject(with: payload)) is [String: Any] else { return apnsError(400, "BadPayload", faults) }
            if faults.isDead(token) { return apnsError(410, "Unregistered", faults, timestamp: true) }
            if let injected = injected(faults, throttle: { apnsError(429, "TooManyRequests", faults) }, error: { apnsError(503, "ServiceUnavailable", faults) }) {
                return injected
            }
            record(.apns, handle: token, payload: String(decoding: payload, as: UTF8.self), header: header, names: [
                "apns-topic", "apns-push-type", "apns-priority", "apns-expiration", "apns-collapse-id", "apns-id",
            ])
            return APNsAnswer(status: 200, headers: [("apns-id", header("apns-id") ?? UUID().uuidString)])
        }()
        count(.apns, answer.status)
        return answer
    }

    func verifyProviderToken(_ jwt: String) -> (issuedAt: Int, bundleIds: Set<String>)? {
        if let known = mutable.withLock({ $0.verifiedProviderTokens[jwt] }) { return known }
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, let header = Self.jsonObject(parts[0]), let claims = Self.jsonObject(parts[1]),
            header["alg"] as? String == "ES256", let kid = header["kid"] as? String, let key = apnsKeys[kid],
            claims["iss"] as? String == key.teamId, let issuedAt = claims["iat"] as? Int,
            let signature = Base64URL.decode(parts[2]), let ecdsa = try? P256.Signing.ECDSASignature(rawRepresentation: signature),
            let publicKey = try? P256.Signing.PublicKey(rawRepresentation: key.publicKey),
            publicKey.isValidSignature(ecdsa, for: Data("\(parts[0]).\(parts[1])".utf8))
        else { return nil }
        let verified = (issuedAt: issuedAt, bundleIds: key.bundleIds)
        mutable.withLock {
            if $0.verifiedProviderTokens.count > 10_000 { $0.verifiedProviderTokens.removeAll() }
            $0.verifiedProviderTokens[jwt] = verified
        }
        return verified
    }

    func apnsError(_ status: Int, _ reason: String, _ faults: SimulatorFaults, timestamp: Bool = false) -> APNsAnswer {
        var body = #"{"reason":"\#(reason)""#
        if timestamp { body += #","timestamp":\#(Int(Date().timeIntervalSince1970 * 1000))"# }
        var headers = [("content-type", "application/json")]
        if status == 429 || status == 503 { headers.append(("retry-after", String(faults.retryAfterSeconds))) }
        return APNsAnswer(status: status, headers: headers, body: body + "}")
    }

    // MARK: FCM and Google's token endpoint

    func googleToken(_ request: Request) async throws -> Response {
        let form = Self.form(try await request.body.collect(upTo: 64 * 1024))
        mutable.withLock { $0.tokenRequests["fcm", default: 0] += 1 }
        guard form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer", let assertion = form["assertion"] else {
            return Self.json(400, #"{"error":"unsupported_grant_type"}"#)
        }
        let parts = assertion.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, let header = Self.jsonObject(parts[0]), let claims = Self.jsonObject(parts[1]),
            header["alg"] as? String == "RS256", let email = claims["iss"] as? String, let client = fcmClients[email],
            claims["scope"] as? String == FCMAccessTokens.scope, let expiry = claims["exp"] as? Int, expiry > Int(Date().timeIntervalSince1970),
            let signature = Base64URL.decode(parts[2]), let key = try? _RSA.Signing.PublicKey(derRepresentation: client.publicKey),
            key.isValidSignature(_RSA.Signing.RSASignature(rawRepresentation: signature), for: Data("\(parts[0]).\(parts[1])".utf8), padding: .insecurePKCS1v1_5)
        else {
            return Self.json(400, #"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#)
        }
        let token = "ya29.sim-" + UUID().uuidString
        mutable.withLock { $0.fcmAccessTokens[token] = client.projects }
        return Self.json(200, #"{"access_token":"\#(token)","expires_in":3599,"token_type":"Bearer"}"#)
    }

    func fcm(_ request: Request, project: String) async throws -> Response {
        let faults = await prelude()
        let body = try await request.body.collect(upTo: 1 << 20)
        let answer: Response = {
            let bearer = request.headers[.authorization].flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil }
            guard let bearer, let projects = mutable.withLock({ $0.fcmAccessTokens[bearer] }) else {
                return fcmError(401, "UNAUTHENTICATED", nil, "Request had invalid authentication credentials.")
            }
            guard projects.contains(project) else { return fcmError(403, "PERMISSION_DENIED", "SENDER_ID_MISMATCH", "SenderId mismatch") }
            guard let object = try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any],
                let message = object["message"] as? [String: Any], let token = message["token"] as? String, !token.isEmpty
            else {
                return fcmError(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "The message is missing or has no token.")
            }
            if let data = message["data"] as? [String: Any], data.values.contains(where: { !($0 is String) }) {
                return fcmError(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "Invalid value at 'message.data': values must be strings.")
            }
            guard body.readableBytes <= 4096 + 512 else { return fcmError(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "Message is too big") }
            if faults.isDead(token) { return fcmError(404, "NOT_FOUND", "UNREGISTERED", "Requested entity was not found.") }
            if let injected = injected(
                faults, throttle: { self.fcmError(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", "Quota exceeded.") },
                error: { self.fcmError(503, "UNAVAILABLE", "UNAVAILABLE", "The service is currently unavailable.") })
            {
                return injected
            }
            record(.fcm, handle: token, payload: String(buffer: body), headers: request.headers, names: [])
            return Self.json(200, #"{"name":"projects/\#(project)/messages/\#(UUID().uuidString)"}"#)
        }()
        return count(.fcm, answer)
    }

    func fcmError(_ status: Int, _ statusText: String, _ errorCode: String?, _ message: String) -> Response {
        let details = errorCode.map { #","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#($0)"}]"# } ?? ""
        var response = Self.json(status, #"{"error":{"code":\#(status),"message":"\#(message)","status":"\#(statusText)"\#(details)}}"#)
        if status == 429 || status == 503 { response.headers[HTTPField.Name("Retry-After")!] = String(faults.retryAfterSeconds) }
        return response
    }

    // MARK: WNS

    func wnsToken(_ request: Request) async throws -> Response {
        let form = Self.form(try await request.body.collect(upTo: 64 * 1024))
        mutable.withLock { $0.tokenRequests["wns", default: 0] += 1 }
        guard form["grant_type"] == "client_credentials", form["scope"] == "notify.windows.com" else {
            return Self.json(400, #"{"error":"invalid_request"}"#)
        }
        guard let sid = form["client_id"], let secret = wnsClients[sid], secret == form["client_secret"] else {
            return Self.json(400, #"{"error":"invalid_client"}"#)
        }
        let token = "EgAcAQMAAAAALYAAY/c+Huwi3Fv4Ck10UrKNmtxRO6Njk2MgA=sim-" + UUID().uuidString
        mutable.withLock { _ = $0.wnsAccessTokens.insert(token) }
        return Self.json(200, #"{"token_type":"bearer","access_token":"\#(token)","expires_in":86400}"#)
    }

    func wns(_ request: Request, channel: String) async throws -> Response {
        let faults = await prelude()
        let body = try await request.body.collect(upTo: 1 << 20)
        let answer: Response = {
            let bearer = request.headers[.authorization].flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil }
            guard let bearer, mutable.withLock({ $0.wnsAccessTokens.contains(bearer) }) else { return wnsError(401, "Token expired or invalid") }
            guard let type = request.headers[HTTPField.Name("X-WNS-Type")!], let expected = WNSResponse.contentType(forType: type) else {
                return wnsError(400, "X-WNS-Type missing or invalid")
            }
            guard request.headers[.contentType]?.lowercased().hasPrefix(expected) == true else { return wnsError(400, "Content-Type must be \(expected)") }
            guard body.readableBytes <= 5000 else { return wnsError(413, "Payload exceeds 5000 bytes") }
            if expected == "text/xml", !WellFormedXML.check(Data(body.readableBytesView)) { return wnsError(400, "Invalid XML payload") }
            if faults.isDead(channel) { return wnsError(410, "Channel expired") }
            if let injected = injected(faults, throttle: { self.wnsError(406, "Throttle limit exceeded") }, error: { self.wnsError(503, "Service unavailable") }) {
                return injected
            }
            record(.wns, handle: "wns/channel/\(channel)", payload: String(buffer: body), headers: request.headers, names: [
                "X-WNS-Type", "X-WNS-TTL", "X-WNS-Tag", "X-WNS-Cache-Policy", "Content-Type",
            ])
            var headers = HTTPFields()
            headers[HTTPField.Name("X-WNS-Status")!] = "received"
            headers[HTTPField.Name("X-WNS-Msg-ID")!] = String(UUID().uuidString.prefix(16))
            return Response(status: .ok, headers: headers)
        }()
        return count(.wns, answer)
    }

    func wnsError(_ status: Int, _ description: String) -> Response {
        var headers = HTTPFields()
        headers[HTTPField.Name("X-WNS-Error-Description")!] = description
        if status == 406 || status == 503 { headers[HTTPField.Name("Retry-After")!] = String(faults.retryAfterSeconds) }
        return Response(status: .init(code: status), headers: headers)
    }

    // MARK: Web Push

    func webPush(_ request: Request, subscription id: String) async throws -> Response {
        let faults = await prelude()
        let body = try await request.body.collect(upTo: 1 << 20)
        let answer: Response = {
            guard let authorization = request.headers[.authorization], let origin = request.head.authority.map({ "http://\($0)" }),
                verifyVAPID(authorization, audience: origin)
            else { return Self.text(401, "VAPID: missing or invalid authorization") }
            guard let ttl = request.headers[HTTPField.Name("TTL")!], Int(ttl) != nil else { return Self.text(400, "TTL header missing") }
            guard request.headers[HTTPField.Name("Content-Encoding")!] == "aes128gcm" else { return Self.text(415, "Content-Encoding must be aes128gcm") }
            guard body.readableBytes <= 4096 else { return Self.text(413, "Payload too large") }
            if faults.isDead(id) { return Self.text(410, "push subscription has unsubscribed or expired") }
            let subscription = SimulatedSubscription(id: id)
            let plaintext: Data
            do throws(WebPushEncryption.Failure) {
                plaintext = try WebPushEncryption.decrypt(Data(body.readableBytesView), userAgentKey: subscription.agreementKey, auth: subscription.auth)
            } catch {
                return Self.text(400, "decryption failed: \(error.message)")
            }
            if let injected = injected(
                faults, throttle: { Self.withRetryAfter(Self.text(429, "Too Many Requests"), faults.retryAfterSeconds) },
                error: { Self.withRetryAfter(Self.text(503, "Service Unavailable"), faults.retryAfterSeconds) })
            {
                return injected
            }
            record(.webpush, handle: "webpush/\(id)", payload: String(decoding: plaintext, as: UTF8.self), headers: request.headers, names: ["TTL", "Urgency", "Topic"])
            var headers = HTTPFields()
            headers[.location] = "/message/\(UUID().uuidString)"
            return Response(status: .created, headers: headers)
        }()
        return count(.webpush, answer)
    }

    func verifyVAPID(_ authorization: String, audience: String) -> Bool {
        guard authorization.hasPrefix("vapid ") else { return false }
        var fields: [String: String] = [:]
        for part in authorization.dropFirst(6).split(separator: ",") {
            let pair = part.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1).map(String.init)
            if pair.count == 2 { fields[pair[0]] = pair[1] }
        }
        guard let jwt = fields["t"], let key = fields["k"], vapidKeys.isEmpty || vapidKeys.contains(key) else { return false }
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        let now = Int(Date().timeIntervalSince1970)
        guard parts.count == 3, let claims = Self.jsonObject(parts[1]), claims["aud"] as? String == audience,
            let expiry = claims["exp"] as? Int, expiry > now, expiry <= now + 86400, claims["sub"] is String,
            let publicBytes = Base64URL.decode(key), let publicKey = try? P256.Signing.PublicKey(x963Representation: publicBytes),
            let signature = Base64URL.decode(parts[2]), let ecdsa = try? P256.Signing.ECDSASignature(rawRepresentation: signature)
        else { return false }
        return publicKey.isValidSignature(ecdsa, for: Data("\(parts[0]).\(parts[1])".utf8))
    }

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

    func count(_ platform: Platform, _ response: Response) -> Response {
        count(platform, response.status.code)
        return response
    }

    func count(_ platform: Platform, _ status: Int) {
        mutable.withLock {
            $0.counts[platform, default: Counts()].requests += 1
            $0.counts[platform, default: Counts()].statuses[status, default: 0] += 1
        }
    }

    /// Whether deliveries are kept for `GET /sim/deliveries`.
    var recording: Bool { recordedHandles > 0 }

    func record(_ platform: Platform, handle: String, payload: String, headers: HTTPFields, names: [String]) {
        record(platform, handle: handle, payload: payload, header: { headers[HTTPField.Name($0)!] }, names: names)
    }

    /// Keeps a delivery and the headers named in `names` for `GET /sim/deliveries`.
    func record(_ platform: Platform, handle: String, payload: String, header: (String) -> String?, names: [String]) {
        guard recording else { return }
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
            object[platform.rawValue] = [
                "requests": count.requests, "delivered": count.statuses.filter { (200..<300).contains($0.key) }.values.reduce(0, +),
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
            ["platform": delivery.platform.rawValue, "handle": delivery.handle, "payload": delivery.payload, "headers": delivery.headers,
             "receivedAt": RFC3339.format(delivery.receivedAt)]
        }
        return String(decoding: try! JSONSerialization.data(withJSONObject: array, options: [.sortedKeys, .withoutEscapingSlashes]), as: UTF8.self)
    }

    static func json(_ status: Int, _ body: String) -> Response {
        Response(status: .init(code: status), headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: body)))
    }

    static func text(_ status: Int, _ body: String) -> Response {
        Response(status: .init(code: status), headers: [.contentType: "text/plain"], body: .init(byteBuffer: ByteBuffer(string: body)))
    }

    static func withRetryAfter(_ response: Response, _ seconds: Int) -> Response {
        var response = response
        response.headers[HTTPField.Name("Retry-After")!] = String(seconds)
        return response
    }

    static func jsonObject(_ base64url: String) -> [String: Any]? {
        Base64URL.decode(base64url).flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] }
    }

    static func form(_ buffer: ByteBuffer) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in String(buffer: buffer).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "" }
            if parts.count == 2 { fields[parts[0]] = parts[1] }
        }
        return fields
    }
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

    func parser(_ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String] = [:]) {
        if depth == 0 { roots += 1 }
        depth += 1
    }

    func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?) {
        depth -= 1
    }
}
