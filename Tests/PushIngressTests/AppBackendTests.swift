import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import PushConfiguration
import PushIngress
import PushModel
import PushStore
import Testing
import _CryptoExtras

@Suite("App-backend API: users and /api/register")
struct AppBackendTests {
    static func fixtureWithUsers() async throws -> IngressFixture {
        let fixture = try await IngressFixture()
        try await fixture.store.setUser(name: "alice", passwordHash: hashPassword("alice-secret"))
        try await fixture.store.setUser(name: "bob", passwordHash: hashPassword("bob-secret"))
        return fixture
    }

    static let alice = basic("alice", "alice-secret")
    static let bob = basic("bob", "bob-secret")

    @Test("Basic auth: only stored users with the right password")
    func basicAuth() async throws {
        let fixture = try await Self.fixtureWithUsers()
        try await fixture.app.test(.router) { client in
            #expect(try await client.execute(uri: "/api/register", method: .post, headers: Self.alice).status == .ok)
            for headers in [basic("alice", "wrong"), basic("carol", "carol"), basic("bob", "bob"), [:], [.authorization: "Basic not-base64!"]]
                as [HTTPFields]
            {
                let response = try await client.execute(uri: "/api/register", method: .post, headers: headers)
                #expect(response.status == .unauthorized, "\(headers)")
                #expect(response.headers[.wwwAuthenticate]?.hasPrefix("Basic") == true)
                #expect(response.text.hasPrefix(#"{"error":"#))
            }
        }
    }

    @Test("a handle the store would refuse (U+0000, over 2,048 bytes) is a 400, not a 503")
    func refusedHandles() async throws {
        let fixture = try await Self.fixtureWithUsers()
        try await fixture.app.test(.router) { client in
            let created = try await client.execute(uri: "/api/register", method: .post, headers: Self.alice)
            let id = try JSONDecoder().decode(String.self, from: Data(buffer: created.body))
            for handle in [#"a1\u0000b2"#, String(repeating: "a", count: 2049)] {
                let device = #"{"Platform":"apns","Handle":"\#(handle)","Tags":["Sports"]}"#
                let put = try await client.execute(
                    uri: "/api/register/\(id)", method: .put, headers: Self.alice.withContentType("application/json"),
                    body: ByteBuffer(string: device))
                #expect(put.status == .badRequest && put.text.contains("handle"), "\(put.text)")
            }
            let asked = try await client.execute(uri: "/api/register?handle=a1%00b2", method: .post, headers: Self.alice)
            #expect(asked.status == .badRequest && asked.text.contains("handle"), "\(asked.status) \(asked.text)")
        }
    }

