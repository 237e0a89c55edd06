import Crypto
import Foundation
import PushConfiguration
import PushModel
import PushProviders
import Synchronization
import Testing
import _CryptoExtras

/// A transport that answers from a script and keeps every request: providers without a network.
final class ScriptedTransport: PNSTransport {
    private let state: Mutex<(requests: [PNSRequest], answers: [PNSResponse])>
    /// Answers to token-endpoint form posts, `access-1`, `access-2`, …
    private let tokens = Atomic<Int>(0)

    init(_ answers: [PNSResponse]) { state = Mutex(([], answers)) }

    var requests: [PNSRequest] { state.withLock { $0.requests } }
    /// The requests to the PNS, token requests left out.
    var pushes: [PNSRequest] { requests.filter { $0.headers.first(name: "content-type") != "application/x-www-form-urlencoded" } }

    func send(_ request: PNSRequest) async throws -> PNSResponse {
        if request.headers.first(name: "content-type") == "application/x-www-form-urlencoded" {
            state.withLock { $0.requests.append(request) }
            let number = tokens.add(1, ordering: .relaxed).newValue
            return PNSResponse(status: 200, body: Data(#"{"access_token":"access-\#(number)","expires_in":3600}"#.utf8))
        }
        return state.withLock { state in
            state.requests.append(request)
            return state.answers.isEmpty ? PNSResponse(status: 200) : state.answers.removeFirst()
        }
    }
}

@Suite("Providers' requests and answers, without a network")
struct ProviderCoreTests {
    @Test("a header is found whatever the case of its name's ASCII letters, and only by its whole name")
    func headerNames() {
        let fields: PNSHeaderFields = [("X-WNS-Status", "received"), ("retry-after", "5"), ("x-wns-msg-id", "1"), ("X-Émoji", "e")]
        #expect(fields.first(name: "x-wns-status") == "received")
        #expect(fields.first(name: "RETRY-AFTER") == "5")
        #expect(fields.first(name: "X-WNS-MSG-ID") == "1")
        // Not a prefix, not a longer name, and `[` (0x5B) is not `{` (0x7B) though they differ by 0x20.
        #expect(fields.first(name: "X-WNS-Statu") == nil)
        #expect(fields.first(name: "X-WNS-Status2") == nil)
        #expect(PNSHeaderFields([("a[", "1")]).first(name: "a{") == nil)
        #expect(fields.first(name: "X-Émoji") == "e")
    }

    static let token = String(repeating: "ab", count: 32)

    static func apns(_ transport: ScriptedTransport, clock: TestClock = TestClock()) throws -> APNsProvider {
        let credentials = APNsCredentials(
            keyId: "KEY1234567", teamId: "TEAM123456", bundleId: "com.example.app", environment: .sandbox,
            privateKey: P256.Signing.PrivateKey().pemRepresentation, endpoint: "https://apns.test:2197")
        return try APNsProvider(hubs: ["MyHub": credentials], transport: transport, now: { clock.now })
    }

    static func delivery(
        _ handle: String = token, body: String = #"{"aps":{"alert":"hi"}}"#, format: NotificationFormat = .apple, headers: [String: String] = [:]
    ) -> PNSDelivery {
        PNSDelivery(hub: "myhub", notificationId: "n-1", handle: handle, format: format, body: body, headers: headers)
    }

    @Test("APNs: typed headers on the wire, the path carries the token, the provider token is the authorization")
    func apnsRequest() async throws {
        let transport = ScriptedTransport([])
        let answer = await try Self.apns(transport).deliver(
            Self.delivery(headers: ["apns-priority": "5", "apns-id": "6F0C8D3E-51A9-4A84-9C36-2F1B7CF0E0A1"]))
        #expect(answer == PNSAnswer(.delivered, status: 200))
        let request = try #require(transport.pushes.first)
        #expect(request.target == .http2(origin: "https://apns.test:2197", path: "/3/device/\(Self.token)"))
        #expect(request.headers.first(name: "apns-push-type") == "alert" && request.headers.first(name: "apns-priority") == "5")
        #expect(request.headers.first(name: "apns-topic") == "com.example.app")
        #expect(request.headers.first(name: "apns-id") == "6F0C8D3E-51A9-4A84-9C36-2F1B7CF0E0A1")
        #expect(request.headers.first(name: "apns-collapse-id") == "n-1", "derived from the notification id")
        #expect(request.headers.first(name: "authorization")?.hasPrefix("bearer ey") == true)
    }

    @Test(
        "APNs: what APNs would refuse is never sent",
        arguments: [
            (delivery("not-hex"), PNSAnswer(.invalidHandle, reason: "BadDeviceToken")),
            (delivery(headers: ["apns-push-type": "telepathy"]), PNSAnswer(.payloadRejected, reason: "InvalidPushType")),
            (delivery(headers: ["apns-priority": "7"]), PNSAnswer(.payloadRejected, reason: "BadPriority")),
            (delivery(headers: ["apns-expiration": "soon"]), PNSAnswer(.payloadRejected, reason: "BadExpirationDate")),
            (delivery(headers: ["apns-collapse-id": String(repeating: "c", count: 65)]), PNSAnswer(.payloadRejected, reason: "BadCollapseId")),
            (delivery(headers: ["apns-id": "nope"]), PNSAnswer(.payloadRejected, reason: "BadMessageId")),
            (delivery(body: String(repeating: "x", count: 4097)), PNSAnswer(.payloadRejected, reason: "PayloadTooLarge")),
        ])
    func apnsRefusals(_ delivery: PNSDelivery, _ expected: PNSAnswer) async throws {
        let transport = ScriptedTransport([])
        #expect(await try Self.apns(transport).deliver(delivery) == expected)
        #expect(transport.pushes.isEmpty)
    }

    @Test("APNs: a VoIP push may be 5 KB, as the ingress allows; a background payload gets priority 5")
    func apnsTypes() async throws {
        let transport = ScriptedTransport([])
        let provider = try Self.apns(transport)
        let voip = Self.delivery(body: #"{"x":""# + String(repeating: "v", count: 5000) + #""}"#, headers: ["apns-push-type": "voip"])
        #expect(await provider.deliver(voip).classification == .delivered)
        #expect(await provider.deliver(Self.delivery(body: #"{"aps":{"content-available":1}}"#)).classification == .delivered)
        let sent = transport.pushes
        #expect(sent.count == 2)
        #expect(sent[0].headers.first(name: "apns-push-type") == "voip" && sent[0].body.count > 4096)
        #expect(sent[1].headers.first(name: "apns-push-type") == "background" && sent[1].headers.first(name: "apns-priority") == "5")
    }

    @Test(
        "APNs: a background push is one whose aps holds only content-available: 1, wherever the words fall in the payload",
        arguments: [
            (#"{"aps":{"content-available":1}}"#, "background"),
            (#"{"c":"content-availabl","cc":"contentavailable","aps":{"content-available":1}}"#, "background"),
            (#"{"aps":{"content-available":1,"alert":"x"}}"#, "alert"),
            (#"{"aps":{"alert":"x"},"k":"content-availabl"}"#, "alert"),
            (#"{"aps":{"alert":"x"},"content-available":1}"#, "alert"),
            (#"{"aps":{"content-available":0}}"#, "alert"),
            (#"{}"#, "alert"),
        ])
    func apnsBackground(_ body: String, _ type: String) async throws {
        let transport = ScriptedTransport([])
        #expect(await try Self.apns(transport).deliver(Self.delivery(body: body)).classification == .delivered)
        #expect(transport.pushes.first?.headers.first(name: "apns-push-type") == type, "\(body)")
    }

    @Test("APNs: ExpiredProviderToken renews the token and is not resent by the provider; the next send carries the new one")
    func apnsRenewal() async throws {
        let clock = TestClock()
        let expired = PNSResponse(status: 403, body: Data(#"{"reason":"ExpiredProviderToken"}"#.utf8))
        let transport = ScriptedTransport([expired])
        let provider = try Self.apns(transport, clock: clock)
        let refused = await provider.deliver(Self.delivery())
        #expect(refused == PNSAnswer(.renewToken, status: 403, reason: "ExpiredProviderToken"))
        #expect(transport.pushes.count == 1, "one request: the worker resends")
        clock.advance(1)
        #expect(await provider.deliver(Self.delivery()).classification == .delivered)
        let authorizations = transport.pushes.map { $0.headers.first(name: "authorization") }
        #expect(authorizations.count == 2 && authorizations[0] != authorizations[1], "a new provider token")
    }

    @Test("APNs: a hub without credentials is named in the reason, and nothing is sent")
    func apnsNoCredentials() async throws {
        let transport = ScriptedTransport([])
        var delivery = Self.delivery()
        delivery.hub = "otherhub"
        let answer = await try Self.apns(transport).deliver(delivery)
        #expect(answer.classification == .misconfigured(.noCredentials(hub: "otherhub", platform: .apns)))
        #expect(answer.reason == "NoCredentials: hub otherhub has no APNs credentials")
        #expect(transport.requests.isEmpty)
    }

    static func fcm(_ transport: ScriptedTransport) throws -> FCMProvider {
        let credentials = FCMCredentials(
            projectId: "proj", clientEmail: "svc@proj.iam.gserviceaccount.com", privateKey: FCMTests.rsaPEM,
            tokenURI: "https://oauth.test/token", endpoint: "https://fcm.test")
        return try FCMProvider(hubs: ["myhub": credentials], transport: transport)
    }

    @Test("FCM: a 401 drops the access token and answers renewToken; the next send fetches a new one")
    func fcmRenewal() async throws {
        let unauthenticated = PNSResponse(status: 401, body: Data(#"{"error":{"code":401,"status":"UNAUTHENTICATED"}}"#.utf8))
        let transport = ScriptedTransport([unauthenticated])
        let provider = try Self.fcm(transport)
        let delivery = Self.delivery("fcm-token", body: #"{"notification":{"title":"hi"}}"#, format: .fcmv1)
        #expect(await provider.deliver(delivery) == PNSAnswer(.renewToken, status: 401, reason: "UNAUTHENTICATED"))
        #expect(transport.pushes.count == 1, "not resent inside the provider")
        #expect(await provider.deliver(delivery).classification == .delivered)
        let pushes = transport.pushes
        #expect(pushes[0].target == .url("https://fcm.test/v1/projects/proj/messages:send"))
        #expect(pushes.map { $0.headers.first(name: "authorization") } == ["Bearer access-1", "Bearer access-2"])
        let message = try #require(
            (try JSONSerialization.jsonObject(with: pushes[1].body) as? [String: Any])?["message"] as? [String: Any])
        #expect(message["token"] as? String == "fcm-token")
    }

    @Test("FCM: a batch's message is parsed once and each device's token spliced in, escaped; one access token for the batch")
    func fcmBatch() async throws {
        let transport = ScriptedTransport([])
        let provider = try Self.fcm(transport)
        let tokens = ["plain-token", #"with "quotes" and \ backslash"#, "ünï/code"]
        let body = #"{"data":{"count":3,"url":"https://example.com/a"},"notification":{"title":"Hi","sound":"default"}}"#
        let answers = await provider.deliverAll(tokens.map { Self.delivery($0, body: body, format: .gcm) })
        #expect(answers.map(\.classification) == [.delivered, .delivered, .delivered])
        let pushes = transport.pushes
        #expect(pushes.count == 3)
        #expect(transport.requests.count == 4, "one token request for the batch")
        // The transport sends them concurrently: each push is matched to its token by what it carries.
        var reached: [String] = []
        for push in pushes {
            let sent = try #require(try JSONSerialization.jsonObject(with: push.body) as? NSDictionary)
            let token = try #require((sent["message"] as? NSDictionary)?["token"] as? String)
            reached.append(token)
            let expected = try FCMMessage.request(body: body, format: "gcm", token: token)
            #expect(sent == (try JSONSerialization.jsonObject(with: expected) as? NSDictionary), "\(String(decoding: push.body, as: UTF8.self))")
        }
        #expect(reached.sorted() == tokens.sorted())
    }

    @Test("Web Push: one VAPID signature per push service origin, reused by the pushes after it; each payload encrypted anew")
    func webPushVAPIDReused() async throws {
        let transport = ScriptedTransport([PNSResponse(status: 201), PNSResponse(status: 201)])
        let vapid = try VAPID(subject: "mailto:ops@example.com", privateKey: P256.Signing.PrivateKey().rawRepresentation)
        let provider = WebPushProvider(
            hubs: ["myhub": vapid], endpoints: ["myhub": EndpointPolicy(webPushHosts: ["127.0.0.1:9"])], transport: transport)
        let agent = P256.KeyAgreement.PrivateKey()
        let keys = WebPushKeys(p256dh: Base64URL.encode(agent.publicKey.x963Representation), auth: Base64URL.encode(Data(repeating: 7, count: 16)))
        for id in 1...2 {
            let answer = await provider.deliver(
                PNSDelivery(hub: "myhub", notificationId: "n", handle: "http://127.0.0.1:9/push/\(id)", webPush: keys, format: .browser, body: "{}"))
            #expect(answer.classification == .delivered, "\(answer)")
        }
        let pushes = transport.pushes
        #expect(pushes.count == 2)
        #expect(pushes[0].headers.first(name: "authorization") == pushes[1].headers.first(name: "authorization"), "signed once for the origin")
        #expect(pushes[0].headers.first(name: "authorization")?.hasPrefix("vapid t=") == true)
        #expect(pushes[0].body != pushes[1].body, "a fresh key and salt per message")
    }

    @Test("a stopping worker's pushes are not admitted under FCM's rate limit nor encrypted for Web Push: answered stopped, never sent")
    func stoppedBeforeSending() async throws {
        let stop = SendingStop()
        stop.stop()
        let fcmTransport = ScriptedTransport([])
        let fcm = try Self.fcm(fcmTransport)
        let fcmAnswers = await SendingStop.$current.withValue(stop) {
            await fcm.deliverAll(["a", "b"].map { Self.delivery($0, body: #"{"notification":{"title":"hi"}}"#, format: .fcmv1) })
        }
        #expect(fcmAnswers == [.stopped, .stopped])
        #expect(fcmTransport.pushes.isEmpty)

        let webTransport = ScriptedTransport([])
        let vapid = try VAPID(subject: "mailto:ops@example.com", privateKey: P256.Signing.PrivateKey().rawRepresentation)
        let web = WebPushProvider(
            hubs: ["myhub": vapid], endpoints: ["myhub": EndpointPolicy(webPushHosts: ["127.0.0.1:9"])], transport: webTransport)
        let agent = P256.KeyAgreement.PrivateKey()
        let keys = WebPushKeys(p256dh: Base64URL.encode(agent.publicKey.x963Representation), auth: Base64URL.encode(Data(repeating: 7, count: 16)))
        let push = PNSDelivery(hub: "myhub", notificationId: "n", handle: "http://127.0.0.1:9/push/1", webPush: keys, format: .browser, body: "{}")
        #expect(await SendingStop.$current.withValue(stop) { await web.deliverAll([push, push]) } == [.stopped, .stopped])
        #expect(webTransport.pushes.isEmpty)
        // Not stopped, the same pushes go out.
        #expect(await web.deliverAll([push]).map(\.classification) == [.delivered])
        #expect(
            await fcm.deliverAll([Self.delivery("a", body: #"{"notification":{"title":"hi"}}"#, format: .fcmv1)]).map(\.classification) == [
                .delivered
            ])
    }

    @Test("WNS: typed X-WNS-Type and its content type; a 401 renews the token without a resend")
    func wns() async throws {
        let transport = ScriptedTransport([PNSResponse(status: 401)])
        let provider = WNSProvider(
            hubs: ["myhub": WNSCredentials(packageSid: "ms-app://s-1", secret: "secret", tokenURI: "https://login.test/token")],
            endpoints: ["myhub": EndpointPolicy(wnsHosts: ["*.notify.test"])], transport: transport)
        let delivery = Self.delivery("https://db5.notify.test/channel/1", body: "abc", format: .windows, headers: ["X-WNS-Type": "WNS/RAW"])
        let first = await provider.deliver(delivery)
        #expect(first.classification == .renewToken)
        #expect(await provider.deliver(delivery).classification == .delivered)
        let pushes = transport.pushes
        #expect(pushes.count == 2)
        #expect(pushes[1].headers.first(name: "content-type") == "application/octet-stream")
        #expect(pushes.map { $0.headers.first(name: "authorization") } == ["Bearer access-1", "Bearer access-2"])
        let refused = await provider.deliver(
            Self.delivery("https://db5.notify.test/channel/1", format: .windows, headers: ["X-WNS-Type": "wns/other"]))
        #expect(refused.classification == .payloadRejected && transport.pushes.count == 2)
    }
}

@Suite("Collapse keys of template pushes")
struct CollapseVariantTests {
    @Test("templates that differ in any byte of body, headers or expiry get different variants; the same bytes the same one")
    func variants() {
        let base = Template(body: #"{"aps":{"alert":"$(m)"}}"#, headers: ["x-a": "1"], expiry: "5")
        #expect(CollapseKey.variant(of: base) == CollapseKey.variant(of: Template(body: base.body, headers: ["x-a": "1"], expiry: "5")))
        #expect(CollapseKey.variant(of: base).count == 22)
        let others = [
            Template(body: base.body + " ", headers: ["x-a": "1"], expiry: "5"),
            Template(body: base.body, headers: ["x-a": "2"], expiry: "5"),
            Template(body: base.body, headers: ["x-b": "1"], expiry: "5"),
            Template(body: base.body, headers: ["x-a": "1"], expiry: nil),
            // A field's text cannot pass for the next field.
            Template(body: base.body, headers: ["x-a": "1\ne1:5"], expiry: nil),
            // Canonically equivalent, as Swift's == sees them, but other bytes.
            Template(body: base.body.replacingOccurrences(of: "alert", with: "al\u{E9}rt"), headers: ["x-a": "1"], expiry: "5"),
            Template(body: base.body.replacingOccurrences(of: "alert", with: "ale\u{301}rt"), headers: ["x-a": "1"], expiry: "5"),
        ]
        let variants = [base].map(CollapseKey.variant(of:)) + others.map(CollapseKey.variant(of:))
        #expect(Set(variants).count == variants.count, "\(variants)")
    }
}

extension ProviderCoreTests {
    @Test("a dead or disallowed handle is refused before its push is read: pruned or refused whatever the body holds")
    func handleBeforeBody() async throws {
        let transport = ScriptedTransport([])
        let wns = WNSProvider(
            hubs: ["myhub": WNSCredentials(packageSid: "ms-app://s-1", secret: "secret", tokenURI: "https://login.test/token")],
            endpoints: ["myhub": EndpointPolicy(wnsHosts: ["*.notify.test"])], transport: transport)
        let oversized = String(repeating: "x", count: 6000)
        let refused = await wns.deliver(Self.delivery("https://elsewhere.test/c", body: oversized, format: .windows))
        guard case .misconfigured(let problem) = refused.classification else {
            Issue.record("\(refused)")
            return
        }
        #expect(problem.name == "EndpointNotAllowed")
        let fcm = try FCMProvider(
            hubs: [
                "myhub": FCMCredentials(
                    projectId: "p", clientEmail: "a@p.iam.gserviceaccount.com",
                    privateKey: try _RSA.Signing.PrivateKey(keySize: .bits2048).pemRepresentation,
                    tokenURI: "https://oauth.test/token", endpoint: "https://fcm.test")
            ], transport: transport)
        #expect(await fcm.deliver(Self.delivery("", body: "not json", format: .fcmv1)) == PNSAnswer(.invalidHandle, reason: "UNREGISTERED"))
        #expect(transport.requests.isEmpty, "nothing was sent, not even for a token")
    }

    @Test("Huawei, ADM, Xiaomi and Baidu read their services' answers, hostile ones included")
    func otherServicesAnswers() {
        #expect(
            HMSService().classify(PNSResponse(status: 200, body: Data(#"{"code":"80000000","msg":"Success"}"#.utf8))).classification == .delivered)
        #expect(HMSService().classify(PNSResponse(status: 200, body: Data(#"{"code":80300007}"#.utf8))).classification == .invalidHandle)
        #expect(
            HMSService().classify(PNSResponse(status: 200, body: Data(#"{"code":"80100000","msg":"{\"illegalTokens\":{\"a\":[\"t\"]}}"}"#.utf8)))
                .classification == .invalidHandle)
        #expect(HMSService().classify(PNSResponse(status: 200, body: Data("<html>".utf8))).classification == .unknown("200 without a code"))
        // A 200 that is not Baidu's (a proxy's page, an empty body) is not a delivery.
        #expect(BaiduService().classify(PNSResponse(status: 200)).classification == .unknown("200 without response_params"))
        #expect(
            BaiduService().classify(PNSResponse(status: 200, body: Data(#"{"response_params":{"msg_id":"1"}}"#.utf8))).classification == .delivered)
        #expect(BaiduService().classify(PNSResponse(status: 404, body: Data(#"{"error_code":"30608"}"#.utf8))).classification == .invalidHandle)
        #expect(
            XiaomiService().classify(PNSResponse(status: 200, body: Data(#"{"result":"error","code":20301}"#.utf8))).classification == .invalidHandle)
        #expect(
            XiaomiService().classify(PNSResponse(status: 200, body: Data(#"{"result":"ok","code":0,"data":{"bad_regIds":"r"}}"#.utf8)))
                .classification == .invalidHandle)
        #expect(
            XiaomiService().classify(PNSResponse(status: 200, body: Data(String(repeating: "[", count: 100).utf8))).classification == .unknown("200"))
        #expect(
            ADMService().classify(PNSResponse(status: 400, body: Data(#"{"reason":"InvalidRegistrationId"}"#.utf8))).classification == .invalidHandle)
        #expect(ADMService().classify(PNSResponse(status: 413)).classification == .payloadRejected)
    }

    @Test("Xiaomi field names cannot smuggle a field; ADM's handle stays one path segment; ADM's expiry is at least a minute")
    func otherServicesRequests() async throws {
        let transport = ScriptedTransport([])
        let xiaomi = XiaomiProvider(XiaomiService(), hubs: ["myhub": XiaomiCredentials(appSecret: "s", packageName: "com.a")], transport: transport)
        for body in [#"{"title":"t","description":"d","x&registration_id":"victim"}"#, #"{"title":"t","extra":{"a=b&c":"1"}}"#] {
            let answer = await xiaomi.deliver(Self.delivery("regid", body: body, format: .xiaomi))
            #expect(answer.classification == .payloadRejected, "\(answer)")
        }
        #expect(transport.pushes.isEmpty)
        // A notification of CJK text within the limit, though its percent-encoding is three times as long.
        let chinese = String(repeating: "推", count: 1300)
        let sent = await xiaomi.deliver(Self.delivery("regid", body: #"{"title":"t","description":"\#(chinese)"}"#, format: .xiaomi))
        #expect(sent.classification != .payloadRejected, "\(sent)")

        let adm = ADMProvider(
            ADMService(),
            hubs: ["myhub": ADMCredentials(clientId: "c", clientSecret: "s", tokenURI: "https://t.test/token", endpoint: "https://adm.test")],
            transport: transport)
        var delivery = Self.delivery("..", body: #"{"data":{"a":"b"}}"#, format: .adm)
        delivery.expiresAt = Date().addingTimeInterval(5)
        _ = await adm.deliver(delivery)
        let request = try #require(transport.pushes.last)
        #expect(request.target == .url("https://adm.test/messaging/registrations/%2E%2E/messages"))
        #expect((try JSONSerialization.jsonObject(with: request.body) as? [String: Any])?["expiresAfter"] as? Int == 60)
    }

    @Test("one batch of two hubs' pushes: each request carries its own hub's secret and package, whatever the runs of equal bodies")
    func mixedHubBatch() async throws {
        let transport = ScriptedTransport([])
        let xiaomi = XiaomiProvider(
            XiaomiService(),
            hubs: [
                "HubA": XiaomiCredentials(appSecret: "secret-a", packageName: "com.a"),
                "hubB": XiaomiCredentials(appSecret: "secret-b", packageName: "com.b"),
            ],
            transport: transport)
        let body = #"{"title":"t","description":"d"}"#
        var deliveries = [
            Self.delivery("r1", body: body, format: .xiaomi), Self.delivery("r2", body: body, format: .xiaomi),
            Self.delivery("r3", body: body, format: .xiaomi), Self.delivery("r4", body: body, format: .xiaomi),
        ]
        deliveries[0].hub = "hubA"
        deliveries[1].hub = "HUBB"
        deliveries[2].hub = "hubA"
        deliveries[3].hub = "hubA"
        deliveries[3].expiresAt = Date().addingTimeInterval(60)
        _ = await xiaomi.deliverAll(deliveries)
        let pushes = transport.pushes
        #expect(pushes.count == 4)
        for push in pushes {
            let form = String(decoding: push.body, as: UTF8.self)
            let regid = try #require(form.split(separator: "&").first?.dropFirst("registration_id=".count))
            let hubB = regid == "r2"
            #expect(push.headers.first(name: "authorization") == (hubB ? "key=secret-b" : "key=secret-a"), "\(form)")
            #expect(form.contains("restricted_package_name=\(hubB ? "com.b" : "com.a")"), "\(form)")
            #expect(form.contains("time_to_live=") == (regid == "r4"), "\(form)")
        }
    }
}
