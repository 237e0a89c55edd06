import Foundation
import PushProviders
import Testing

@Suite("WNS answers and access tokens")
struct WNSTests {
    @Test(
        "WNS answers are classified",
        arguments: [
            (200, PNSClassification.delivered), (401, .renewToken), (404, .invalidHandle), (410, .invalidHandle),
            (406, .throttled(retryAfter: nil)), (413, .payloadRejected), (400, .payloadRejected), (500, .retry(retryAfter: nil)),
            (503, .retry(retryAfter: nil)), (418, .unknown("418")),
        ] as [(Int, PNSClassification)])
    func classification(_ status: Int, _ expected: PNSClassification) {
        #expect(WNSResponse.classify(status: status) == expected)
    }

    @Test("content types per X-WNS-Type")
    func contentTypes() {
        #expect(WNSNotificationType(header: "wns/toast")?.contentType == "text/xml")
        #expect(WNSNotificationType(header: "WNS/RAW")?.contentType == "application/octet-stream")
        #expect(WNSNotificationType(header: "wns/other") == nil)
    }

    @Test("a client-credentials token is cached, shared, renewed near expiry and after a 401")
    func cachedToken() async throws {
        let clock = TestClock()
        let log = ExchangeLog()
        let cache = CachedAccessToken(now: { clock.now }) { ("wns-\(log.add("fetch"))", 86_400) }
        async let a = cache.token()
        async let b = cache.token()
        #expect(try await [a, b] == ["wns-1", "wns-1"])
        clock.advance(86_400 - 6 * 60)
        #expect(try await cache.token() == "wns-1")
        clock.advance(2 * 60)
        #expect(try await cache.token() == "wns-2")
        await cache.invalidate()
        #expect(try await cache.token() == "wns-3")
    }
}
