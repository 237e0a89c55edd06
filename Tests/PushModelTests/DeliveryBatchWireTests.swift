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
        return [equivalent]
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
}
