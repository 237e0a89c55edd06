import Foundation
import Hummingbird
import HummingbirdTesting
import PushConfiguration
import PushIngress
import Synchronization
import Testing

@Suite("SAS authentication on the hub API")
struct SASTests {
    static let path = "/myhub/installations/i1"

    @Test(
        "refused tokens get 401, a missing right 403, with the reason",
        arguments: [
            (nil, HTTPResponse.Status.unauthorized, "Authorization header missing"),
            ("Bearer abc", .unauthorized, "not a SharedAccessSignature token"),
            ("SharedAccessSignature sr=x&sig=%%%&se=1&skn=k", .unauthorized, "sig is missing or not base64"),
            ("SharedAccessSignature sr=https%3a%2f%2flocalhost%2fmyhub&sig=YWJj&skn=k", .unauthorized, "se (the expiry)"),
            (IngressFixture.token("/myhub", name: "NoSuchRule"), .unauthorized, "key name or signature does not match"),
            (IngressFixture.token("/myhub", key: String(repeating: "x", count: 44)), .unauthorized, "signature does not match"),
            (IngressFixture.token("/myhub", lifetime: -10), .unauthorized, "expired"),
            (IngressFixture.token("/otherhub"), .unauthorized, "not this resource"),
            (IngressFixture.token("/myhub/installations/other"), .unauthorized, "not this resource"),
            (IngressFixture.token("/myhub", key: IngressFixture.sendKey, name: "SendOnly"), .forbidden, "lacks the Listen right"),
        ] as [(String?, HTTPResponse.Status, String)])
    func refused(_ header: String?, _ status: HTTPResponse.Status, _ reason: String) async throws {
        let fixture = try await IngressFixture()
        try await fixture.app.test(.router) { client in
            var headers: HTTPFields = [:]
            if let header { headers[.authorization] = header }
            try await client.execute(uri: Self.path, method: .get, headers: headers) { response in
                #expect(response.status == status)
                #expect(response.headers[.contentType] == "application/xml; charset=utf-8")
                #expect(response.text.hasPrefix("<Error><Code>\(status.code)</Code><Detail>"))
                #expect(response.text.contains(reason), "\(response.text)")
            }
        }
    }

    @Test(
        "accepted tokens: namespace or hub, sb/http/https, any case, any port, listen or full key",
        arguments: [
            IngressFixture.token("/myhub"),
            IngressFixture.token("/"),
            IngressFixture.token("/MyHub/installations"),
            SharedAccessSignature.token(
                resourceURI: "sb://localhost/myhub", keyName: "DefaultListenSharedAccessSignature", key: IngressFixture.listenKey,
                expiry: Date().addingTimeInterval(3600)),
            SharedAccessSignature.token(
                resourceURI: "http://LOCALHOST:8443/myhub/", keyName: "DefaultFullSharedAccessSignature", key: IngressFixture.fullKey,
                expiry: Date().addingTimeInterval(3600)),
        ])
    func accepted(_ header: String) async throws {
        let fixture = try await IngressFixture()
        try await fixture.app.test(.router) { client in
            try await client.execute(uri: Self.path, method: .get, headers: [.authorization: header]) { response in
                #expect(response.status == .notFound, "authorized, and there is no such installation: \(response.text)")
            }
        }
    }

    @Test("a token verified once is checked again on every use: its resource, its hub, its rights and its expiry")
    func verifiedTokens() async throws {
        let clock = Mutex(Date())
        let fixture = try await IngressFixture(now: { clock.withLock { $0 } })
        let installation = IngressFixture.token("/myhub/installations/i1", lifetime: 60)
        let listen = IngressFixture.token("/myhub", key: IngressFixture.listenKey, name: "DefaultListenSharedAccessSignature", lifetime: 60)
        try await fixture.app.test(.router) { client in
            func status(_ uri: String, _ header: String, _ method: HTTPRequest.Method = .get) async throws -> HTTPResponse.Status {
                try await client.execute(uri: uri, method: method, headers: [.authorization: header]).status
            }
            #expect(try await status(Self.path, installation) == .notFound, "verified and remembered")
            #expect(try await status("/myhub/installations/i2", installation) == .unauthorized, "not its resource")
            // A namespace token signed with myhub's key covers otherhub's path too, and otherhub
            // has a rule of that name with another key: remembered for myhub, it is still
            // refused there.
            let namespace = IngressFixture.token("/", lifetime: 60)
            #expect(try await status(Self.path, namespace) == .notFound)
            #expect(try await status("/otherhub/installations/i1", namespace) == .unauthorized, "not its hub's key")
            #expect(try await status(Self.path, listen) == .notFound)
            #expect(try await status("/myhub/registrations", listen) == .forbidden, "lacks the Manage right")
            #expect(try await status(Self.path, installation) == .notFound)
            clock.withLock { $0 = $0.addingTimeInterval(120) }
            let expired = try await client.execute(uri: Self.path, method: .get, headers: [.authorization: installation])
            #expect(expired.status == .unauthorized)
            #expect(expired.text.contains("expired"), "\(expired.text)")
            #expect(try await status(Self.path, listen) == .unauthorized)
        }
    }

    @Test("a connection string's key makes tokens the hub accepts")
    func connectionString() async throws {
        let fixture = try await IngressFixture()
        let connection = try #require(
            ConnectionString(HubsConfiguration.connectionString(endpoint: "localhost", rule: IngressFixture.hubs.hubs[0].sasRules[1])))
        #expect(connection.keyName == "DefaultListenSharedAccessSignature")
        try await fixture.app.test(.router) { client in
            try await client.execute(uri: Self.path, method: .get, headers: [.authorization: connection.token(for: "/myhub")]) { response in
                #expect(response.status == .notFound)
            }
        }
    }

    @Test("an unknown hub is 401, as a token that does not match: hub names cannot be probed")
    func unknownHub() async throws {
        let fixture = try await IngressFixture()
        try await fixture.app.test(.router) { client in
            try await client.execute(uri: "/nohub/installations/i1", method: .get, headers: IngressFixture.fullAccess) { response in
                #expect(response.status == .unauthorized)
                #expect(response.text.contains("key name or signature does not match"))
            }
        }
    }
}
