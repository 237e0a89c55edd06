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
