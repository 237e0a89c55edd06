import Foundation
import HTTPTypes
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
            // Its `username:` tag is the app backend's, which only Manage sets on its hub.
            try await client.execute(
                uri: "/myhub/installations/phone-1?api-version=2015-01", method: .put,
                headers: IngressFixture.fullAccess.withContentType("application/json"), body: ByteBuffer(string: Self.body)
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

    @Test("pushChannelExpired is the hub's: a PUT's is not taken, and a PUT clears one the hub set")
    func channelExpiredIsReadOnly() async throws {
        let fixture = try await IngressFixture()
        let expired = #"{"installationId":"phone-1","platform":"apns","pushChannel":"abc123","pushChannelExpired":true,"tags":["Sports"]}"#
        try await fixture.app.test(.router) { client in
            try await client.execute(uri: "/myhub/installations/phone-1", method: .put, headers: Self.json, body: ByteBuffer(string: expired)) {
                response in
                #expect(response.status == .ok, "\(response.text)")
            }
            try await client.execute(uri: "/myhub/installations/phone-1", method: .get, headers: IngressFixture.listenAccess) { response in
                #expect(response.text.contains(#""pushChannelExpired":false"#), "\(response.text)")
            }
            try await client.execute(uri: "/myhub/installations/$count?pushChannelExpired=true", method: .get, headers: IngressFixture.fullAccess) {
                response in
                #expect(response.text == #"{"count":0}"#)
            }
            // Its registration is there to be sent to.
            let registrations = try await fixture.store.registrations(hub: "myhub", matching: .installation("phone-1"), after: nil, limit: 10)
            #expect(registrations.registrations.count == 1)
            // The hub marks it when a PNS calls the channel invalid; the device writing itself
            // again, as it does at every start, stands by the channel once more.
            let outcomes = try #require(fixture.store as? SQLRegistrationStore)
            try await outcomes.pruneInvalidHandle(hub: "myhub", registrationId: registrations.registrations[0].registrationId, handle: "abc123")
            #expect(try await fixture.store.installation(hub: "myhub", id: "phone-1")?.pushChannelExpired == true)
            try await client.execute(uri: "/myhub/installations/phone-1", method: .put, headers: Self.json, body: ByteBuffer(string: expired)) {
                response in
                #expect(response.status == .ok, "\(response.text)")
            }
            #expect(try await fixture.store.installation(hub: "myhub", id: "phone-1")?.pushChannelExpired == false)
            let again = try await fixture.store.registrations(hub: "myhub", matching: .installation("phone-1"), after: nil, limit: 10)
            #expect(again.registrations.map(\.handle) == ["abc123"], "its registration is back")
        }
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
            // The media type is what comes before the first ';': none here.
            try await client.execute(
                uri: "/myhub/installations/phone-1", method: .put, headers: IngressFixture.listenAccess.withContentType(";application/json"),
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

@Suite("Installation queries over HTTP")
struct InstallationQueryAPITests {
    @Test("list and count by filters, paged with $top and the continuation token; Manage only; bad filters named")
    func query() async throws {
        let fixture = try await IngressFixture()
        for index in 0..<25 {
            let platform = index % 2 == 0 ? "apns" : "fcmv1"
            let tags = index % 5 == 0 ? #"["Sports","Politics"]"# : index % 3 == 0 ? #"["Sports"]"# : "[]"
            let body =
                #"{"installationId":"q\#(String(format: "%02d", index))","platform":"\#(platform)","pushChannel":"h\#(index)","tags":\#(tags),"userId":"u\#(index % 3)"}"#
            _ = try await fixture.store.upsertInstallation(
                try WireCoding.makeDecoder().decode(Installation.self, from: Data(body.utf8)), hub: "myhub")
        }
        try await fixture.app.test(.router) { client in
            // Sports && !Politics among apns: 6, 12, 18, 24 (3, 9, 21 are fcmv1; 0, 10, 15, 20 are Politics too).
            let query = "tag=\("Sports && !Politics".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)&platform=apns"
            var ids: [String] = []
            var token: String?
            var pages = 0
            repeat {
                let uri = "/myhub/installations?\(query)&$top=3" + (token.map { "&ContinuationToken=\($0)" } ?? "")
                try await client.execute(uri: uri, method: .get, headers: IngressFixture.fullAccess) { response in
                    #expect(response.status == .ok, "\(response.text)")
                    #expect(response.headers[.contentType] == "application/json; charset=utf-8")
                    let page = try WireCoding.makeDecoder().decode([Installation].self, from: Data(buffer: response.body))
                    ids += page.map(\.installationId)
                    token = response.headers[HTTPField.Name("X-MS-ContinuationToken")!]
                }
                pages += 1
            } while token != nil && pages < 10
            #expect(ids == ["q06", "q12", "q18", "q24"])
            #expect(pages == 2)
            try await client.execute(uri: "/myhub/installations/$count?\(query)", method: .get, headers: IngressFixture.fullAccess) { response in
                #expect(response.status == .ok, "\(response.text)")
                #expect(response.text == #"{"count":4}"#)
            }
            try await client.execute(uri: "/myhub/installations/$count?userId=u1", method: .get, headers: IngressFixture.fullAccess) { response in
                #expect(response.text == #"{"count":8}"#)
            }
            try await client.execute(
                uri: "/myhub/installations/$count?pushChannelExpired=false&updatedAfter=2020-01-01T00:00:00Z", method: .get,
                headers: IngressFixture.fullAccess
            ) { response in
                #expect(response.text == #"{"count":25}"#)
            }
            // An installation named like the route is still an installation.
            try await client.execute(uri: "/myhub/installations/q01", method: .get, headers: IngressFixture.listenAccess) { response in
                #expect(response.status == .ok)
            }
            // Listing is Manage's: a Listen key is refused.
            for uri in ["/myhub/installations", "/myhub/installations/$count"] {
                try await client.execute(uri: uri, method: .get, headers: IngressFixture.listenAccess) { response in
                    #expect(response.status == .unauthorized || response.status == .forbidden, "\(uri): \(response.status)")
                }
            }
            for (parameters, named) in [
                ("$top=1001", "$top"), ("$top=0", "$top"), ("platform=blackberry", "platform"), ("pushChannelExpired=maybe", "pushChannelExpired"),
                ("updatedBefore=yesterday", "updatedBefore"), ("tag=%28a", "tag"), ("ContinuationToken=%21%21", "ContinuationToken"),
                ("userId=", "userId"),
            ] {
                try await client.execute(uri: "/myhub/installations?\(parameters)", method: .get, headers: IngressFixture.fullAccess) { response in
                    #expect(response.status == .badRequest, "\(parameters)")
                    #expect(response.text.contains("<Detail>\(named):"), "\(parameters): \(response.text)")
                }
            }
        }
    }
}
