import Foundation
import Hummingbird
import HummingbirdTesting
import PushIngress
import PushModel
import PushStore
import Testing

@Suite("Installations API")
struct InstallationAPITests {
    static let json: HTTPFields = IngressFixture.listenAccess.withContentType("application/json")
    static let body =
        #"{"installationId":"phone-1","platform":"APNS","pushChannel":"abc123","tags":["Sports","username:alice"],"userId":"alice","templates":{"news":{"body":"{\"aps\":{\"alert\":\"$(messageParam)\"}}","tags":["News"]}}}"#

    @Test("PUT, GET, PATCH and DELETE through HTTP")
    func lifecycle() async throws {
        let fixture = try await IngressFixture()
        try await fixture.app.test(.router) { client in
            try await client.execute(
                uri: "/myhub/installations/phone-1?api-version=2015-01", method: .put, headers: Self.json, body: ByteBuffer(string: Self.body)
            ) { response in
                #expect(response.status == .ok, "\(response.text)")
            }
            try await client.execute(uri: "/myhub/installations/phone-1", method: .get, headers: IngressFixture.listenAccess) { response in
                #expect(response.status == .ok)
                let installation = try WireCoding.makeDecoder().decode(Installation.self, from: Data(buffer: response.body))
                #expect(installation.platform == .apns)
                #expect(installation.tags == ["Sports", "username:alice"])
                #expect(installation.templates["news"]?.tags == ["News"])
                #expect(installation.lastUpdate != nil)
                #expect(response.text.contains(#""pushChannelExpired":false"#))
            }
            let patch = #"[{"op":"add","path":"/tags","value":"Politics"},{"op":"remove","path":"/templates/news"}]"#
            try await client.execute(
                uri: "/myhub/installations/phone-1", method: .patch,
                headers: IngressFixture.listenAccess.withContentType("application/json-patch+json"),
                body: ByteBuffer(string: patch)
            ) { response in
                #expect(response.status == .ok, "\(response.text)")
            }
            let stored = try #require(try await fixture.store.installation(hub: "myhub", id: "phone-1"))
            #expect(stored.tags == ["Politics", "Sports", "username:alice"])
            #expect(stored.templates.isEmpty)
            let registrations = try await fixture.store.registrations(hub: "myhub", matching: .installation("phone-1"), after: nil, limit: 10)
                .registrations
            #expect(registrations.count == 1, "the removed template's registration is gone")

            try await client.execute(uri: "/myhub/installations/phone-1", method: .delete, headers: IngressFixture.listenAccess) { response in
                #expect(response.status == .noContent)
            }
            try await client.execute(uri: "/myhub/installations/phone-1", method: .get, headers: IngressFixture.listenAccess) { response in
                #expect(response.status == .notFound)
            }
        }
    }

    @Test(
        "bad installations are refused with the field named, and nothing is written",
        arguments: [
            (#"{"installationId":"phone-1","platform":"blackberry","pushChannel":"x"}"#, "platform"),
            (#"{"installationId":"phone-1","platform":"apns"}"#, "pushChannel"),
            (#"{"installationId":"other","platform":"apns","pushChannel":"x"}"#, "installationId"),
            (#"{"installationId":"phone-1","platform":"apns","pushChannel":"x","tags":["has space"]}"#, "tags"),
            (#"{"installationId":"phone-1","platform":"browser","pushChannel":{"endpoint":"https://push.example/1"}}"#, "pushChannel.p256dh"),
            (#"{"installationId":"phone-1","platform":"apns","pushChannel":"x","tags":"Sports"}"#, "tags"),
            ("not json", "not a JSON object"),
            (
                #"{"installationId":"phone-1","platform":"apns","pushChannel":"x","templates":{"t":{"body":"{\"a\":\"$(name\"}"}}}"#,
                "templates.t.body"
            ),
            (#"{"installationId":"phone-1","platform":"apns","pushChannel":"x","templates":{"t":{"body":"not json"}}}"#, "templates.t.body"),
            (#"{"installationId":"phone-1","platform":"apns","pushChannel":"x","templates":{"t":{"body":"{}","expiry":"$(x"}}}"#, "templates.t"),
        ])
    func refused(_ body: String, _ field: String) async throws {
        let fixture = try await IngressFixture()
        try await fixture.app.test(.router) { client in
            try await client.execute(uri: "/myhub/installations/phone-1", method: .put, headers: Self.json, body: ByteBuffer(string: body)) {
                response in
                #expect(response.status == .badRequest)
                #expect(response.text.contains(field), "\(response.text)")
            }
        }
        #expect(try await fixture.store.installation(hub: "myhub", id: "phone-1") == nil)
    }

    @Test("wrong content type is 415, an oversized body 413")
    func contentChecks() async throws {
        let fixture = try await IngressFixture()
        try await fixture.app.test(.router) { client in
            try await client.execute(
                uri: "/myhub/installations/phone-1", method: .put, headers: IngressFixture.listenAccess.withContentType("text/plain"),
                body: ByteBuffer(string: Self.body)
            ) { response in
                #expect(response.status == .unsupportedMediaType)
            }
            let huge = String(repeating: "x", count: 70_000)
            try await client.execute(uri: "/myhub/installations/phone-1", method: .put, headers: Self.json, body: ByteBuffer(string: huge)) {
                response in
                #expect(response.status == .contentTooLarge)
            }
            try await client.execute(
                uri: "/myhub/installations/missing", method: .patch, headers: IngressFixture.listenAccess.withContentType("application/json"),
                body: ByteBuffer(string: "[]")
            ) { response in
                #expect(response.status == .notFound)
            }
        }
    }
}

extension InstallationAPITests {
    @Test("100 concurrent PUTs of one installation through HTTP leave one consistent record")
    func concurrentPuts() async throws {
        let fixture = try await IngressFixture()
        try await fixture.app.test(.router) { client in
            try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for writer in 0..<100 {
                    group.addTask {
                        let body = #"{"installationId":"shared","platform":"fcmv1","pushChannel":"token-\#(writer)","tags":["writer-\#(writer)"]}"#
                        return try await client.execute(
                            uri: "/myhub/installations/shared", method: .put, headers: Self.json, body: ByteBuffer(string: body)
                        ).status
                    }
                }
                for try await status in group { #expect(status == .ok) }
            }
        }
        let final = try #require(try await fixture.store.installation(hub: "myhub", id: "shared"))
        let registrations = try await fixture.store.registrations(hub: "myhub", matching: .installation("shared"), after: nil, limit: 10)
            .registrations
        #expect(registrations.count == 1)
        #expect(registrations[0].handle == final.pushChannel, "the registration matches the installation that won")
        #expect(registrations[0].tags.contains(final.tags[0]))
    }
}
