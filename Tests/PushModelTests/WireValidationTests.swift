import Foundation
import PushModel
import PushTestSupport
import Testing

@Suite("Wire message validation")
struct WireValidationTests {
    static let enqueued = Date(timeIntervalSince1970: 1_795_248_561)

    static func request(
        audience: Audience = .tags("Sports"), format: NotificationFormat = .apple, body: String = #"{"aps":{"alert":"hi"}}"#,
        hub: String = "myhub", headers: [String: String] = [:], expiresAt: Date? = nil
    ) -> SendRequest {
        SendRequest(
            notificationId: "5f0c8f7e-3b7a-4a53-9d1e-2b8c4f6a9e10", hub: hub, audience: audience, format: format, body: body,
            headers: headers, expiresAt: expiresAt, enqueuedAt: enqueued)
    }

    @Test(
        "records that are not usable at all give typed errors",
        arguments: [
            ("not json", WireError.malformedJSON("")),
            ("[1, 2]", WireError.malformedJSON("")),
            (#"{"hub": "myhub"}"#, WireError.missingSchema),
            (#"{"schema": "pushhub.send-request.v9"}"#, WireError.unknownSchema("pushhub.send-request.v9")),
            (#"{"schema": 7}"#, WireError.invalidField(field: "schema", reason: "")),
        ])
    func unusableRecords(_ text: String, _ expected: WireError) {
        let error = #expect(throws: WireError.self) { try WireCoding.decode(SendRequest.self, from: Data(text.utf8)) }
        switch (error, expected) {
        case (.malformedJSON?, .malformedJSON), (.missingSchema?, .missingSchema): break
        case (.unknownSchema(let found)?, .unknownSchema(let schema)): #expect(found == schema)
        case (.invalidField(let field, _)?, .invalidField(let expectedField, _)): #expect(field == expectedField)
        default: Issue.record("expected \(expected), got \(String(describing: error))")
        }
    }

    @Test("a record of another known schema names what was expected")
    func otherKnownSchema() throws {
        let data = try WireCoding.encode(Self.request())
        let error = #expect(throws: WireError.self) { try WireCoding.decode(DeliveryBatch.self, from: data) }
        #expect(error?.field == "schema")
        #expect(error?.description.contains("pushhub.delivery-batch.v1") == true)
        #expect(try WireCoding.schema(of: data) == SendRequest.schema)
    }

    @Test(
        "send requests: rules across fields name the field at fault",
        arguments: [
            (request(format: .template, body: #"{"a": 1}"#), "body"),
            (request(format: .template, body: #"["a"]"#), "body"),
            (request(format: .template, body: "not json"), "body"),
            (request(body: ""), "body"),
            (request(hub: "-bad"), "hub"),
            (request(hub: String(repeating: "h", count: 51)), "hub"),
            (request(audience: .tags("   ")), "audience.tags"),
            (request(audience: .installationIds([])), "audience.installationIds"),
            (request(audience: .installationIds(["a", ""])), "audience.installationIds[1]"),
            (request(audience: .handles(Array(repeating: DirectHandle(platform: .apns, handle: "t"), count: 1001))), "audience.handles"),
            (request(audience: .handles([DirectHandle(platform: .apns, handle: "t")]), format: .template, body: "{}"), "format"),
            (request(audience: .handles([DirectHandle(platform: .fcm, handle: "t")]), format: .apple), "audience.handles[0].platform"),
            (
                request(audience: .handles([DirectHandle(platform: .webpush, handle: "https://push.example/x")]), format: .browser),
                "audience.handles[0].webPush"
            ),
            (request(headers: ["bad header": "x"]), "headers"),
            (request(expiresAt: enqueued), "expiresAt"),
        ])
    func sendRequestRules(_ request: SendRequest, _ field: String) throws {
        let error = #expect(throws: WireError.self) { try request.validate() }
        #expect(error?.field == field, "\(String(describing: error))")
        // The same error comes from decoding the encoded record.
        let data = try WireCoding.encode(request)
        let decodingError = #expect(throws: WireError.self) { try WireCoding.decode(SendRequest.self, from: data) }
        #expect(decodingError?.field == field)
    }

    @Test(
        "send requests that follow the rules pass",
        arguments: [
            request(),
            request(audience: .broadcast, format: .template, body: #"{"messageParam": "hi", "Other": "ü"}"#),
            request(
                audience: .handles([DirectHandle(platform: .wns, handle: "https://db5.notify.windows.com/?token=x")]), format: .windows,
                body: "<toast/>"),
            request(audience: .installationIds(["a"]), format: .fcmv1, body: #"{"message":{}}"#, expiresAt: enqueued.addingTimeInterval(60)),
        ])
    func validSendRequests(_ request: SendRequest) throws {
        try request.validate()
        #expect(try WireCoding.decode(SendRequest.self, from: WireCoding.encode(request)) == request)
    }

    static func batch(
        kind: DeliveryBatch.Kind = .native, platform: Platform = .apns, format: NotificationFormat? = .apple, targets: [DeliveryBatch.Target]
    ) -> DeliveryBatch {
        DeliveryBatch(
            notificationId: "5f0c8f7e-3b7a-4a53-9d1e-2b8c4f6a9e10", hub: "myhub", platform: platform, kind: kind, format: format,
            body: kind == .template ? #"{"p":"v"}"# : "{}", targets: targets)
    }

    static let target = DeliveryBatch.Target(registrationId: "r1", handle: "h1")

    @Test(
        "delivery batches: rules across fields name the field at fault",
        arguments: [
            (batch(targets: Array(repeating: target, count: 501)), "targets"),
            (batch(kind: .template, format: nil, targets: [target]), "targets[0].template"),
            (batch(targets: [DeliveryBatch.Target(registrationId: "r", handle: "h", template: .init(body: "x"))]), "targets[0].template"),
            (batch(platform: .fcm, format: .apple, targets: [target]), "format"),
            (batch(platform: .webpush, format: .browser, targets: [target]), "targets[0].webPush"),
            (batch(targets: [DeliveryBatch.Target(registrationId: "r", handle: "")]), "targets[0].handle"),
        ])
    func deliveryBatchRules(_ batch: DeliveryBatch, _ field: String) {
        let error = #expect(throws: WireError.self) { try batch.validate() }
        #expect(error?.field == field, "\(String(describing: error))")
    }

    @Test("result batches: a rejected request may lack its hub, nothing else may")
    func resultBatchHub() throws {
        let rejected = ResultBatch(
            notificationId: "key", hub: "",
            results: [DeliveryResult(registrationId: nil, handle: nil, outcome: .rejected, pnsReason: "bad", attempts: 0, dwellMs: 0)])
        try rejected.validate()
        let delivered = ResultBatch(
            notificationId: "key", hub: "", results: [DeliveryResult(registrationId: "r", handle: "h", outcome: .delivered, attempts: 1, dwellMs: 3)])
        #expect(throws: WireError.invalidField(field: "hub", reason: "must not be empty except for rejected requests")) { try delivered.validate() }
        let summary = ResultBatch(notificationId: "key", hub: "myhub", dispatched: [.apns: 3, .fcm: 0])
        try summary.validate()
        let decoded = try WireCoding.decode(ResultBatch.self, from: WireCoding.encode(summary))
        #expect(decoded.dispatched == [.apns: 3, .fcm: 0])
        let text = String(decoding: try WireCoding.encode(summary), as: UTF8.self)
        #expect(text.contains(#""dispatched":{"apns":3,"fcm":0}"#), "platforms are object keys: \(text)")
    }

    @Test("result batches hold one worker batch of results at most: 500")
    func resultBatchSize() throws {
        let result = DeliveryResult(registrationId: "r", handle: "h", outcome: .delivered, attempts: 1, dwellMs: 3)
        try ResultBatch(notificationId: "key", hub: "myhub", platform: .apns, results: Array(repeating: result, count: 500)).validate()
        let tooMany = try WireCoding.encode(
            ResultBatch(notificationId: "key", hub: "myhub", platform: .apns, results: Array(repeating: result, count: 501)))
        let error = #expect(throws: WireError.self) { try WireCoding.decode(ResultBatch.self, from: tooMany) }
        #expect(error?.field == "results", "\(String(describing: error))")
    }

    @Test("a template body's properties are read as strings")
    func templateProperties() throws {
        #expect(try TemplateProperties.parse(#"{"messageParam":"ü \"q\" </text>","b":""}"#) == ["messageParam": "ü \"q\" </text>", "b": ""])
        #expect(throws: WireError.self) { try TemplateProperties.parse(#"{"nested":{"a":"b"}}"#) }
        #expect(throws: WireError.self) { try TemplateProperties.parse(#"{"flag":true}"#) }
    }

    @Test(
        "a UUID is its canonical text (hex digits of either case, dashes after the 8th, 12th, 16th and 20th), which Foundation accepts too; of 100,000 near-UUIDs none is taken that is not"
    )
    func uuidsInTheirCanonicalForm() throws {
        var random = SeededGenerator(seed: 0x5eed_0004)
        let alphabet: [Character] = Array("0123456789abcdefABCDEF-gG ") + ["\u{0}", "é", "٣", "\u{FF10}"]
        let canonical = try Regex("^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
        var accepted = 0
        for round in 0..<100_000 {
            var characters = Array(UUID().uuidString.lowercased())
            // Most changed in a character or two, some in their length.
            for _ in 0..<Int.random(in: 0...2, using: &random) {
                characters[Int.random(in: 0..<characters.count, using: &random)] = alphabet.randomElement(using: &random)!
            }
            if round % 10 == 0 { characters.removeLast(Int.random(in: 0...2, using: &random)) }
            if round % 10 == 1 { characters.append(alphabet.randomElement(using: &random)!) }
            if round % 7 == 0 { characters = characters.map { Character($0.uppercased()) } }
            let text = String(characters)
            let taken = FieldCheck.isUUID(text)
            #expect(taken == (text.wholeMatch(of: canonical) != nil), "\(text.debugDescription)")
            if taken {
                accepted += 1
                #expect(UUID(uuidString: text) != nil, "\(text.debugDescription) is taken where Foundation would not")
            }
        }
        #expect(accepted > 20_000 && accepted < 80_000, "both kinds tried: \(accepted) taken")
        // Spaces and moved dashes, which Foundation's `sscanf` lets through today, are not taken.
        #expect(!FieldCheck.isUUID(" 5a85265-7e63-4fe4-8e1c-ef3d6937d7a6"))
        #expect(!FieldCheck.isUUID("28-34c0d-4b8a-45f5-98cb-4025efaebe41"))
        #expect(FieldCheck.isUUID(RandomID.timeOrdered(now: Date())) && FieldCheck.isUUID(UUID().uuidString))
    }

    @Test("numbers a record may hold are bounded where arithmetic follows: a summary's counts, a batch's attempt")
    func boundedNumbers() throws {
        let summary = ResultBatch(
            notificationId: "5f0c8f7e-3b7a-4a53-9d1e-2b8c4f6a9e10", hub: "myhub", dispatched: [.apns: .max, .fcm: 1])
        let refused = #expect(throws: WireError.self) { try WireCoding.decode(ResultBatch.self, from: try WireCoding.encode(summary)) }
        #expect(refused?.description.contains("dispatched.apns: must be 0 to 1000000000") == true, "\(String(describing: refused))")
        let largest = ResultBatch(
            notificationId: summary.notificationId, hub: "myhub",
            dispatched: Dictionary(uniqueKeysWithValues: Platform.allCases.map { ($0, ResultBatch.maximumDispatched) }))
        #expect(try WireCoding.decode(ResultBatch.self, from: try WireCoding.encode(largest)).dispatched?[.apns] == ResultBatch.maximumDispatched)
        var batch = DeliveryBatch(
            notificationId: summary.notificationId, hub: "myhub", platform: .apns, kind: .native, format: .apple, body: "{}",
            targets: [.init(registrationId: "r", handle: "h")])
        for (attempt, accepted) in [
            (0, false), (1, true), (DeliveryBatch.maximumAttempt, true), (DeliveryBatch.maximumAttempt + 1, false), (.max, false),
        ] {
            batch.attempt = attempt
            let decoded = try? WireCoding.decode(DeliveryBatch.self, from: try WireCoding.encode(batch))
            #expect((decoded != nil) == accepted, "attempt \(attempt)")
        }
        // The handle and id a batch's results carry back are bounded as the store bounds them.
        batch.attempt = 1
        batch.targets = [.init(registrationId: "r", handle: String(repeating: "h", count: 2_049))]
        #expect(throws: WireError.self) { try WireCoding.decode(DeliveryBatch.self, from: try WireCoding.encode(batch)) }
        batch.targets = [.init(registrationId: String(repeating: "r", count: 2_049), handle: "h")]
        #expect(throws: WireError.self) { try WireCoding.decode(DeliveryBatch.self, from: try WireCoding.encode(batch)) }
    }

    @Test("a direct send names at most 384 KiB of handles, so that its request fits a record")
    func handleBytes() throws {
        func handles(_ count: Int, bytes: Int) -> Audience {
            .handles((0..<count).map { DirectHandle(platform: .apns, handle: String(format: "%04d", $0) + String(repeating: "a", count: bytes - 4)) })
        }
        #expect(throws: Never.self) { try Self.request(audience: handles(1_000, bytes: 393)).validate() }
        let refused = #expect(throws: WireError.self) { try Self.request(audience: handles(1_000, bytes: 394)).validate() }
        #expect(
            refused?.description.contains("audience.handles: 394000 bytes of handles is more than the 393216") == true,
            "\(String(describing: refused))")
    }

    @Test("text is cut by its UTF-8 bytes between scalars, however many bytes a Character holds")
    func utf8Prefix() {
        #expect("héllo".utf8Prefix(3) == "h\u{E9}")
        #expect("héllo".utf8Prefix(2) == "h", "é is two bytes: not cut inside it")
        #expect("abc".utf8Prefix(10) == "abc")
        #expect("abc".utf8Prefix(0) == "")
        let accented = "a" + String(repeating: "\u{301}", count: 100_000)
        #expect(accented.count == 1, "one Character")
        let cut = accented.utf8Prefix(4096)
        #expect(cut.utf8.count == 4095 && cut.unicodeScalars.count == 2048)
        #expect("🙂🙂".utf8Prefix(7) == "🙂")
    }

    @Test("an APNs expiry is a time from 1970 to 9999, in seconds or RFC 3339; anything else is nil, never a trap")
    func expirations() {
        #expect(Template.expirationSeconds("0") == 0)
        #expect(Template.expirationSeconds("1800000000") == 1_800_000_000)
        #expect(Template.expirationSeconds("2030-01-01T00:00:00Z") == 1_893_456_000)
        #expect(Template.expirationSeconds("9999-12-31T23:59:59Z") == Template.latestExpiration)
        for text in ["9223372036854775807", "-1", "253402300800", "99999-01-01T00:00:00Z", "tomorrow", "", "1e9"] {
            #expect(Template.expirationSeconds(text) == nil, "\(text)")
        }
    }
}
