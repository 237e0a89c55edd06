import Foundation
import Testing

@testable import PushModel

@Suite("Delivery batches written directly are the bytes JSONEncoder writes")
struct DeliveryBatchWireTests {
    static let awkward = ResultBatchWireTests.awkward + ["Zebra", "apns-priority", "X-WNS-Type", "x-wns-tag", "_", "ä", "A\u{30A}", "B"]

    static func headers(_ generator: inout SystemRandomNumberGenerator) -> [String: String] {
        Dictionary((0..<Int.random(in: 0...5, using: &generator)).map { _ in (awkward.randomElement()!, awkward.randomElement()!) }) { a, _ in a }
    }

    static func batches() -> [DeliveryBatch] {
        var generator = SystemRandomNumberGenerator()
        // A key whose bytes sort before "B" and whose canonical form (Å) sorts after it.
        let equivalent = DeliveryBatch(
            notificationId: "n", hub: "hub", platform: .apns, kind: .native, body: "{}", headers: ["A\u{30A}": "1", "B": "2"],
            targets: [DeliveryBatch.Target(registrationId: "r", handle: "h")])
        // Targets in runs of one template (written once and copied), then ones that differ from
        // the last only in headers, in expiry or in body.
        let alert = Template(body: #"{"aps":{"alert":"$(message)"}}"#, headers: ["X-A": "1"], expiry: "$(expiry)")
        var otherHeaders = alert
        otherHeaders.headers = ["X-A": "2"]
        var otherExpiry = alert
        otherExpiry.expiry = nil
        var otherBody = alert
        otherBody.body = "{\"aps\":{\"alert\":\"a\tb\"}}"
        // Canonically equivalent to the one before (`==` says equal) but other bytes.
        var composed = alert
        composed.body = "{\"aps\":{\"alert\":\"caf\u{E9}\"}}"
        var decomposed = alert
        decomposed.body = "{\"aps\":{\"alert\":\"cafe\u{301}\"}}"
        var decomposedHeader = alert
        decomposedHeader.headers = ["X-A": "e\u{301}"]
        var composedHeader = alert
        composedHeader.headers = ["X-A": "\u{E9}"]
        let runs = [
            alert, alert, alert, otherHeaders, otherHeaders, otherExpiry, alert, otherBody, otherBody, alert, composed, decomposed, composed,
            composedHeader, decomposedHeader,
        ]
        let shared = DeliveryBatch(
            notificationId: "n", hub: "hub", platform: .apns, kind: .template, body: #"{"message":"m"}"#,
            targets: runs.enumerated().map { index, template in
                DeliveryBatch.Target(registrationId: "r\(index)", handle: "h\(index)", template: template)
            })
        return [equivalent, shared]
            + (0..<80).map { round in
                let kind: DeliveryBatch.Kind = Bool.random() ? .template : .native
                let platform = Platform.allCases.randomElement()!
                let targets = (0..<Int.random(in: 1...20, using: &generator)).map { index in
                    DeliveryBatch.Target(
                        registrationId: Bool.random() ? "r-\(index)-\(awkward.randomElement()!)" : nil, handle: awkward.randomElement()! + "\(index)",
                        webPush: Bool.random() ? WebPushKeys(p256dh: awkward.randomElement()!, auth: awkward.randomElement()!) : nil,
                        template: kind == .template
                            ? Template(
                                name: "dropped", body: awkward.randomElement()!, headers: Bool.random() ? headers(&generator) : nil,
                                expiry: Bool.random() ? awkward.randomElement()! : nil, tags: ["dropped"]) : nil)
                }
                let now = Date(timeIntervalSince1970: Double(Int.random(in: 1_700_000_000_000...1_900_000_000_000)) / 1000)
                return DeliveryBatch(
                    notificationId: "n-\(round)-\(awkward.randomElement()!)", hub: "hub\(round)", platform: platform, kind: kind,
                    format: Bool.random() ? NotificationFormat.allCases.randomElement()! : nil, body: awkward.randomElement()!,
                    headers: headers(&generator), expiresAt: Bool.random() ? now.addingTimeInterval(60) : nil, enqueuedAt: Bool.random() ? now : nil,
                    attempt: Int.random(in: 1...9), notBefore: Bool.random() ? now.addingTimeInterval(5) : nil, targets: targets)
            }
    }

    @Test("every field, every optional left out or present, templates, Web Push keys, headers sorted, strings that need escaping")
    func sameBytes() throws {
        for batch in Self.batches() {
            let direct = try WireCoding.encode(batch)
            let reference = try WireCoding.encodeWithEncoder(batch)
            #expect(direct == reference, "\(String(decoding: direct, as: UTF8.self))\n\(String(decoding: reference, as: UTF8.self))")
        }
    }

    @Test("read straight from bytes: the same batch as JSONDecoder's, with other key orders, whitespace, escapes, nulls and unknown fields")
    func readFast() throws {
        for batch in Self.batches() {
            let wire = try WireCoding.encode(batch)
            #expect(DeliveryBatch.fromWireJSON(wire) == batch)
            #expect(try WireCoding.makeDecoder().decode(DeliveryBatch.self, from: wire) == batch)
            // Other writers: JSONSerialization's key order and escaping, unknown fields of any
            // kind, optional fields as null, whitespace.
            var object = try #require(try JSONSerialization.jsonObject(with: wire) as? [String: Any])
            object["extra"] = ["a": [1, 2.5e3, -0.5E-2, true, false, NSNull(), "x\u{e9}/\u{1F680}"], "b": [:] as [String: Any]]
            for key in ["format", "expiresAt", "enqueuedAt", "notBefore"] where object[key] == nil { object[key] = NSNull() }
            var targets = try #require(object["targets"] as? [[String: Any]])
            for index in targets.indices {
                if targets[index]["registrationId"] == nil { targets[index]["registrationId"] = NSNull() }
                if targets[index]["webPush"] == nil { targets[index]["webPush"] = NSNull() }
                if var template = targets[index]["template"] as? [String: Any] {
                    if template["headers"] == nil { template["headers"] = NSNull() }
                    template["future"] = [["x": 1]]
                    targets[index]["template"] = template
                }
            }
            targets[0]["note"] = ["nested": [[1], [2]]]
            object["targets"] = targets
            let other = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted])
            #expect(DeliveryBatch.fromWireJSON(other) == batch, "\(String(decoding: other, as: UTF8.self))")
            let escaped = Data(String(decoding: wire, as: UTF8.self).replacingOccurrences(of: "\"hub\"", with: "\"h\\u0075b\"").utf8)
            #expect(DeliveryBatch.fromWireJSON(escaped) == batch)
        }
    }

    @Test("a target's template the same bytes as the last one read (after any space) is that template; a byte apart, it is read for itself")
    func repeatedTemplates() throws {
        let templates = [
            #"{"body":"x"}"#, #" {"body":"x"}"#, #"{"body":"y"}"#, #"{"body":"x","expiry":"1"}"#, #"{"body":"x"}"#, "null",
            #"{"body":"x","headers":{"X-A":"1"}}"#, #"{"body":"x","headers":{"X-A":"2"}}"#, #"{"body":"x","headers":{"X-A":"2"}}"#,
            #"{"body":"é"}"#, #"{"body":"è"}"#,
        ]
        let targets = templates.enumerated().map { #"{"handle":"h\#($0.offset)","template":\#($0.element)}"# }.joined(separator: ",")
        let wire = Data(
            #"{"schema":"pushhub.delivery-batch.v1","notificationId":"n","hub":"hub","platform":"apns","kind":"template","body":"{}","headers":{},"attempt":1,"targets":[\#(targets)]}"#
                .utf8)
        let batch = try #require(DeliveryBatch.fromWireJSON(wire))
        #expect(batch == (try WireCoding.makeDecoder().decode(DeliveryBatch.self, from: wire)))
        #expect(
            batch.targets.map { $0.template?.body } == ["x", "x", "y", "x", "x", nil, "x", "x", "x", "\u{E9}", "\u{E8}"])
        #expect(batch.targets.map { $0.template?.expiry } == [nil, nil, nil, "1", nil, nil, nil, nil, nil, nil, nil])
        #expect(batch.targets.map { $0.template?.headers?["X-A"] } == [nil, nil, nil, nil, nil, nil, "1", "2", "2", nil, nil])
    }

    @Test("read straight from bytes: what it takes, JSONDecoder takes the same; the rest is left to JSONDecoder")
    func readFastNeverDiffers() throws {
        let encoded = try Self.batches().map { try WireCoding.encode($0) }
        var taken = 0
        for data in WireMutations.of(encoded, count: 4000) {
            guard let fast = DeliveryBatch.fromWireJSON(data) else { continue }
            taken += 1
            let reference = try? WireCoding.makeDecoder().decode(DeliveryBatch.self, from: data)
            #expect(reference == fast, "\(String(decoding: data, as: UTF8.self))")
        }
        #expect(taken > 0, "some mutations are still batches")
        // Deeper than the limit, a key twice (at the top, in a target, in a template), a number
        // where an integer goes, a lone surrogate, a date that is not one, a template's name.
        let batch = DeliveryBatch(
            notificationId: "n", hub: "hub", platform: .apns, kind: .template, body: "{}", enqueuedAt: Date(timeIntervalSince1970: 1_800_000_000),
            targets: [DeliveryBatch.Target(registrationId: "r", handle: "h", template: Template(body: "{}", expiry: "1"))])
        let wire = String(decoding: try WireCoding.encode(batch), as: UTF8.self)
        #expect(DeliveryBatch.fromWireJSON(Data(wire.utf8)) == batch)
        // A template's name and tags are read, as JSONDecoder reads them, and not delivered.
        let named = wire.replacingOccurrences(of: "{\"body\":", with: "{\"name\":\"t\",\"tags\":[\"a\"],\"body\":")
        #expect(DeliveryBatch.fromWireJSON(Data(named.utf8)) == batch)
        #expect(try WireCoding.makeDecoder().decode(DeliveryBatch.self, from: Data(named.utf8)) == batch)
        for refused in [
            wire.replacingOccurrences(
                of: "\"hub\":", with: "\"deep\":" + String(repeating: "[", count: 40) + String(repeating: "]", count: 40) + ",\"hub\":"),
            wire.replacingOccurrences(of: "\"hub\":", with: "\"hub\":\"x\",\"hub\":"),
            wire.replacingOccurrences(of: "{\"handle\":", with: "{\"handle\":\"x\",\"handle\":"),
            wire.replacingOccurrences(of: "{\"body\":", with: "{\"body\":\"x\",\"body\":"),
            wire.replacingOccurrences(of: "\"attempt\":1", with: "\"attempt\":1.0"),
            wire.replacingOccurrences(of: "\"hub\":\"", with: "\"hub\":\"\\ud800"),
            wire.replacingOccurrences(of: "\"enqueuedAt\":\"", with: "\"enqueuedAt\":\"x"),
            wire.replacingOccurrences(of: "{\"body\":", with: "{\"name\":1,\"body\":"),
            wire + "x",
        ] {
            #expect(refused != wire)
            #expect(DeliveryBatch.fromWireJSON(Data(refused.utf8)) == nil, "\(refused)")
        }
    }
}
