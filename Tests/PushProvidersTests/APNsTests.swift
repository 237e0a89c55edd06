import Crypto
import Foundation
import PushModel
import PushProviders
import Synchronization
import Testing

/// A clock tests move by hand.
final class TestClock: Sendable {
    private let time = Mutex(Date(timeIntervalSince1970: 1_795_248_561))
    var now: Date { time.withLock { $0 } }
    func advance(_ seconds: TimeInterval) { time.withLock { $0 = $0.addingTimeInterval(seconds) } }
}

@Suite("APNs provider tokens and answers")
struct APNsTests {
    @Test("one token per key, reused until it is 50 minutes old, renewed at once when APNs says it expired")
    func tokenRenewal() async throws {
        let key = P256.Signing.PrivateKey()
        let clock = TestClock()
        let manager = try APNsTokenManager(keyId: "ABC123DEFG", teamId: "DEF123GHIJ", privateKeyPEM: key.pemRepresentation, now: { clock.now })
        let first = try await manager.token()
        clock.advance(49 * 60)
        #expect(try await manager.token() == first, "shared and reused inside the window")
        clock.advance(2 * 60)
        let second = try await manager.token()
        #expect(second != first, "renewed after 50 minutes")

        // Two connections report the same expired token: one renewal for both.
        clock.advance(60)
        await manager.expired(second)
        let third = try await manager.token()
        #expect(third != second)
        await manager.expired(second)
        #expect(try await manager.token() == third, "a stale report does not throw away the new token")

        // The token is an ES256 JWT with kid, iss and a numeric iat, signed by the key.
        let parts = third.split(separator: ".").map(String.init)
        try #require(parts.count == 3)
        let headerData = try #require(Base64URL.decode(parts[0]))
        let claimsData = try #require(Base64URL.decode(parts[1]))
        let signatureData = try #require(Base64URL.decode(parts[2]))
        let header = try #require(try JSONSerialization.jsonObject(with: headerData) as? [String: Any])
        #expect(header["alg"] as? String == "ES256" && header["kid"] as? String == "ABC123DEFG")
        let claims = try #require(try JSONSerialization.jsonObject(with: claimsData) as? [String: Any])
        #expect(claims["iss"] as? String == "DEF123GHIJ")
        #expect(claims["iat"] as? Int == Int(clock.now.timeIntervalSince1970))
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: signatureData)
        #expect(key.publicKey.isValidSignature(signature, for: Data("\(parts[0]).\(parts[1])".utf8)))
    }

    @Test("a refresh interval outside Apple's 20 to 55 minutes is brought inside")
    func refreshBounds() async throws {
        let clock = TestClock()
        let manager = try APNsTokenManager(
            keyId: "k", teamId: "t", privateKeyPEM: P256.Signing.PrivateKey().pemRepresentation, refreshAfter: 60, now: { clock.now })
        let first = try await manager.token()
        clock.advance(19 * 60)
        #expect(try await manager.token() == first, "never renewed more often than every 20 minutes")
    }

    @Test(
        "every documented answer is classified",
        arguments: [
            (200, nil, PNSClassification.delivered),
            (400, "BadDeviceToken", .invalidHandle), (410, "Unregistered", .invalidHandle), (410, "ExpiredToken", .invalidHandle),
            (400, "DeviceTokenNotForTopic", .invalidHandle),
            (400, "BadCollapseId", .payloadRejected), (400, "BadExpirationDate", .payloadRejected), (400, "BadMessageId", .payloadRejected),
            (400, "BadPriority", .payloadRejected), (400, "DuplicateHeaders", .payloadRejected), (400, "InvalidPushType", .payloadRejected),
            (400, "MissingDeviceToken", .payloadRejected), (400, "PayloadEmpty", .payloadRejected), (413, "PayloadTooLarge", .payloadRejected),
            (400, "IdleTimeout", .retry(retryAfter: nil)),
            (400, "BadTopic", .misconfigured(.refusedByPNS("BadTopic"))), (400, "MissingTopic", .misconfigured(.refusedByPNS("MissingTopic"))),
            (400, "TopicDisallowed", .misconfigured(.refusedByPNS("TopicDisallowed"))),
            (403, "ExpiredProviderToken", .renewToken), (403, "InvalidProviderToken", .misconfigured(.refusedByPNS("InvalidProviderToken"))),
            (403, "MissingProviderToken", .misconfigured(.refusedByPNS("MissingProviderToken"))),
            (403, "BadCertificateEnvironment", .misconfigured(.refusedByPNS("BadCertificateEnvironment"))),
            (404, "BadPath", .misconfigured(.refusedByPNS("BadPath"))), (405, "MethodNotAllowed", .misconfigured(.refusedByPNS("MethodNotAllowed"))),
            (429, "TooManyRequests", .throttled(retryAfter: nil)), (429, "TooManyProviderTokenUpdates", .throttled(retryAfter: nil)),
            (500, "InternalServerError", .retry(retryAfter: nil)), (503, "ServiceUnavailable", .retry(retryAfter: nil)),
            (503, "Shutdown", .retry(retryAfter: nil)),
            (400, "SomethingNew", .unknown("400 SomethingNew")),
        ] as [(Int, String?, PNSClassification)])
    func classification(_ status: Int, _ reason: String?, _ expected: PNSClassification) {
        #expect(APNsResponse.classify(status: status, reason: reason.map(APNsReason.init)) == expected)
        if let reason { #expect(APNsReason(reason).description == reason, "spelled as Apple does") }
    }

    @Test("Retry-After is kept; final outcomes and retries follow the classification")
    func outcomes() {
        #expect(APNsResponse.classify(status: 429, reason: .tooManyRequests, retryAfter: .seconds(7)) == .throttled(retryAfter: .seconds(7)))
        #expect(PNSClassification.invalidHandle.finalOutcome == .invalidHandle && !PNSClassification.invalidHandle.isRetried)
        #expect(PNSClassification.payloadRejected.isRetried == false)
        #expect(PNSClassification.retry(retryAfter: nil).isRetried && PNSClassification.renewToken.isRetried)
        #expect(PNSClassification.throttled(retryAfter: nil).finalOutcome == .throttled)
        #expect(PNSClassification.unknown("x").finalOutcome == .failed)
    }
}