    @Test("the tutorial's flow: id, register with the user's tag, update, delete, 410, register again")
    func registerFlow() async throws {
        let fixture = try await Self.fixtureWithUsers()
        try await fixture.app.test(.router) { client in
            let created = try await client.execute(uri: "/api/register", method: .post, headers: Self.alice)
            #expect(created.headers[.contentType] == "application/json; charset=utf-8")
            let id = try JSONDecoder().decode(String.self, from: Data(buffer: created.body))

            let device = #"{"Platform":"apns","Handle":"a1b2c3","Tags":["Sports"]}"#
            let put = try await client.execute(
                uri: "/api/register/\(id)", method: .put, headers: Self.alice.withContentType("application/json"), body: ByteBuffer(string: device))
            #expect(put.status == .ok, "\(put.text)")
            let stored = try #require(try await fixture.store.registration(hub: "myhub", id: id))
            #expect(stored.tags == ["Sports", "username:alice"])
            #expect(stored.format == .apple)

            // Bob can neither take over nor delete Alice's registration.
            let hijack = try await client.execute(uri: "/api/register/\(id)", method: .put, headers: Self.bob, body: ByteBuffer(string: device))
            #expect(hijack.status == .forbidden)
            #expect(try await client.execute(uri: "/api/register/\(id)", method: .delete, headers: Self.bob).status == .forbidden)

            // The same handle asks for an id again: it gets the existing one.
            let again = try await client.execute(uri: "/api/register?handle=a1b2c3", method: .post, headers: Self.alice)
            #expect(try JSONDecoder().decode(String.self, from: Data(buffer: again.body)) == id)

            #expect(try await client.execute(uri: "/api/register/\(id)", method: .delete, headers: Self.alice).status == .ok)
            let gone = try await client.execute(uri: "/api/register/\(id)", method: .put, headers: Self.alice, body: ByteBuffer(string: device))
            #expect(gone.status == .gone, "a deleted id answers 410 so the client asks for a new one")

            let fresh = try await client.execute(uri: "/api/register?handle=a1b2c3", method: .post, headers: Self.alice)
            let newId = try JSONDecoder().decode(String.self, from: Data(buffer: fresh.body))
            #expect(newId != id)
            #expect(
                try await client.execute(uri: "/api/register/\(newId)", method: .put, headers: Self.alice, body: ByteBuffer(string: device)).status
                    == .ok)
        }
    }

    @Test("a handle with several registrations keeps one of the caller's, and never touches anyone else's")
    func duplicateHandles() async throws {
        let fixture = try await Self.fixtureWithUsers()
        let owners: [[String]] = [["username:alice"], ["username:alice"], ["username:bob"], []]
        for (index, tags) in owners.enumerated() {
            _ = try await fixture.store.upsertRegistration(
                Registration(registrationId: "dup-\(index)", hub: "myhub", format: .gcm, handle: "same-handle", tags: tags, updatedAt: Date()),
                ifMatch: nil)
        }
        try await fixture.app.test(.router) { client in
            let response = try await client.execute(uri: "/api/register?handle=same-handle", method: .post, headers: Self.alice)
            let kept = try JSONDecoder().decode(String.self, from: Data(buffer: response.body))
            #expect(["dup-0", "dup-1"].contains(kept), "alice gets one of her own ids, not \(kept)")
            let left = try await fixture.store.registrations(hub: "myhub", matching: .handle("same-handle"), after: nil, limit: 10).registrations
            #expect(Set(left.map(\.registrationId)) == [kept, "dup-2", "dup-3"], "bob's and the hub API's registrations stay")

            // Neither bob's nor the unowned registration can be changed or deleted by alice.
            let device = #"{"Platform":"gcm","Handle":"same-handle","Tags":[]}"#
            for id in ["dup-2", "dup-3"] {
                let put = try await client.execute(uri: "/api/register/\(id)", method: .put, headers: Self.alice, body: ByteBuffer(string: device))
                #expect(put.status == .forbidden, "PUT \(id)")
                let delete = try await client.execute(uri: "/api/register/\(id)", method: .delete, headers: Self.alice)
                #expect(delete.status == .forbidden, "DELETE \(id)")
            }
            #expect(try await fixture.store.registration(hub: "myhub", id: "dup-3")?.tags == [], "the unowned registration was not taken over")
        }
    }

    @Test(
        "bad registrations are refused",
        arguments: [
            (#"{"Platform":"mpns","Handle":"x"}"#, HTTPResponse.Status.badRequest, "use one of apns, fcm, gcm, wns"),
            (#"{"Handle":"x"}"#, .badRequest, "Platform: missing"),
            (#"{"Platform":"gcm"}"#, .badRequest, "Handle: missing"),
            (#"{"Platform":"gcm","Handle":"x","Tags":["bad tag"]}"#, .badRequest, "Tags"),
            (#"{"Platform":"gcm","Handle":"x","Tags":["username:bob"]}"#, .forbidden, "belongs to another user"),
            ("[]", .badRequest, "JSON object"),
        ] as [(String, HTTPResponse.Status, String)])
    func refused(_ body: String, _ status: HTTPResponse.Status, _ reason: String) async throws {
        let fixture = try await Self.fixtureWithUsers()
        try await fixture.app.test(.router) { client in
            let id = try JSONDecoder().decode(
                String.self, from: Data(buffer: try await client.execute(uri: "/api/register", method: .post, headers: Self.alice).body))
            let response = try await client.execute(uri: "/api/register/\(id)", method: .put, headers: Self.alice, body: ByteBuffer(string: body))
            #expect(response.status == status)
            #expect(response.text.contains(reason), "\(response.text)")
        }
    }

    @Test("an id that was never issued is gone")
    func unknownId() async throws {
        let fixture = try await Self.fixtureWithUsers()
        try await fixture.app.test(.router) { client in
            let response = try await client.execute(
                uri: "/api/register/never-issued", method: .put, headers: Self.alice,
                body: ByteBuffer(string: #"{"Platform":"wns","Handle":"https://db5.notify.windows.com/1"}"#))
            #expect(response.status == .gone)
        }
    }
}

@Suite("App-backend API: Bearer JWT")
struct JWTTests {
    static let secret = String(repeating: "k", count: 40)

    static func hubs(_ jwt: HubsConfiguration.AppBackend.JWT) -> HubsConfiguration {
        var hubs = IngressFixture.hubs
        hubs.appBackend = .init(hub: "myhub", jwt: jwt)
        return hubs
    }

    static func token(header: [String: Any] = ["alg": "HS256", "typ": "JWT"], claims: [String: Any], sign: (Data) -> Data) throws -> String {
        let head = Base64URL.encode(try JSONSerialization.data(withJSONObject: header))
        let body = Base64URL.encode(try JSONSerialization.data(withJSONObject: claims))
        return "\(head).\(body).\(Base64URL.encode(sign(Data("\(head).\(body)".utf8))))"
    }

    static func claims(exp: TimeInterval = 600, iss: String = "https://issuer.example", aud: Any = "pushhub", sub: String = "alice") -> [String: Any]
    {
        ["exp": Int(Date().timeIntervalSince1970 + exp), "iss": iss, "aud": aud, "sub": sub]
    }

    static func hs256(_ data: Data) -> Data { Data(HMAC<SHA256>.authenticationCode(for: data, using: SymmetricKey(data: Data(secret.utf8)))) }

    @Test("HS256 tokens: good ones pass, bad ones get 401 with the reason")
    func hs256Tokens() async throws {
        let fixture = try await IngressFixture(
            hubs: Self.hubs(
                .init(algorithm: .HS256, secret: Self.secret, publicKey: nil, issuer: "https://issuer.example", audience: "pushhub", userClaim: nil)))
        let cases: [(String, HTTPResponse.Status, String)] = [
            (try Self.token(claims: Self.claims(), sign: Self.hs256), .ok, ""),
            (try Self.token(claims: Self.claims(aud: ["other", "pushhub"]), sign: Self.hs256), .ok, ""),
            (try Self.token(claims: Self.claims(exp: -120), sign: Self.hs256), .unauthorized, "expired"),
            (try Self.token(claims: Self.claims(aud: "other"), sign: Self.hs256), .unauthorized, "audience"),
            (try Self.token(claims: Self.claims(iss: "https://evil.example"), sign: Self.hs256), .unauthorized, "issuer"),
            (try Self.token(claims: Self.claims(), sign: { _ in Data("forged".utf8) }), .unauthorized, "signature"),
            (try Self.token(header: ["alg": "none"], claims: Self.claims(), sign: { _ in Data() }), .unauthorized, "signed with none"),
            (try Self.token(claims: ["iss": "https://issuer.example", "aud": "pushhub", "sub": "alice"], sign: Self.hs256), .unauthorized, "no exp"),
            ("abc.def", .unauthorized, "not a JWT"),
        ]
        try await fixture.app.test(.router) { client in
            for (token, status, reason) in cases {
                let response = try await client.execute(uri: "/api/register", method: .post, headers: [.authorization: "Bearer \(token)"])
                #expect(response.status == status, "\(reason): \(response.text)")
                #expect(reason.isEmpty || response.text.contains(reason))
            }
        }
    }

    @Test("RS256 and ES256 tokens are checked against the configured public key")
    func publicKeyTokens() async throws {
        let rsa = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let p256 = P256.Signing.PrivateKey()
        let setups: [(HubsConfiguration.AppBackend.JWT.Algorithm, String, (Data) throws -> Data)] = [
            (.RS256, rsa.publicKey.pemRepresentation, { try rsa.signature(for: $0, padding: .insecurePKCS1v1_5).rawRepresentation }),
            (.ES256, p256.publicKey.pemRepresentation, { try p256.signature(for: $0).rawRepresentation }),
        ]
        for (algorithm, publicKey, sign) in setups {
            let fixture = try await IngressFixture(
                hubs: Self.hubs(
                    .init(
                        algorithm: algorithm, secret: nil, publicKey: publicKey, issuer: "https://issuer.example", audience: "pushhub",
                        userClaim: "preferred_username")))
            var claims = Self.claims()
            claims["preferred_username"] = "carol"
            let good = try Self.token(header: ["alg": algorithm.rawValue], claims: claims, sign: { try! sign($0) })
            let hsSigned = try Self.token(header: ["alg": "HS256"], claims: claims, sign: Self.hs256)
            try await fixture.app.test(.router) { client in
                #expect(
                    try await client.execute(uri: "/api/register", method: .post, headers: [.authorization: "Bearer \(good)"]).status == .ok,
                    "\(algorithm)")
                let confused = try await client.execute(uri: "/api/register", method: .post, headers: [.authorization: "Bearer \(hsSigned)"])
                #expect(confused.status == .unauthorized, "an HS256 token is not taken where \(algorithm) is configured")
            }
        }
    }
}
