import Foundation
import Testing

@testable import PushModel

@Suite("Installations written directly are the bytes JSONEncoder writes")
struct InstallationWireTests {
    static func installations() -> [Installation] {
        var generator = SystemRandomNumberGenerator()
        let awkward = DeliveryBatchWireTests.awkward
        // Template names whose bytes and canonical forms sort differently (Å against B).
        let equivalent = Installation(
            installationId: "i", platform: .apns, pushChannel: "h", templates: ["A\u{30A}": Template(body: "{}"), "B": Template(body: "[]")])
        return [equivalent]
            + (0..<120).map { round in
                let platform = Installation.InstallationPlatform.allCases.randomElement()!
                let date = { Date(timeIntervalSince1970: Double(Int.random(in: 1_700_000_000_000...1_900_000_000_000)) / 1000) }
                let templates = Dictionary(
                    (0..<Int.random(in: 0...3, using: &generator)).map { index in
                        (
                            awkward.randomElement()! + "\(index)",
                            Template(
                                name: Bool.random() ? awkward.randomElement()! : nil, body: awkward.randomElement()!,
                                headers: Bool.random() ? DeliveryBatchWireTests.headers(&generator) : nil,
                                expiry: Bool.random() ? awkward.randomElement()! : nil,
                                tags: Bool.random() ? (0..<Int.random(in: 0...3)).map { "t\($0)\(awkward.randomElement()!)" } : nil)
                        )
                    }
                ) { a, _ in a }
                return Installation(
                    installationId: "i-\(round)-\(awkward.randomElement()!)", userId: Bool.random() ? awkward.randomElement()! : nil,
                    platform: platform, pushChannel: "https://push.example/\(awkward.randomElement()!)",
                    webPush: platform == .browser ? WebPushKeys(p256dh: awkward.randomElement()!, auth: awkward.randomElement()!) : nil,
                    pushChannelExpired: Bool.random(), tags: (0..<Int.random(in: 0...4)).map { "tag\($0)\(awkward.randomElement()!)" },
                    templates: templates, expirationTime: Bool.random() ? date() : nil, lastUpdate: Bool.random() ? date() : nil)
            }
    }

    @Test("every field, optionals left out or present, browser channels, templates sorted by name, strings that need escaping")
    func sameBytes() throws {
        for installation in Self.installations() {
            let direct = installation.wireJSON()
            let reference = try WireCoding.makeEncoder().encode(installation)
            #expect(direct == reference, "\(String(decoding: direct, as: UTF8.self))\n\(String(decoding: reference, as: UTF8.self))")
            // And it reads back as the same installation (a template's name is its key there).
            var expected = installation
            expected.templates = installation.templates.mapValues { Template(body: $0.body, headers: $0.headers, expiry: $0.expiry, tags: $0.tags) }
            #expect(try WireCoding.makeDecoder().decode(Installation.self, from: direct) == expected)
        }
    }

    @Test("a template's headers as the store keeps them: the encoder's bytes")
    func headers() throws {
        var generator = SystemRandomNumberGenerator()
        for headers in [[:], ["A\u{30A}": "1", "B": "2"]] + (0..<50).map({ _ in DeliveryBatchWireTests.headers(&generator) }) {
            #expect(JSONText.object(headers) == String(decoding: try WireCoding.makeEncoder().encode(headers), as: UTF8.self))
        }
    }

    static func fast(_ data: Data) -> Installation? { data.withUnsafeBytes(Installation.fromJSON) }

    @Test("read straight from bytes: JSONDecoder's installation, with other key orders, platform spellings, nulls, escapes and unknown fields")
    func readFast() throws {
        for installation in Self.installations() {
            let wire = installation.wireJSON()
            let reference = try WireCoding.makeDecoder().decode(Installation.self, from: wire)
            #expect(Self.fast(wire) == reference)
            var object = try #require(try JSONSerialization.jsonObject(with: wire) as? [String: Any])
            object["extra"] = ["a": [1, 2.5e3, true, NSNull(), "x/\u{1F680}"]]
            for key in ["userId", "tags", "templates", "expirationTime", "lastUpdate", "pushChannelExpired"] where object[key] == nil {
                object[key] = NSNull()
            }
            object["platform"] = (object["platform"] as! String).uppercased()
            if var templates = object["templates"] as? [String: [String: Any]] {
                for name in templates.keys {
                    templates[name]!["name"] = "ignored"
                    templates[name]!["future"] = [["x": 1]]
                    if templates[name]!["headers"] == nil { templates[name]!["headers"] = NSNull() }
                }
                object["templates"] = templates
            }
            let other = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted])
            #expect(Self.fast(other) == reference, "\(String(decoding: other, as: UTF8.self))")
            #expect(try WireCoding.makeDecoder().decode(Installation.self, from: other) == reference)
        }
    }

    @Test("read straight from bytes: what it takes, JSONDecoder takes the same; the rest is left to JSONDecoder")
    func readFastNeverDiffers() throws {
        let encoded = Self.installations().map { $0.wireJSON() }
        var taken = 0
        for data in WireMutations.of(encoded, count: 4000) {
            guard let fast = Self.fast(data) else { continue }
            taken += 1
            let reference = try? WireCoding.makeDecoder().decode(Installation.self, from: data)
            #expect(reference == fast, "\(String(decoding: data, as: UTF8.self))")
        }
        #expect(taken > 0, "some mutations are still installations")
        let plain = #"{"installationId":"i","platform":"apns","pushChannel":"h","tags":["a"],"templates":{"t":{"body":"{}"}}}"#
        #expect(Self.fast(Data(plain.utf8)) != nil)
        for refused in [
            plain.replacingOccurrences(of: #""platform":"apns""#, with: #""platform":"browser""#),
            plain.replacingOccurrences(of: #""pushChannel":"h""#, with: #""pushChannel":{"endpoint":"e","p256dh":"p","auth":"a"}"#),
            plain.replacingOccurrences(of: #""platform":"apns""#, with: #""platform":"apple""#),
            plain.replacingOccurrences(of: #""installationId":"i""#, with: #""installationId":"i","installationId":"j""#),
            plain.replacingOccurrences(of: #""tags":["a"]"#, with: #""tags":["a",null]"#),
            plain.replacingOccurrences(of: #""tags":["a"]"#, with: #""tags":["a"],"pushChannelExpired":1"#),
            plain.replacingOccurrences(of: #""tags":["a"]"#, with: #""tags":["a"],"lastUpdate":"yesterday""#),
            plain.replacingOccurrences(of: #""{}"}"#, with: #""{}","headers":{"a":"1","a":"2"}}"#),
            plain.replacingOccurrences(of: #"{"t":"#, with: #"{"t":{"body":"x"},"t":"#),
            plain.replacingOccurrences(of: #""installationId":"i""#, with: #""installationId":null"#),
            plain + "x",
        ] {
            #expect(Self.fast(Data(refused.utf8)) == nil, "\(refused)")
        }
    }
}
