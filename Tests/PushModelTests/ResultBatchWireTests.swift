import Foundation
import Testing

@testable import PushModel

@Suite("Result batches written directly are the bytes JSONEncoder writes")
struct ResultBatchWireTests {
    static let awkward = ["plain", "quote \" and back\\slash", "a/b", "tab\tnew\nline\r", "\u{01}\u{1f}\u{7f}", "ünïcødé ✓ 🚀", ""]

    static func batches() -> [ResultBatch] {
        var generator = SystemRandomNumberGenerator()
        var batches: [ResultBatch] = [
            ResultBatch(notificationId: "n-1", hub: "myhub", dispatched: [.apns: 3, .webpush: 0, .fcm: 12]),
            ResultBatch(
                notificationId: "n-2", hub: "",
                results: [DeliveryResult(registrationId: nil, handle: nil, outcome: .rejected, attempts: 0, dwellMs: 0)]),
        ]
        for round in 0..<50 {
            let results = (0..<Int.random(in: 1...20, using: &generator)).map { index in
                DeliveryResult(
                    registrationId: Bool.random() ? "r-\(index)-\(awkward.randomElement()!)" : nil,
                    handle: Bool.random() ? awkward.randomElement()! + String(index) : "h",
                    outcome: Outcome.allCases.randomElement()!, pnsStatus: Bool.random() ? Int.random(in: 100...599) : nil,
                    pnsReason: Bool.random() ? awkward.randomElement()! : nil, attempts: Int.random(in: 0...9), dwellMs: Int.random(in: 0...1_000_000)
                )
            }
            batches.append(
                ResultBatch(
                    notificationId: "n-\(round)-\(awkward.randomElement()!)", hub: "hub\(round)",
                    platform: Bool.random() ? Platform.allCases.randomElement()! : nil, results: results))
        }
        return batches
    }

    @Test("read straight from bytes: the same batch as JSONDecoder's, with other key orders, whitespace, escapes, nulls and unknown fields")
    func readFast() throws {
        for batch in Self.batches() {
            let wire = try WireCoding.encode(batch)
            #expect(ResultBatch.fromWireJSON(wire) == batch)
            // Other writers: JSONSerialization's key order and escaping, unknown fields of any
            // kind, optional fields as null, whitespace.
            var object = try #require(try JSONSerialization.jsonObject(with: wire) as? [String: Any])
            object["extra"] = ["a": [1, 2.5e3, -0.5E-2, true, false, NSNull(), "x\u{e9}/\u{1F680}"], "b": [:] as [String: Any]]
            if var results = object["results"] as? [[String: Any]] {
                for index in results.indices where results[index]["handle"] == nil { results[index]["handle"] = NSNull() }
                results[0]["note"] = ["nested": [[1], [2]]]
                object["results"] = results
            }
            let other = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted])
            #expect(ResultBatch.fromWireJSON(other) == batch, "\(String(decoding: other, as: UTF8.self))")
            let escaped = Data(String(decoding: wire, as: UTF8.self).replacingOccurrences(of: "\"hub\"", with: "\"h\\u0075b\"").utf8)
            #expect(ResultBatch.fromWireJSON(escaped) == batch)
        }
    }

    @Test("read straight from bytes: what it takes, JSONDecoder takes the same; the rest is left to JSONDecoder")
    func readFastNeverDiffers() throws {
        let encoded = try Self.batches().map { try WireCoding.encode($0) }
        var taken = 0
        for data in WireMutations.of(encoded, count: 4000) {
            guard let fast = ResultBatch.fromWireJSON(data) else { continue }
            taken += 1
            let reference = try? WireCoding.makeDecoder().decode(ResultBatch.self, from: data)
            #expect(reference == fast, "\(String(decoding: data, as: UTF8.self))")
        }
        #expect(taken > 0, "some mutations are still batches")
        // Deeper than the limit, a key twice, a number where an integer goes, a lone surrogate.
        let wire = String(decoding: encoded[2], as: UTF8.self)
        for refused in [
            wire.replacingOccurrences(
                of: "{\"hub\"", with: "{\"deep\":" + String(repeating: "[", count: 40) + String(repeating: "]", count: 40) + ",\"hub\""),
            wire.replacingOccurrences(of: "{\"hub\"", with: "{\"hub\":\"x\",\"hub\""),
            wire.replacingOccurrences(of: "\"attempts\":", with: "\"attempts\":1.0,\"x\":"),
            wire.replacingOccurrences(of: "\"hub\":\"", with: "\"hub\":\"\\ud800"),
            wire + "x",
        ] {
            #expect(ResultBatch.fromWireJSON(Data(refused.utf8)) == nil, "\(refused)")
        }
    }

    @Test("every field, every optional left out or present, strings that need escaping, summaries")
    func sameBytes() throws {
        for batch in Self.batches() {
            let direct = try WireCoding.encode(batch)
            let reference = try WireCoding.encodeWithEncoder(batch)
            #expect(direct == reference, "\(String(decoding: direct, as: UTF8.self))\n\(String(decoding: reference, as: UTF8.self))")
            #expect(try WireCoding.decode(ResultBatch.self, from: direct) == batch)
        }
    }
}

/// Wire records with 1 to 3 bytes replaced, removed or inserted (JSON's own characters and a
/// few bytes that are not UTF-8): inputs for checking a fast reader against JSONDecoder.
enum WireMutations {
    static func of(_ encoded: [Data], count: Int) -> [Data] {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array(#"{}[]":,\ -0123456789.eEtrufalsn"#.utf8) + [0x00, 0x1F, 0x7F, 0xC3, 0xA9, 0xFF]
        return (0..<count).map { _ in
            var bytes = [UInt8](encoded.randomElement(using: &generator)!)
            for _ in 0..<Int.random(in: 1...3, using: &generator) {
                let index = Int.random(in: 0..<bytes.count, using: &generator)
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: bytes[index] = alphabet.randomElement(using: &generator)!
                case 1: bytes.remove(at: index)
                default: bytes.insert(alphabet.randomElement(using: &generator)!, at: index)
                }
            }
            return Data(bytes)
        }
    }
}
