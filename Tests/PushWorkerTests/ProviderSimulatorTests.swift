import Foundation
import PushConfiguration
import PushIngress
import PushModel
import PushProviders
import PushSimulator
import PushWorker
import Testing

/// Each provider against the simulator over the real wire protocols: every answer mapped.
@Suite("Providers against pushhub sim", .timeLimit(.minutes(2)))
struct ProviderSimulatorTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var platform: Platform
        var handle: String
        var format: NotificationFormat
        var body: String
        var headers: [String: String] = [:]
        var faults = SimulatorFaults()
        var expected: PNSClassification
        var status: Int?
        var reason: String?
        var testDescription: String { name }
    }

    static let token = SimulatedHandle.apns("device-1")
    static let deadToken = "dead" + String(SimulatedHandle.apns("x").dropFirst(4))
    static func faults(dead: [String] = ["dead*"], throttle: Double = 0, error: Double = 0) -> SimulatorFaults {
        var faults = SimulatorFaults()
        faults.deadHandles = dead
        faults.throttleRate = throttle
        faults.errorRate = error
        faults.retryAfterSeconds = 2
        return faults
    }

    static let cases: [Case] =
        [
            // APNs
            Case(
                name: "APNs delivered", platform: .apns, handle: token, format: .apple, body: #"{"aps":{"alert":"hi"}}"#, expected: .delivered,
                status: 200),
            Case(
                name: "APNs Unregistered", platform: .apns, handle: deadToken, format: .apple, body: #"{"aps":{"alert":"hi"}}"#, faults: faults(),
                expected: .invalidHandle, status: 410, reason: "Unregistered"),
            Case(
                name: "APNs token that is not hex is not sent", platform: .apns, handle: "not-a-token", format: .apple, body: "{}",
                expected: .invalidHandle, reason: "BadDeviceToken"),
            Case(
                name: "APNs payload over 4 KB is not sent", platform: .apns, handle: token, format: .apple,
                body: #"{"aps":{"alert":"\#(String(repeating: "x", count: 4100))"}}"#, expected: .payloadRejected, reason: "PayloadTooLarge"),
            Case(
                name: "APNs collapse id over 64 bytes", platform: .apns, handle: token, format: .apple, body: "{}",
                headers: ["apns-collapse-id": String(repeating: "c", count: 65)], expected: .payloadRejected, reason: "BadCollapseId"),
            Case(
                name: "APNs 429", platform: .apns, handle: token, format: .apple, body: "{}", faults: faults(throttle: 1),
                expected: .throttled(retryAfter: .seconds(2)), status: 429, reason: "TooManyRequests"),
            Case(
                name: "APNs 503", platform: .apns, handle: token, format: .apple, body: "{}", faults: faults(error: 1),
                expected: .retry(retryAfter: .seconds(2)), status: 503, reason: "ServiceUnavailable"),
            Case(
                name: "APNs topic not the key's app", platform: .apns, handle: token, format: .apple, body: "{}",
                headers: ["apns-topic": "com.other.app"],
                expected: .misconfigured(.refusedByPNS("TopicDisallowed")), status: 400, reason: "TopicDisallowed"),
            Case(
                name: "APNs unknown hub", platform: .apns, handle: token, format: .apple, body: "{}",
                expected: .misconfigured(.noCredentials(hub: "nohub", platform: .apns)),
                reason: "NoCredentials: hub nohub has no APNs credentials"),
            // FCM
            Case(
                name: "FCM v1 delivered", platform: .fcm, handle: "fcm-token-1", format: .fcmv1,
                body: #"{"message":{"notification":{"title":"t","body":"b"}}}"#,
                expected: .delivered, status: 200),
            Case(
                name: "FCM gcm delivered", platform: .fcm, handle: "fcm-token-2", format: .gcm, body: #"{"data":{"message":"hi","count":3}}"#,
                expected: .delivered, status: 200),
            Case(
                name: "FCM UNREGISTERED", platform: .fcm, handle: "dead-fcm", format: .fcmv1, body: #"{"message":{"data":{"a":"b"}}}"#,
                faults: faults(),
                expected: .invalidHandle, status: 404, reason: "UNREGISTERED"),
            Case(
                name: "FCM QUOTA_EXCEEDED", platform: .fcm, handle: "fcm-token-1", format: .fcmv1, body: #"{"message":{}}"#,
                faults: faults(throttle: 1),
                expected: .throttled(retryAfter: .seconds(2)), status: 429, reason: "QUOTA_EXCEEDED"),
            Case(
                name: "FCM UNAVAILABLE", platform: .fcm, handle: "fcm-token-1", format: .fcmv1, body: #"{"message":{}}"#, faults: faults(error: 1),
                expected: .retry(retryAfter: .seconds(2)), status: 503, reason: "UNAVAILABLE"),
            Case(
                name: "FCM INVALID_ARGUMENT", platform: .fcm, handle: "fcm-token-1", format: .fcmv1, body: #"{"message":{"data":{"n":1}}}"#,
                expected: .payloadRejected, status: 400, reason: "INVALID_ARGUMENT"),
            Case(
                name: "FCM body that is not JSON is not sent", platform: .fcm, handle: "fcm-token-1", format: .fcmv1, body: "hello",
                expected: .payloadRejected),
            // WNS
            Case(
                name: "WNS toast delivered", platform: .wns, handle: "CHANNEL:wns-1", format: .windows,
                body: "<toast><visual><binding template=\"ToastText01\"><text id=\"1\">hi</text></binding></visual></toast>",
                headers: ["X-WNS-Type": "wns/toast"], expected: .delivered, status: 200),
            Case(
                name: "WNS raw delivered", platform: .wns, handle: "CHANNEL:wns-2", format: .windows, body: "raw bytes",
                headers: ["X-WNS-Type": "wns/raw"],
                expected: .delivered, status: 200),
            Case(
                name: "WNS 410", platform: .wns, handle: "CHANNEL:dead-wns", format: .windows, body: "<toast/>", faults: faults(),
                expected: .invalidHandle, status: 410),
            Case(
                name: "WNS 406 throttled", platform: .wns, handle: "CHANNEL:wns-1", format: .windows, body: "<toast/>", faults: faults(throttle: 1),
                expected: .throttled(retryAfter: .seconds(2)), status: 406),
            Case(
                name: "WNS payload over 5000 bytes is not sent", platform: .wns, handle: "CHANNEL:wns-1", format: .windows,
                body: "<toast>\(String(repeating: "x", count: 5000))</toast>", expected: .payloadRejected),
            Case(
                name: "WNS bad XML", platform: .wns, handle: "CHANNEL:wns-1", format: .windows, body: "<toast>", expected: .payloadRejected,
                status: 400),
            Case(
                name: "WNS channel on plain http elsewhere is not sent", platform: .wns, handle: "http://notify.example.com/c", format: .windows,
                body: "<toast/>",
                expected: .misconfigured(.endpointNotAllowed(""))),
            Case(
                name: "WNS channel at a host that is not WNS gets no token", platform: .wns, handle: "https://attacker.example.com/wns/channel/x",
                format: .windows, body: "<toast/>", expected: .misconfigured(.endpointNotAllowed(""))),
            Case(
                name: "WNS channel at another loopback port gets no token", platform: .wns, handle: "http://127.0.0.1:1/wns/channel/x",
                format: .windows, body: "<toast/>", expected: .misconfigured(.endpointNotAllowed(""))),
            Case(
                name: "WNS toast delivered over HTTP/2", platform: .wns, handle: "CHANNEL2:wns-h2", format: .windows,
                body: "<toast><visual><binding template=\"ToastText01\"><text id=\"1\">hi</text></binding></visual></toast>",
                headers: ["X-WNS-Type": "wns/toast"], expected: .delivered, status: 200),
            Case(
                name: "WNS 410 over HTTP/2", platform: .wns, handle: "CHANNEL2:dead-wns", format: .windows, body: "<toast/>", faults: faults(),
                expected: .invalidHandle, status: 410),
            Case(
                name: "WNS 406 over HTTP/2", platform: .wns, handle: "CHANNEL2:wns-1", format: .windows, body: "<toast/>",
                faults: faults(throttle: 1),
                expected: .throttled(retryAfter: .seconds(2)), status: 406),
            // Web Push
            Case(
                name: "Web Push delivered over HTTP/2", platform: .webpush, handle: "SUB2:sub-h2", format: .browser, body: #"{"title":"hi"}"#,
                headers: ["Urgency": "high", "Topic": "news"], expected: .delivered, status: 201),
            Case(
                name: "Web Push 410 over HTTP/2", platform: .webpush, handle: "SUB2:dead-sub", format: .browser, body: "{}", faults: faults(),
                expected: .invalidHandle, status: 410),
            Case(
                name: "Web Push 429 over HTTP/2", platform: .webpush, handle: "SUB2:sub-1", format: .browser, body: "{}", faults: faults(throttle: 1),
                expected: .throttled(retryAfter: .seconds(2)), status: 429),
            Case(
                name: "Web Push delivered", platform: .webpush, handle: "SUB:sub-1", format: .browser, body: #"{"title":"hi"}"#,
                headers: ["Urgency": "high", "Topic": "news"], expected: .delivered, status: 201),
            Case(
                name: "Web Push 410", platform: .webpush, handle: "SUB:dead-sub", format: .browser, body: "{}", faults: faults(),
                expected: .invalidHandle, status: 410),
            Case(
                name: "Web Push 429", platform: .webpush, handle: "SUB:sub-1", format: .browser, body: "{}", faults: faults(throttle: 1),
                expected: .throttled(retryAfter: .seconds(2)), status: 429),
            Case(
                name: "Web Push bad Urgency is not sent", platform: .webpush, handle: "SUB:sub-1", format: .browser, body: "{}",
                headers: ["Urgency": "urgent"],
                expected: .payloadRejected),
            Case(
                name: "Web Push https endpoint elsewhere must be https", platform: .webpush, handle: "http://push.example.com/x", format: .browser,
                body: "{}",
                expected: .misconfigured(.endpointNotAllowed(""))),
            Case(
                name: "Web Push endpoint at a private address is not called", platform: .webpush, handle: "https://10.0.0.8/push/x", format: .browser,
                body: "{}", expected: .misconfigured(.endpointNotAllowed(""))),
            Case(
                name: "Web Push endpoint at another loopback port is not called", platform: .webpush, handle: "https://127.0.0.1:1/push/x",
                format: .browser,
                body: "{}", expected: .misconfigured(.endpointNotAllowed(""))),
            Case(
                name: "Web Push endpoint whose name resolves to loopback is not called", platform: .webpush, handle: "HOSTNAME:/push/x",
                format: .browser, body: "{}", expected: .misconfigured(.endpointNotAllowed(""))),
        ]

    static let hmsBody = #"{"message":{"notification":{"body":"there","title":"hi"}}}"#
    static let admBody = #"{"consolidationKey":"k","data":{"a":"b"}}"#
    static let xiaomiBody = #"{"description":"there","payload":"p","title":"hi"}"#
    static let baiduBody = #"{"description":"there","title":"hi"}"#

    /// Huawei Push Kit, ADM, Xiaomi and Baidu: success, a dead handle, a payload refused before
    /// and by the service, throttling with Retry-After, and the service unavailable.
    static let otherPlatformCases: [Case] = [
        Case(name: "HMS delivered", platform: .hms, handle: "hms-token-1", format: .hms, body: hmsBody, expected: .delivered, status: 200),
        Case(
            name: "HMS invalid token", platform: .hms, handle: "dead-hms", format: .hms, body: hmsBody, faults: faults(), expected: .invalidHandle,
            status: 400, reason: "80300007 All the tokens are invalid"),
        Case(
            name: "HMS message over 4 KB is not sent", platform: .hms, handle: "hms-token-1", format: .hms,
            body: #"{"message":{"data":"\#(String(repeating: "x", count: 4200))"}}"#, expected: .payloadRejected),
        Case(
            name: "HMS message with a topic is not sent", platform: .hms, handle: "hms-token-1", format: .hms,
            body: #"{"message":{"topic":"news","data":"x"}}"#, expected: .payloadRejected),
        Case(
            name: "HMS message the service refuses", platform: .hms, handle: "hms-token-1", format: .hms, body: #"{"message":{"data":{"a":1}}}"#,
            expected: .payloadRejected, status: 400, reason: "80100003 message.data must be a string"),
        Case(
            name: "HMS flow control", platform: .hms, handle: "hms-token-1", format: .hms, body: hmsBody, faults: faults(throttle: 1),
            expected: .throttled(retryAfter: .seconds(2)), status: 503),
        Case(
            name: "HMS internal error", platform: .hms, handle: "hms-token-1", format: .hms, body: hmsBody, faults: faults(error: 1),
            expected: .retry(retryAfter: nil), status: 500, reason: "81000001 System inner error"),
        Case(
            name: "HMS unknown hub", platform: .hms, handle: "hms-token-1", format: .hms, body: hmsBody,
            expected: .misconfigured(.noCredentials(hub: "nohub", platform: .hms))),
        Case(
            name: "ADM delivered", platform: .adm, handle: "amzn1.adm-registration.v3.Y29t", format: .adm, body: admBody, expected: .delivered,
            status: 200),
        Case(
            name: "ADM Unregistered", platform: .adm, handle: "dead-adm", format: .adm, body: admBody, faults: faults(), expected: .invalidHandle,
            status: 400, reason: "Unregistered"),
        Case(
            name: "ADM message without data is not sent", platform: .adm, handle: "adm-1", format: .adm, body: #"{"consolidationKey":"k"}"#,
            expected: .payloadRejected),
        Case(
            name: "ADM data over 6 KB, refused by the service", platform: .adm, handle: "adm-1", format: .adm,
            body: #"{"data":{"a":"\#(String(repeating: "x", count: 6300))"}}"#, expected: .payloadRejected, status: 413, reason: "MessageTooLarge"),
        Case(
            name: "ADM MaxRateExceeded", platform: .adm, handle: "adm-1", format: .adm, body: admBody, faults: faults(throttle: 1),
            expected: .throttled(retryAfter: .seconds(2)), status: 429, reason: "MaxRateExceeded"),
        Case(
            name: "ADM Unavailable", platform: .adm, handle: "adm-1", format: .adm, body: admBody, faults: faults(error: 1),
            expected: .retry(retryAfter: .seconds(2)), status: 503, reason: "Unavailable"),
        Case(
            name: "Xiaomi delivered", platform: .xiaomi, handle: "xiaomi-regid-1", format: .xiaomi, body: xiaomiBody, expected: .delivered,
            status: 200),
        Case(
            name: "Xiaomi bad regid", platform: .xiaomi, handle: "dead-regid", format: .xiaomi, body: xiaomiBody, faults: faults(),
            expected: .invalidHandle, status: 200, reason: "20301 No valid targets!"),
        Case(
            name: "Xiaomi notification without a description", platform: .xiaomi, handle: "xiaomi-regid-1", format: .xiaomi,
            body: #"{"title":"hi"}"#, expected: .payloadRejected, status: 400, reason: "10016 title and description are required"),
        Case(
            name: "Xiaomi payload over 4 KB, refused by the service", platform: .xiaomi, handle: "xiaomi-regid-1", format: .xiaomi,
            body: #"{"pass_through":1,"payload":"\#(String(repeating: "x", count: 4200))"}"#, expected: .payloadRejected, status: 400,
            reason: "65009 message content too long"),
        Case(
            name: "Xiaomi message naming its own regid is not sent", platform: .xiaomi, handle: "xiaomi-regid-1", format: .xiaomi,
            body: #"{"registration_id":"other","title":"a","description":"b"}"#, expected: .payloadRejected),
        Case(
            name: "Xiaomi too frequent", platform: .xiaomi, handle: "xiaomi-regid-1", format: .xiaomi, body: xiaomiBody, faults: faults(throttle: 1),
            expected: .throttled(retryAfter: .seconds(2)), status: 200, reason: "10027 api calls too frequent"),
        Case(
            name: "Xiaomi busy", platform: .xiaomi, handle: "xiaomi-regid-1", format: .xiaomi, body: xiaomiBody, faults: faults(error: 1),
            expected: .retry(retryAfter: nil), status: 200, reason: "10002 system is busy"),
        Case(name: "Baidu delivered", platform: .baidu, handle: "user1-channel1", format: .baidu, body: baiduBody, expected: .delivered, status: 200),
        Case(
            name: "Baidu bind relation not found", platform: .baidu, handle: "user1-deadchannel", format: .baidu, body: baiduBody, faults: faults(),
            expected: .invalidHandle, status: 404, reason: "30608 Bind Relation Not Found"),
        Case(
            name: "Baidu msg that is not an object is not sent", platform: .baidu, handle: "u-c", format: .baidu, body: "[1]",
            expected: .payloadRejected),
        Case(
            name: "Baidu msg over 4 KB is not sent", platform: .baidu, handle: "u-c", format: .baidu,
            body: #"{"custom":"\#(String(repeating: "x", count: 4200))"}"#, expected: .payloadRejected),
        Case(
            name: "Baidu too frequent", platform: .baidu, handle: "u-c", format: .baidu, body: baiduBody, faults: faults(throttle: 1),
            expected: .throttled(retryAfter: .seconds(2)), status: 503, reason: "30699 Requests Are Too Frequent To Be Temporarily Denied"),
        Case(
            name: "Baidu internal error", platform: .baidu, handle: "u-c", format: .baidu, body: baiduBody, faults: faults(error: 1),
            expected: .retry(retryAfter: nil), status: 500, reason: "30600 Internal Server Error"),
    ]

    @Test("every answer is classified", arguments: cases)
    func answer(_ test: Case) async throws {
        let sim = try await SimulatorFixture.start(faults: test.faults)
        defer { Task { await sim.stop() } }
        try await Self.check(test, on: sim)
    }

    /// One simulator for all of them (a simulator each crowded the suite's first minute), its
    /// faults set for each case.
    @Test("Huawei, ADM, Xiaomi and Baidu: every answer is classified")
    func otherPlatformAnswers() async throws {
        let sim = try await SimulatorFixture.start()
        defer { Task { await sim.stop() } }
        for test in Self.otherPlatformCases {
            sim.simulator.setFaults(test.faults)
            try await Self.check(test, on: sim)
        }
    }

    /// Sends `test`'s push through the provider to `sim` (its faults set already) and checks
    /// the answer, what the simulator recorded, and what it counted.
    static func check(_ test: Case, on sim: SimulatorFixture) async throws {
        var handle = test.handle
        var keys: WebPushKeys?
        // CHANNEL: and SUB: are at the simulator's plain HTTP/1.1 listener, CHANNEL2: and SUB2: at its HTTP/2 one.
        if handle.hasPrefix("CHANNEL:") { handle = SimulatedHandle.wnsChannel(base: sim.http, id: String(handle.dropFirst(8))) }
        if handle.hasPrefix("CHANNEL2:") { handle = SimulatedHandle.wnsChannel(base: sim.apns, id: String(handle.dropFirst(9))) }
        if handle.hasPrefix("SUB:") || handle.hasPrefix("SUB2:") {
            let id = String(handle.drop { $0 != ":" }.dropFirst())
            handle = SimulatedSubscription(id: id).endpoint(base: handle.hasPrefix("SUB2:") ? sim.apns : sim.http)
            keys = SimulatedSubscription(id: id).keys
        }
        // The machine's own name: on Debian and in containers it resolves to a loopback or private address.
        if handle.hasPrefix("HOSTNAME:") { handle = "https://\(ProcessInfo.processInfo.hostName.lowercased()):1" + handle.dropFirst(9) }
        if test.platform == .webpush, keys == nil { keys = SimulatedSubscription(id: "x").keys }
        let hub = test.name.contains("unknown hub") ? "nohub" : "myhub"
        // Baidu's deliveries are kept by channel id.
        let recordedHandle = test.platform == .baidu ? String(handle.split(separator: "-").last!) : handle
        let recordedBefore = try await sim.deliveries(recordedHandle).count
        let statsBefore = try await sim.stats(test.platform)
        let answer = await try sim.provider(test.platform).deliver(
            PNSDelivery(
                hub: hub, notificationId: UUID().uuidString, handle: handle, webPush: keys, format: test.format, body: test.body,
                headers: test.headers))
        if case .misconfigured(.endpointNotAllowed) = test.expected, case .misconfigured(let problem) = answer.classification {
            #expect(problem.name == "EndpointNotAllowed" && answer.reason == problem.description, "\(answer)")
            #expect(answer.reason?.hasPrefix("EndpointNotAllowed: ") == true, "the result names the refusal: \(answer)")
            if test.name.contains("resolves") { #expect(problem.description.contains("resolves to "), "\(answer)") }
        } else {
            #expect(answer.classification == test.expected, "\(answer)")
        }
        #expect(answer.status == test.status, "\(answer)")
        if let reason = test.reason { #expect(answer.reason == reason, "\(answer)") }
        if test.expected == .delivered {
            let recorded = try await sim.deliveries(recordedHandle)
            #expect(recorded.count == recordedBefore + 1, "\(test.name)")
            let payload = try #require(recorded.first?["payload"] as? String)
            switch test.platform {
            case .webpush: #expect(payload == test.body, "the simulator decrypted what was sent")
            case .fcm:
                let message = try #require(
                    (try JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any])?["message"] as? [String: Any])
                #expect(message["token"] as? String == handle)
                if test.format == .gcm { #expect((message["data"] as? [String: String])?["count"] == "3", "gcm data values become strings") }
            case .hms:
                let message = try #require(
                    (try JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any])?["message"] as? [String: Any])
                #expect(message["token"] as? [String] == [handle])
                #expect((message["notification"] as? [String: String])?["title"] == "hi")
            case .xiaomi:
                let fields = try #require(try JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: String])
                #expect(fields["title"] == "hi" && fields["description"] == "there" && fields["payload"] == "p", "\(fields)")
                #expect(fields["restricted_package_name"] == "com.example.myhub")
            case .baidu:
                #expect(payload == test.body)
                #expect((recorded.first?["headers"] as? [String: String])?["msg_type"] == "1", "a title makes it a notification")
            default: #expect(payload == test.body)
            }
        }
        let stats = try await sim.stats(test.platform)
        let requests = (stats["requests"] as? Int ?? 0) - (statsBefore["requests"] as? Int ?? 0)
        let http2 = (stats["http2"] as? Int ?? 0) - (statsBefore["http2"] as? Int ?? 0)
        if test.status != nil {
            // HTTP/2 wherever the service is https: APNs, FCM, and channels and endpoints at the HTTP/2 listener.
            let overHTTP2 = handle.hasPrefix("https://") || ![.wns, .webpush].contains(test.platform)
            #expect(requests == 1 && http2 == (overHTTP2 ? 1 : 0), "\(test.name): \(stats)")
        }
        if test.status == nil, test.expected != .delivered {
            #expect(requests == 0, "\(test.name): refused before sending")
        }
    }

    @Test("APNs headers: topic, push type, priority, expiration, apns-id")
    func apnsHeaders() async throws {
        let sim = try await SimulatorFixture.start()
        defer { Task { await sim.stop() } }
        let provider = try sim.provider(.apns)
        let expires = Date().addingTimeInterval(600)
        let background = await provider.deliver(
            PNSDelivery(
                hub: "myhub", notificationId: "n", handle: Self.token, format: .apple, body: #"{"aps":{"content-available":1}}"#, expiresAt: expires))
        #expect(background.classification == .delivered)
        let alert = await provider.deliver(
            PNSDelivery(
                hub: "myhub", notificationId: "n", handle: Self.token, format: .apple, body: #"{"aps":{"alert":"x"}}"#,
                headers: ["apns-collapse-id": "scores", "apns-priority": "5", "apns-id": "6f0c8d3e-51a9-4a84-9c36-2f1b7cf0e0a1"]))
        #expect(alert.classification == .delivered)
        let recorded = try await sim.deliveries(Self.token).compactMap { $0["headers"] as? [String: String] }
        #expect(recorded.count == 2)
        #expect(recorded[0]["apns-push-type"] == "background")
        #expect(recorded[0]["apns-priority"] == "5")
        #expect(recorded[0]["apns-expiration"] == String(Int(expires.timeIntervalSince1970)))
        #expect(recorded[0]["apns-topic"] == sim.hubs.hubs[0].credentials.apns?.bundleId)
        #expect(recorded[1]["apns-push-type"] == "alert")
        #expect(recorded[1]["apns-collapse-id"] == "scores")
        #expect(recorded[1]["apns-priority"] == "5")
        #expect(recorded[0]["apns-id"] == nil, "APNs makes one when the send has none")
        #expect(recorded[1]["apns-id"] == "6f0c8d3e-51a9-4a84-9c36-2f1b7cf0e0a1")
    }

    @Test("WNS and Web Push pass the send's headers, and the TTL comes from expiresAt when the send has none")
    func passedHeaders() async throws {
        let sim = try await SimulatorFixture.start()
        defer { Task { await sim.stop() } }
        let expires = Date().addingTimeInterval(600)
        let channel = SimulatedHandle.wnsChannel(base: sim.http, id: "headers")
        let toast = await try sim.provider(.wns).deliver(
            PNSDelivery(
                hub: "myhub", notificationId: "n", handle: channel, format: .windows, body: "<toast/>",
                headers: ["X-WNS-Type": "wns/toast", "X-WNS-Tag": "scores", "X-WNS-Cache-Policy": "cache"], expiresAt: expires))
        #expect(toast.classification == .delivered)
        let wns = try #require(try await sim.deliveries(channel).first?["headers"] as? [String: String])
        #expect(wns["X-WNS-Tag"] == "scores" && wns["X-WNS-Cache-Policy"] == "cache" && wns["Content-Type"] == "text/xml")
        #expect((1...600).contains(Int(wns["X-WNS-TTL"] ?? "") ?? 0), "seconds left until expiresAt: \(wns)")

        let subscription = SimulatedSubscription(id: "headers")
        let push = await try sim.provider(.webpush).deliver(
            PNSDelivery(
                hub: "myhub", notificationId: "n", handle: subscription.endpoint(base: sim.http), webPush: subscription.keys, format: .browser,
                body: "{}", headers: ["Urgency": "low", "Topic": "scores"], expiresAt: expires))
        #expect(push.classification == .delivered)
        let web = try #require(try await sim.deliveries(subscription.endpoint(base: sim.http)).first?["headers"] as? [String: String])
        #expect(web["Urgency"] == "low" && web["Topic"] == "scores")
        #expect((1...600).contains(Int(web["TTL"] ?? "") ?? 0), "seconds left until expiresAt, not the 4-week default: \(web)")
    }

    @Test("APNs ExpiredProviderToken renews the token; the resend (the worker's) carries the new one")
    func apnsTokenRenewal() async throws {
        let sim = try await SimulatorFixture.start()
        defer { Task { await sim.stop() } }
        let provider = try sim.provider(.apns)
        let delivery = PNSDelivery(hub: "myhub", notificationId: "n", handle: Self.token, format: .apple, body: #"{"aps":{}}"#)
        #expect(await provider.deliver(delivery).classification == .delivered)
        try await Task.sleep(for: .milliseconds(1100))
        var faults = SimulatorFaults()
        faults.expireProviderTokensBefore = Int(Date().timeIntervalSince1970)
        try await sim.setFaults(faults)
        let refused = await provider.deliver(delivery)
        #expect(refused.classification == .renewToken && refused.reason == "ExpiredProviderToken")
        #expect(refused.classification.isRetried, "the worker sends it again")
        #expect(await provider.deliver(delivery).classification == .delivered, "with a renewed token")
        let statuses = try #require(try await sim.stats(.apns)["statuses"] as? [String: Int])
        #expect(statuses == ["200": 2, "403": 1], "one refusal, one renewal, one resend")
    }

    @Test("APNs provider token from a key the service does not know is refused, not retried")
    func apnsUnknownKey() async throws {
        let sim = try await SimulatorFixture.start()
        defer { Task { await sim.stop() } }
        var hubs = sim.hubs
        hubs.hubs[0].credentials = try .simulated(apns: sim.apns, http: sim.http, hub: "myhub")
        hubs.hubs[0].credentials.apns?.bundleId = sim.hubs.hubs[0].credentials.apns!.bundleId
        let answer = await try ProviderFactory.make(.apns, hubs: hubs, http: sim.client).deliver(
            PNSDelivery(hub: "myhub", notificationId: "n", handle: Self.token, format: .apple, body: "{}"))
        #expect(answer == PNSAnswer(.misconfigured(.refusedByPNS("InvalidProviderToken")), status: 403, reason: "InvalidProviderToken"))
        #expect(!answer.classification.isRetried)
    }

    @Test("several hubs with their own Apple teams and keys in one provider; each push signed with its hub's key")
    func severalHubs() async throws {
        let other = try HubsConfiguration.Credentials.simulated(apns: "https://placeholder", http: "http://placeholder", hub: "otherhub")
        let sim = try await SimulatorFixture.start(extraHubs: [.init(name: "otherhub", sasRules: [], credentials: other)])
        defer { Task { await sim.stop() } }
        #expect(sim.hubs.hubs[0].credentials.apns?.teamId != sim.hubs.hubs[1].credentials.apns?.teamId)
        let provider = try sim.provider(.apns)
        for hub in ["myhub", "otherhub"] {
            let answer = await provider.deliver(
                PNSDelivery(hub: hub, notificationId: "n", handle: SimulatedHandle.apns(hub), format: .apple, body: "{}"))
            #expect(answer.classification == .delivered, "\(hub): \(answer)")
            let topic = try await sim.deliveries(SimulatedHandle.apns(hub)).first?["headers"] as? [String: String]
            #expect(topic?["apns-topic"] == "com.example.\(hub)")
        }
        // A hub's topic with another hub's key is refused: the key decides.
        let crossed = await provider.deliver(
            PNSDelivery(
                hub: "myhub", notificationId: "n", handle: SimulatedHandle.apns("x"), format: .apple, body: "{}",
                headers: ["apns-topic": "com.example.otherhub"]))
        #expect(crossed.reason == "TopicDisallowed")
    }

    @Test("APNs over TLS fails without the simulator's CA: the certificate is checked")
    func untrustedCertificate() async throws {
        let sim = try await SimulatorFixture.start()
        defer { Task { await sim.stop() } }
        let untrusting = PNSHTTPClient()
        defer { Task { await untrusting.shutdown() } }
        let answer = await try ProviderFactory.make(.apns, hubs: sim.hubs, http: untrusting).deliver(
            PNSDelivery(hub: "myhub", notificationId: "n", handle: Self.token, format: .apple, body: "{}"))
        guard case .retry = answer.classification else {
            Issue.record("expected a transport failure: \(answer)")
            return
        }
        #expect(answer.reason?.contains("transport") == true, "\(answer)")
        #expect(try await sim.stats(.apns)["requests"] as? Int == 0)
    }

    @Test("an APNs answer that does not come in time fails that stream only; the connection goes on")
    func apnsTimeout() async throws {
        var slow = SimulatorFaults()
        slow.latencyMs = 1_000
        let sim = try await SimulatorFixture.start(faults: slow)
        defer { Task { await sim.stop() } }
        let impatient = PNSHTTPClient(trustRootsFile: sim.caFile, requestTimeout: .milliseconds(300))
        defer { Task { await impatient.shutdown() } }
        let provider = try ProviderFactory.make(.apns, hubs: sim.hubs, http: impatient)
        let delivery = PNSDelivery(hub: "myhub", notificationId: "n", handle: Self.token, format: .apple, body: "{}")
        let late = await provider.deliver(delivery)
        guard case .retry = late.classification else {
            Issue.record("expected a retry: \(late)")
            return
        }
        #expect(late.reason?.contains("no answer within") == true, "\(late)")
        try await sim.setFaults(SimulatorFaults())
        // The same connection answers again. The client gives up after 300 ms, which a loaded
        // machine (the suite's busiest minute) can pass: a few tries, not one.
        var answers: [PNSAnswer] = []
        for _ in 0..<3 where answers.last?.classification != .delivered { answers.append(await provider.deliver(delivery)) }
        #expect(answers.last?.classification == .delivered, "\(answers)")
        #expect(answers.allSatisfy { $0.classification == .delivered || $0.reason?.contains("no answer within") == true }, "\(answers)")
    }

    @Test("when APNs closes the connection, the next push connects again")
    func apnsReconnects() async throws {
        let first = try await SimulatorFixture.start()
        let client = PNSHTTPClient(trustRootsFile: first.caFile, connections: 1)
        defer { Task { await client.shutdown() } }
        let provider = try ProviderFactory.make(.apns, hubs: first.hubs, http: client)
        let delivery = PNSDelivery(hub: "myhub", notificationId: "n", handle: Self.token, format: .apple, body: "{}")
        #expect(await provider.deliver(delivery).classification == .delivered)
        await first.stop()
        guard case .retry = await provider.deliver(delivery).classification else {
            Issue.record("a closed connection is a passing failure")
            return
        }

        let second = try await SimulatorFixture.start(replacing: first)
        defer { Task { await second.stop() } }
        #expect(second.apns == first.apns)
        #expect(await provider.deliver(delivery).classification == .delivered, "connected again")
        #expect(try await second.stats(.apns)["requests"] as? Int == 1)
    }

    @Test("FCM over HTTP/2: a batch's messages, alike but for the token, each reach their own token; a token in the data does not confuse it")
    func fcmBatchTokens() async throws {
        let sim = try await SimulatorFixture.start()
        defer { Task { await sim.stop() } }
        let provider = try sim.provider(.fcm)
        func push(_ token: String, _ body: String = #"{"message":{"data":{"kind":"news"}}}"#) -> PNSDelivery {
            PNSDelivery(hub: "myhub", notificationId: "n", handle: token, format: .fcmv1, body: body)
        }
        let tokens = (1...5).map { "fcm-batch-\($0)" }
        let answers = await provider.deliverAll(tokens.map { push($0) })
        #expect(answers.allSatisfy { $0.classification == .delivered }, "\(answers)")
        for token in tokens {
            let recorded = try await sim.deliveries(token)
            let payload = try #require(recorded.first?["payload"] as? String)
            let message = try #require((try JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any])?["message"] as? [String: Any])
            #expect(recorded.count == 1 && message["token"] as? String == token)
        }
        // "token" also inside the data: the message's own token is the one delivered to.
        let tricky = await provider.deliverAll([push("fcm-own", #"{"message":{"data":{"token":"fcm-other"}}}"#)])
        #expect(tricky.map(\.classification) == [.delivered], "\(tricky)")
        #expect(try await sim.deliveries("fcm-own").count == 1)
        #expect(try await sim.deliveries("fcm-other").isEmpty)
        // The same shape with a value that is not a string is still refused.
        let refused = await provider.deliverAll([push("fcm-batch-1", #"{"message":{"data":{"kind":1}}}"#)])
        #expect(refused.map(\.classification) == [.payloadRejected], "\(refused)")
        #expect(try await sim.stats(.fcm)["http2"] as? Int == 7)
    }

    @Test("FCM and WNS fetch one OAuth token for many sends, and a new one after it is refused, with no resend of their own")
    func oauthTokens() async throws {
        let sim = try await SimulatorFixture.start()
        defer { Task { await sim.stop() } }
        let fcm = try sim.provider(.fcm)
        let wns = try sim.provider(.wns)
        let channel = SimulatedHandle.wnsChannel(base: sim.http, id: "c1")
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<20 {
                group.addTask {
                    let sent = await fcm.deliver(
                        PNSDelivery(hub: "myhub", notificationId: "n", handle: "t\(index)", format: .fcmv1, body: #"{"message":{}}"#))
                    #expect(sent.classification == .delivered, "\(sent)")
                    let toast = await wns.deliver(PNSDelivery(hub: "myhub", notificationId: "n", handle: channel, format: .windows, body: "<toast/>"))
                    #expect(toast.classification == .delivered)
                }
            }
        }
        let tokens = try #require((try await sim.get("stats") as? [String: Any])?["tokenRequests"] as? [String: Int])
        #expect(tokens == ["fcm": 1, "wns": 1])

        // A refused token is dropped and answered `renewToken`: the worker sends again, once.
        try await sim.revokeTokens()
        let fcmPush = PNSDelivery(hub: "myhub", notificationId: "n", handle: "t", format: .fcmv1, body: #"{"message":{}}"#)
        let wnsPush = PNSDelivery(hub: "myhub", notificationId: "n", handle: channel, format: .windows, body: "<toast/>")
        #expect(await fcm.deliver(fcmPush).classification == .renewToken)
        #expect(await wns.deliver(wnsPush).classification == .renewToken)
        #expect(await fcm.deliver(fcmPush).classification == .delivered)
        #expect(await wns.deliver(wnsPush).classification == .delivered)
        let renewed = try #require((try await sim.get("stats") as? [String: Any])?["tokenRequests"] as? [String: Int])
        #expect(renewed == ["fcm": 2, "wns": 2], "a 401 fetched one new token each")
        #expect(try await sim.stats(.fcm)["statuses"] as? [String: Int] == ["200": 21, "401": 1])
    }

    @Test("Huawei and ADM fetch one OAuth token for many sends and a new one after it is refused; Baidu's signature and Xiaomi's secret are checked")
    func otherPlatformCredentials() async throws {
        let sim = try await SimulatorFixture.start()
        defer { Task { await sim.stop() } }
        let hms = try sim.provider(.hms)
        let adm = try sim.provider(.adm)
        let hmsPushes = (0..<20).map { PNSDelivery(hub: "myhub", notificationId: "n", handle: "hms-\($0)", format: .hms, body: Self.hmsBody) }
        let admPushes = (0..<20).map { PNSDelivery(hub: "myhub", notificationId: "n", handle: "adm-\($0)", format: .adm, body: Self.admBody) }
        #expect(await hms.deliverAll(hmsPushes).allSatisfy { $0.classification == .delivered })
        #expect(await adm.deliverAll(admPushes).allSatisfy { $0.classification == .delivered })
        let tokens = try #require((try await sim.get("stats") as? [String: Any])?["tokenRequests"] as? [String: Int])
        #expect(tokens == ["hms": 1, "adm": 1])
        try await sim.revokeTokens()
        #expect(await hms.deliver(hmsPushes[0]).classification == .renewToken)
        #expect(await adm.deliver(admPushes[0]).classification == .renewToken)
        #expect(await hms.deliver(hmsPushes[0]).classification == .delivered)
        #expect(await adm.deliver(admPushes[0]).classification == .delivered)
        let renewed = try #require((try await sim.get("stats") as? [String: Any])?["tokenRequests"] as? [String: Int])
        #expect(renewed == ["hms": 2, "adm": 2], "a 401 fetched one new token each")

        // Keys the service does not know: refused as PushHub's set-up, not retried.
        var wrong = sim.hubs
        wrong.hubs[0].credentials.hms?.clientSecret = "not-the-secret"
        let refusedToken = await try ProviderFactory.make(.hms, hubs: wrong, http: sim.client).deliver(hmsPushes[0])
        guard case .misconfigured(let problem) = refusedToken.classification else {
            Issue.record("a token endpoint refusing the client is PushHub's set-up, not retried: \(refusedToken)")
            return
        }
        #expect(problem.name.hasPrefix("OAuth: ") && problem.name.contains("invalid_client"), "\(problem)")
        wrong.hubs[0].credentials.baidu?.secretKey = "not-the-secret"
        wrong.hubs[0].credentials.xiaomi?.appSecret = "not-the-secret"
        let baidu = try ProviderFactory.make(.baidu, hubs: wrong, http: sim.client)
        let xiaomi = try ProviderFactory.make(.xiaomi, hubs: wrong, http: sim.client)
        let signed = await baidu.deliver(PNSDelivery(hub: "myhub", notificationId: "n", handle: "u-c", format: .baidu, body: Self.baiduBody))
        #expect(signed.classification == .misconfigured(.refusedByPNS("Baidu 30603")) && signed.status == 401, "\(signed)")
        let keyed = await xiaomi.deliver(PNSDelivery(hub: "myhub", notificationId: "n", handle: "r", format: .xiaomi, body: Self.xiaomiBody))
        #expect(keyed.classification == .misconfigured(.refusedByPNS("Mi Push 21301")) && keyed.status == 401, "\(keyed)")
        // A Baidu msg with characters the signature must encode (spaces, CJK, `~*'()`) is signed as Baidu checks.
        let encoded = try sim.provider(.baidu)
        let body = #"{"title":"推送 ~*'()!","description":"a+b=c&d"}"#
        #expect(
            await encoded.deliver(PNSDelivery(hub: "myhub", notificationId: "n", handle: "u-c9", format: .baidu, body: body)).classification
                == .delivered)
        #expect(try await sim.deliveries("c9").first?["payload"] as? String == body)
    }

    @Test("FCM's per-project rate limit spaces sends")
    func fcmRateLimit() async throws {
        let sim = try await SimulatorFixture.start()
        defer { Task { await sim.stop() } }
        var hubs = sim.hubs
        hubs.hubs[0].credentials.fcm?.ratePerMinute = 600  // 10 a second, bursts of 10
        let fcm = try ProviderFactory.make(.fcm, hubs: hubs, http: sim.client)
        let started = ContinuousClock.now
        for index in 0..<15 {
            #expect(
                await fcm.deliver(PNSDelivery(hub: "myhub", notificationId: "n", handle: "t\(index)", format: .fcmv1, body: #"{"message":{}}"#))
                    .classification == .delivered)
        }
        // 10 at once, then 5 more at 10 a second: at least 0.4 s.
        #expect(ContinuousClock.now - started >= .milliseconds(400))
    }
}

@Suite("Retry-After as a PNS writes it")
struct RetryAfterTests {
    @Test("seconds or an HTTP date, at most a day: a huge number or a far year is a day, never a trap")
    func bounded() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        #expect(RetryAfter.parse("2", now: now) == .seconds(2))
        #expect(RetryAfter.parse("-1", now: now) == nil)
        #expect(RetryAfter.parse("9223372036854775807", now: now) == .seconds(RetryAfter.maximumSeconds))
        #expect(RetryAfter.parse("Sat, 01 Jan 99999 00:00:00 GMT", now: now) == .seconds(RetryAfter.maximumSeconds))
        #expect(RetryAfter.parse("Fri, 15 Jan 2027 08:00:10 GMT", now: now) == .seconds(10), "1,800,000,000 is 08:00:00 that day")
        #expect(RetryAfter.parse("Sat, 01 Jan 2000 00:00:00 GMT", now: now) == .zero, "a time past is now")
    }
}
