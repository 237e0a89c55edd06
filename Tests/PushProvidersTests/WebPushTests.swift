import Crypto
import Foundation
import PushModel
import PushProviders
import Testing

@Suite("Web Push: RFC 8291 encryption and RFC 8292 VAPID")
struct WebPushTests {
    /// RFC 8291 Appendix A.
    enum RFC {
        static let plaintext = Data("When I grow up, I want to be a watermelon".utf8)
        static let senderPrivate = "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"
        static let senderPublic = "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
        static let userAgentPrivate = "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"
        static let userAgentPublic = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
        static let auth = "BTBZMqHH6r4Tts7J_aSIgg"
        static let salt = "DGv6ra1nlYgDCS1FRnbzlw"
        static let body =
            "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"
    }

    static func data(_ text: String) throws -> Data { try #require(Base64URL.decode(text)) }

    @Test("encrypting the RFC's example with its keys and salt gives the RFC's bytes")
    func rfcVector() throws {
        let sender = try P256.KeyAgreement.PrivateKey(rawRepresentation: Self.data(RFC.senderPrivate))
        #expect(Base64URL.encode(sender.publicKey.x963Representation) == RFC.senderPublic)
        let body = try WebPushEncryption.encrypt(
            RFC.plaintext, p256dh: Self.data(RFC.userAgentPublic), auth: Self.data(RFC.auth), senderKey: sender, salt: Self.data(RFC.salt))
        #expect(Base64URL.encode(body) == RFC.body)
    }

    @Test("the user agent decrypts the RFC's body, and anything we encrypt")
    func decrypts() throws {
        let userAgent = try P256.KeyAgreement.PrivateKey(rawRepresentation: Self.data(RFC.userAgentPrivate))
        #expect(try WebPushEncryption.decrypt(Self.data(RFC.body), userAgentKey: userAgent, auth: Self.data(RFC.auth)) == RFC.plaintext)

        let message = Data(#"{"title":"Breaking","body":"ünïcødé 🚀"}"#.utf8)
        let body = try WebPushEncryption.encrypt(message, p256dh: userAgent.publicKey.x963Representation, auth: Self.data(RFC.auth))
        #expect(try WebPushEncryption.decrypt(body, userAgentKey: userAgent, auth: Self.data(RFC.auth)) == message)
        // A fresh salt and key each time: the same message never looks the same.
        #expect(try WebPushEncryption.encrypt(message, p256dh: userAgent.publicKey.x963Representation, auth: Self.data(RFC.auth)) != body)
        // The sender's key (the header's key id, bytes 21..<86) is new with every message.
        let keyIds = try (0..<50).map { _ in
            try WebPushEncryption.encrypt(message, p256dh: userAgent.publicKey.x963Representation, auth: Self.data(RFC.auth))[21..<86]
        }
        #expect(Set(keyIds).count == 50)
    }

    @Test("refusals: wrong keys, bad secrets, tampering, oversize")
    func refusals() throws {
        let userAgent = P256.KeyAgreement.PrivateKey()
        let auth = Data(repeating: 7, count: 16)
        let body = try WebPushEncryption.encrypt(Data("hi".utf8), p256dh: userAgent.publicKey.x963Representation, auth: auth)
        #expect(throws: WebPushEncryption.Failure.self) {
            try WebPushEncryption.decrypt(body, userAgentKey: P256.KeyAgreement.PrivateKey(), auth: auth)
        }
        #expect(throws: WebPushEncryption.Failure.self) {
            try WebPushEncryption.decrypt(body, userAgentKey: userAgent, auth: Data(repeating: 8, count: 16))
        }
        var tampered = body
        tampered[tampered.count - 20] ^= 1
        #expect(throws: WebPushEncryption.Failure.self) { try WebPushEncryption.decrypt(tampered, userAgentKey: userAgent, auth: auth) }
        #expect(throws: WebPushEncryption.Failure.self) { try WebPushEncryption.encrypt(Data("hi".utf8), p256dh: Data([4, 1, 2]), auth: auth) }
        #expect(throws: WebPushEncryption.Failure.self) {
            try WebPushEncryption.encrypt(Data("hi".utf8), p256dh: userAgent.publicKey.x963Representation, auth: Data([1]))
        }
        #expect(throws: WebPushEncryption.Failure.self) {
            try WebPushEncryption.encrypt(Data(repeating: 1, count: 4090), p256dh: userAgent.publicKey.x963Representation, auth: auth)
        }
    }

    @Test("VAPID: an ES256 token for the endpoint's origin, verifiable with the advertised key")
    func vapid() throws {
        let key = P256.Signing.PrivateKey()
        let vapid = try VAPID(subject: "mailto:ops@example.com", privateKey: key.rawRepresentation)
        let now = Date(timeIntervalSince1970: 1_795_248_561)
        let header = try vapid.authorization(for: URL(string: "https://push.example.net:8443/send/abc?x=1")!, now: now)
        let match = try #require(header.wholeMatch(of: /vapid t=([^.]+)\.([^.]+)\.([^,]+), k=(.+)/))
        #expect(String(match.4) == Base64URL.encode(key.publicKey.x963Representation))
        let claims = try #require(try JSONSerialization.jsonObject(with: Self.data(String(match.2))) as? [String: Any])
        #expect(claims["aud"] as? String == "https://push.example.net:8443")
        #expect(claims["sub"] as? String == "mailto:ops@example.com")
        #expect(claims["exp"] as? Int == Int(now.timeIntervalSince1970) + 12 * 3600)
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: Self.data(String(match.3)))
        let publicKey = try P256.Signing.PublicKey(x963Representation: Self.data(String(match.4)))
        #expect(publicKey.isValidSignature(signature, for: Data("\(match.1).\(match.2)".utf8)))
    }
}
