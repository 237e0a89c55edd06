import Foundation
import Testing

@testable import PushModel

@Suite("Send requests written directly are the bytes JSONEncoder writes")
struct SendRequestWireTests {
    static func requests() -> [SendRequest] {
        var generator = SystemRandomNumberGenerator()
        let awkward = DeliveryBatchWireTests.awkward
        func text() -> String { awkward.randomElement(using: &generator)! }
        let audiences: [() -> Audience] = [
            { .tags(text()) }, { .broadcast },
            { .installationIds((0..<Int.random(in: 0...4, using: &generator)).map { "\(text())\($0)" }) },
            {
                .handles(
                    (0..<Int.random(in: 0...4, using: &generator)).map { index in
                        DirectHandle(
                            platform: Platform.allCases.randomElement(using: &generator)!, handle: "\(text())\(index)",
                            webPush: Bool.random(using: &generator) ? WebPushKeys(p256dh: text(), auth: text()) : nil)
                    })
            },
        ]
        return (0..<200).map { round in
            let enqueued = Date(timeIntervalSince1970: Double(Int.random(in: 1_700_000_000_000...1_900_000_000_000, using: &generator)) / 1000)
            return SendRequest(
                notificationId: "n-\(round)-\(text())", hub: "hub\(round)", audience: audiences[round % audiences.count](),
                format: NotificationFormat.allCases.randomElement(using: &generator)!, body: text(),
                headers: DeliveryBatchWireTests.headers(&generator),
                expiresAt: Bool.random(using: &generator) ? enqueued.addingTimeInterval(Double(Int.random(in: 1...100_000))) : nil,
                enqueuedAt: enqueued)
        }
    }

    @Test("every audience, optional fields present and absent, headers sorted, strings that need escaping")
    func sameBytes() throws {
        for request in Self.requests() {
            let direct = try WireCoding.encode(request)
            let reference = try WireCoding.encodeWithEncoder(request)
            #expect(direct == reference, "\(String(decoding: direct, as: UTF8.self))\n\(String(decoding: reference, as: UTF8.self))")
            #expect(try WireCoding.makeDecoder().decode(SendRequest.self, from: direct) == request)
        }
    }
}
