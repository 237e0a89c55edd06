import Crypto
import Foundation
import PushModel
import PushProviders
import Synchronization
import Testing
import _CryptoExtras

/// Counts the token exchanges a test's FCMAccessTokens makes.
final class ExchangeLog: Sendable {
    private let assertions = Mutex<[String]>([])
    var all: [String] { assertions.withLock { $0 } }
    func add(_ assertion: String) -> Int {
        assertions.withLock {
            $0.append(assertion)
            return $0.count
        }
    }
}

@Suite("FCM HTTP v1: access tokens, messages, answers")
struct FCMTests {
    static let rsaPEM = try! _RSA.Signing.PrivateKey(keySize: .bits2048).pemRepresentation

    @Test("the assertion is an RS256 JWT for the messaging scope; the access token is reused until 5 minutes before expiry")
    func tokens() async throws {
        let clock = TestClock()
        let log = ExchangeLog()
        let tokens = try FCMAccessTokens(
            clientEmail: "svc@project.iam.gserviceaccount.com", privateKeyPEM: Self.rsaPEM, tokenURI: nil,
            exchange: { assertion, uri in
                #expect(uri == FCMAccessTokens.defaultTokenURI)
                return ("access-\(log.add(assertion))", 3600)
            }, now: { clock.now })
        // Concurrent callers share one exchange.
        async let a = tokens.token()
        async let b = tokens.token()
        #expect(try await [a, b] == ["access-1", "access-1"])
        clock.advance(54 * 60)
        #expect(try await tokens.token() == "access-1")
        clock.advance(2 * 60)
        #expect(try await tokens.token() == "access-2", "renewed inside the last 5 minutes")
        await tokens.invalidate()
        #expect(try await tokens.token() == "access-3", "a refused token is replaced")

        let parts = try #require(log.all.first).split(separator: ".").map(String.init)
        let claimsData = try #require(Base64URL.decode(parts[1]))
        let claims = try #require(try JSONSerialization.jsonObject(with: claimsData) as? [String: Any])
        #expect(claims["iss"] as? String == "svc@project.iam.gserviceaccount.com")
        #expect(claims["scope"] as? String == FCMAccessTokens.scope)
        #expect(claims["aud"] as? String == FCMAccessTokens.defaultTokenURI)
        #expect((claims["exp"] as? Int).map { $0 - (claims["iat"] as? Int ?? 0) } == 3600)
        let publicKey = try _RSA.Signing.PrivateKey(pemRepresentation: Self.rsaPEM).publicKey
        let signatureData = try #require(Base64URL.decode(parts[2]))
        #expect(
            publicKey.isValidSignature(
                _RSA.Signing.RSASignature(rawRepresentation: signatureData), for: Data("\(parts[0]).\(parts[1])".utf8), padding: .insecurePKCS1v1_5))
    }

    @Test("the tutorials' gcm body becomes a v1 message; a v1 body gets the token")
    func messages() throws {
        let gcm = try FCMMessage.request(
            body:
                #"{"data":{"message":"From alice: hi","count":3},"notification":{"title":"T","body":"B","icon":"ic"},"priority":"high","time_to_live":60}"#,
            format: "gcm", token: "tok")
        let message = try #require((try JSONSerialization.jsonObject(with: gcm) as? [String: Any])?["message"] as? [String: Any])
        #expect(message["token"] as? String == "tok")
        #expect(message["data"] as? [String: String] == ["message": "From alice: hi", "count": "3"], "v1 data values are strings")
        #expect(message["notification"] as? [String: String] == ["title": "T", "body": "B"])
        let android = try #require(message["android"] as? [String: Any])
        #expect(android["notification"] as? [String: String] == ["icon": "ic"])
        #expect(android["priority"] as? String == "HIGH" && android["ttl"] as? String == "60s")

        let v1 = try FCMMessage.request(body: #"{"message":{"notification":{"title":"x"}}}"#, format: "fcmv1", token: "tok2")
        let v1Message = try #require((try JSONSerialization.jsonObject(with: v1) as? [String: Any])?["message"] as? [String: Any])
        #expect(v1Message["token"] as? String == "tok2")
        #expect(throws: FCMMessage.Failure.self) { try FCMMessage.request(body: "[1]", format: "gcm", token: "t") }
    }

    @Test(
        "FCM answers are classified",
        arguments: [
            (200, nil, PNSClassification.delivered), (404, "UNREGISTERED", .invalidHandle), (400, "UNREGISTERED", .invalidHandle),
            (400, "INVALID_ARGUMENT", .payloadRejected), (429, "QUOTA_EXCEEDED", .throttled(retryAfter: nil)),
            (503, "UNAVAILABLE", .retry(retryAfter: nil)), (500, "INTERNAL", .retry(retryAfter: nil)),
            (403, "SENDER_ID_MISMATCH", .misconfigured(.refusedByPNS("SENDER_ID_MISMATCH"))),
            (401, "THIRD_PARTY_AUTH_ERROR", .misconfigured(.refusedByPNS("THIRD_PARTY_AUTH_ERROR"))),
            (418, "NEW_THING", .unknown("418 NEW_THING")), (401, "UNAUTHENTICATED", .renewToken), (401, nil, .renewToken),
            (401, "PERMISSION_DENIED", .renewToken),
        ] as [(Int, String?, PNSClassification)])
    func classification(_ status: Int, _ code: String?, _ expected: PNSClassification) {
        #expect(FCMMessage.classify(status: status, errorCode: code.map(FCMErrorCode.init)) == expected)
    }
}
