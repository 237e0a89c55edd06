import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import PushIngress
import PushMetrics
import PushModel
import PushStore
import PushTestSupport
import Testing

/// The attacks of issue 12, each through the HTTP API: what worked before must be refused now.
@Suite("Hostile input: ids, scopes, endpoints, ownership and limits", .timeLimit(.minutes(2)))
struct HostileInputTests {
    /// An FCM (GCM) registration's Atom entry, handle `handle-1`.
    static let gcmAtom = """
        <entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">\
        <GcmRegistrationDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect">\
        <GcmRegistrationId>handle-1</GcmRegistrationId></GcmRegistrationDescription></content></entry>
        """

    static func installationJSON(_ id: String, _ channel: String) -> String {
        #"{"installationId":"\#(id)","platform":"wns","pushChannel":"\#(channel)"}"#
    }

    @Test("a listen key cannot write an installation's registration id, and the installation is still written")
    func installationIdsAreReserved() async throws {
        let fixture = try await IngressFixture()
        try await fixture.app.test(.router) { client in
            for id in ["installation.victim", "Installation.victim"] {
                let put = try await client.execute(
                    uri: "/myhub/registrations/\(id)", method: .put, headers: IngressFixture.listenAccess.withContentType("application/atom+xml"),
                    body: ByteBuffer(string: Self.gcmAtom))
                #expect(put.status == .forbidden, "\(id): \(put.text)")
            }
            let installation = try await client.execute(
                uri: "/myhub/installations/victim", method: .put, headers: IngressFixture.listenAccess.withContentType("application/json"),
                body: ByteBuffer(string: Self.installationJSON("victim", "https://db5.notify.windows.com/?token=v")))
            #expect(installation.status == .ok, "\(installation.text)")
        }
    }

    @Test("made-up HTTP methods are counted under one `other` series, not a series each")
    func madeUpMethods() async throws {
        let fixture = try await IngressFixture()
        let methods = (0..<20).map { "BREW\($0)X" }
        try await fixture.app.test(.router) { client in
            for method in methods {
                let response = try await client.execute(uri: "/myhub/messages", method: try #require(HTTPRequest.Method(method)))
                #expect(response.status.code >= 400, "\(method): \(response.status)")
            }
            _ = try await client.execute(uri: "/myhub/messages", method: .get)
        }
        let text = MetricsRegistry.shared.render()
        #expect(!methods.contains { text.contains("method=\"\($0)\"") }, "no series for a made-up method")
        #expect(text.contains(#"pushhub_http_requests_total{method="other""#))
        #expect(text.contains(#"pushhub_http_requests_total{method="GET""#))
    }

    @Test("installation a with template b and installation a.b are different registrations")
    func idsDoNotCollide() async throws {
        let fixture = try await IngressFixture()
        try await fixture.app.test(.router) { client in
            let headers = IngressFixture.fullAccess.withContentType("application/json")
            let withTemplate =
                #"{"installationId":"a","platform":"apns","pushChannel":"aaaa","templates":{"b":{"body":"{\"aps\":{\"alert\":\"$(m)\"}}"}}}"#
            let dotted = #"{"installationId":"a.b","platform":"apns","pushChannel":"bbbb"}"#
            #expect(
                try await client.execute(uri: "/myhub/installations/a", method: .put, headers: headers, body: ByteBuffer(string: withTemplate)).status
                    == .ok)
            let second = try await client.execute(uri: "/myhub/installations/a.b", method: .put, headers: headers, body: ByteBuffer(string: dotted))
            #expect(second.status == .ok, "\(second.text)")
            #expect(try await fixture.store.installation(hub: "myhub", id: "a")?.templates.keys.sorted() == ["b"])
            #expect(try await fixture.store.installation(hub: "myhub", id: "a.b")?.pushChannel == "bbbb")
            let template = try await fixture.store.registrations(hub: "myhub", matching: .installation("a"), after: nil, limit: 10).registrations
            #expect(template.count == 2, "the native and the template registration of a stay")
        }
    }

    @Test("a token scoped to one installation opens that one only: the path after the hub is compared exactly, the hub name in any case")
    func sasScope() async throws {
        let fixture = try await IngressFixture()
        let scoped: HTTPFields = [.authorization: IngressFixture.token("/myhub/installations/phone-x")]
        try await fixture.app.test(.router) { client in
            let body = ByteBuffer(string: Self.installationJSON("phone-x", "https://db5.notify.windows.com/?token=x"))
            let own = try await client.execute(
                uri: "/MyHub/installations/phone-x", method: .put, headers: scoped.withContentType("application/json"), body: body)
            #expect(own.status == .ok, "\(own.text)")
            let other = try await client.execute(
                uri: "/myhub/installations/PHONE-X", method: .put, headers: scoped.withContentType("application/json"),
                body: ByteBuffer(string: Self.installationJSON("PHONE-X", "https://db5.notify.windows.com/?token=x")))
            #expect(other.status == .unauthorized, "\(other.text)")
            // pushhub token and the SDKs lowercase scheme, host and hub name, and keep the id as it is.
            let mixed: HTTPFields = [.authorization: IngressFixture.token("/MyHub/installations/Phone-1")]
            let phone = try await client.execute(
                uri: "/myhub/installations/Phone-1", method: .put, headers: mixed.withContentType("application/json"),
                body: ByteBuffer(string: Self.installationJSON("Phone-1", "https://db5.notify.windows.com/?token=p")))
            #expect(phone.status == .ok, "\(phone.text)")
        }
    }

    @Test("an unknown hub is refused exactly as a bad token is")
    func unknownHubs() async throws {
        let fixture = try await IngressFixture()
        try await fixture.app.test(.router) { client in
            let unknown = try await client.execute(
                uri: "/nohub/installations/x", method: .get, headers: [.authorization: IngressFixture.token("/nohub")])
            let badToken = try await client.execute(
                uri: "/myhub/installations/x", method: .get,
                headers: [.authorization: IngressFixture.token("/myhub", key: String(repeating: "x", count: 44))])
            let unknownRule = try await client.execute(
                uri: "/myhub/installations/x", method: .get, headers: [.authorization: IngressFixture.token("/myhub", name: "NoSuchRule")])
            #expect(unknown.status == .unauthorized)
            #expect(unknown.text == badToken.text && badToken.text == unknownRule.text, "\(unknown.text) / \(badToken.text) / \(unknownRule.text)")
            let none = try await client.execute(uri: "/nohub/installations/x", method: .get)
            #expect(none.status == .unauthorized)
        }
    }

    @Test(
        "URL handles outside the hub's allowed hosts are refused at registration, naming the field",
        arguments: [
            ("wns", "https://attacker.example.com/channel", "pushChannel"),
            ("wns", "http://127.0.0.1:9/channel", "pushChannel"),
            ("wns", "https://user:pw@db5.notify.windows.com/x", "pushChannel"),
            ("browser", "https://127.0.0.1:9/push", "pushChannel"),
            ("browser", "https://10.1.2.3/push", "pushChannel"),
            ("browser", "https://2130706433/push", "pushChannel"),
            ("browser", "https://[::1]/push", "pushChannel"),
            ("browser", "http://push.example.com/x", "pushChannel"),
            ("wns", "https://evil.example%00.notify.windows.com/x", "pushChannel"),
            ("browser", "https://[::1%251]/push", "pushChannel"),
            ("browser", "https://[fec0::1]/push", "pushChannel"),
            ("browser", "https://localhost/push", "pushChannel"),
        ])
    func endpointsRefused(_ platform: String, _ channel: String, _ field: String) async throws {
        let fixture = try await IngressFixture()
        let pushChannel =
            platform == "browser"
            ? #"{"endpoint":"\#(channel)","p256dh":"BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM","auth":"tBHItJI5svbpez7KI4CCXg"}"#
            : #""\#(channel)""#
        try await fixture.app.test(.router) { client in
            let response = try await client.execute(
                uri: "/myhub/installations/i1", method: .put, headers: IngressFixture.listenAccess.withContentType("application/json"),
                body: ByteBuffer(string: #"{"installationId":"i1","platform":"\#(platform)","pushChannel":\#(pushChannel)}"#))
            #expect(response.status == .badRequest, "\(response.text)")
            #expect(response.text.contains(field), "\(response.text)")
            #expect(try await fixture.store.installation(hub: "myhub", id: "i1") == nil, "nothing written")
        }
    }

    @Test("a hub's configuration can allow more hosts, and public https Web Push endpoints need no listing")
    func endpointsAllowed() async throws {
        var hubs = IngressFixture.hubs
        hubs.hubs[0].endpoints = EndpointPolicy(wnsHosts: ["*.notify.windows.com", "wns.internal.example:8443"], webPushHosts: [])
        let fixture = try await IngressFixture(hubs: hubs)
        try await fixture.app.test(.router) { client in
            for (id, channel) in [("i1", "https://wns.internal.example:8443/c"), ("i2", "https://bn3p.notify.windows.com/?token=a")] {
                let response = try await client.execute(
                    uri: "/myhub/installations/\(id)", method: .put, headers: IngressFixture.listenAccess.withContentType("application/json"),
                    body: ByteBuffer(string: Self.installationJSON(id, channel)))
                #expect(response.status == .ok, "\(channel): \(response.text)")
            }
        }
    }

    @Test("userId is bounded like a tag: no commas or braces, at most 120 characters; identity providers' ids pass")
    func userIds() async throws {
        let fixture = try await IngressFixture()
        try await fixture.app.test(.router) { client in
            let accepted = try await client.execute(
                uri: "/myhub/installations/u0", method: .put, headers: IngressFixture.listenAccess.withContentType("application/json"),
                body: ByteBuffer(string: #"{"installationId":"u0","platform":"apns","pushChannel":"aaaa","userId":"auth0|5f7c+x@example.com"}"#))
            #expect(accepted.status == .ok, "\(accepted.text)")
            for userId in ["a,b", "a}b", "a b", String(repeating: "u", count: 121)] {
                let response = try await client.execute(
                    uri: "/myhub/installations/u1", method: .put, headers: IngressFixture.listenAccess.withContentType("application/json"),
                    body: ByteBuffer(string: #"{"installationId":"u1","platform":"apns","pushChannel":"aaaa","userId":"\#(userId)"}"#))
                #expect(response.status == .badRequest, "\(response.text)")
                #expect(response.text.contains("userId"), "\(response.text)")
            }
        }
    }

    @Test("control characters in an installation's handle, keys, template names, header values and expiry are 400s naming the field")
    func controlCharacters() async throws {
        let fixture = try await IngressFixture()
        // As JSON escapes: U+0000 (which PostgreSQL refuses in text, once a 503), a line break, DEL.
        let cases: [(body: String, field: String)] = [
            (#"{"installationId":"c1","platform":"apns","pushChannel":"aa\u0000bb"}"#, "pushChannel"),
            (#"{"installationId":"c1","platform":"apns","pushChannel":"aa\nbb"}"#, "pushChannel"),
            (#"{"installationId":"c1","platform":"apns","pushChannel":"\#(String(repeating: "a", count: 2049))"}"#, "pushChannel"),
            (#"{"installationId":"c1","platform":"apns","pushChannel":"aa","templates":{"t\u0000":{"body":"{}"}}}"#, "templates"),
            (
                #"{"installationId":"c1","platform":"apns","pushChannel":"aa","templates":{"t":{"body":"{\"a\":\"\u0000\"}"}}}"#,
                "templates.t.body"
            ),
            (
                #"{"installationId":"c1","platform":"apns","pushChannel":"aa","templates":{"t":{"body":"{}","headers":{"x":"a\r\nb: c"}}}}"#,
                "templates.t.headers.x"
            ),
            (
                #"{"installationId":"c1","platform":"apns","pushChannel":"aa","templates":{"t":{"body":"{}","expiry":"a\u007f"}}}"#,
                "templates.t.expiry"
            ),
            (
                #"{"installationId":"c1","platform":"browser","pushChannel":{"endpoint":"https://fcm.googleapis.com/fcm/send/x","p256dh":"a\u0001","auth":"b"}}"#,
                "p256dh"
            ),
        ]
        try await fixture.app.test(.router) { client in
            for (body, field) in cases {
                let response = try await client.execute(
                    uri: "/myhub/installations/c1", method: .put, headers: IngressFixture.listenAccess.withContentType("application/json"),
                    body: ByteBuffer(string: body))
                #expect(response.status == .badRequest, "\(field): \(response.text)")
                #expect(response.text.contains(field), "\(field): \(response.text)")
            }
            // A body's own line breaks and tabs are a template's to have.
            let accepted = try await client.execute(
                uri: "/myhub/installations/c1", method: .put, headers: IngressFixture.listenAccess.withContentType("application/json"),
                body: ByteBuffer(
                    string: #"{"installationId":"c1","platform":"apns","pushChannel":"aa","#
                        + #""templates":{"t":{"body":"{\n\t\"aps\":{\"alert\":\"$(m)\"}}"}}}"#))
            #expect(accepted.status == .ok, "\(accepted.text)")
            #expect(try await fixture.store.installation(hub: "myhub", id: "c1")?.templates["t"]?.body.hasPrefix("{\n\t") == true)
        }
    }

    @Test("an APNs template expiry without expressions must be a time APNs takes (1970 to 9999); an expression is filled per send")
    func templateExpiries() async throws {
        let fixture = try await IngressFixture()
        @Sendable func installation(_ expiry: String) -> String {
            #"{"installationId":"e1","platform":"apns","pushChannel":"aa","templates":{"t":{"body":"{}","expiry":"\#(expiry)"}}}"#
        }
        try await fixture.app.test(.router) { client in
            for expiry in ["9223372036854775807", "-1", "253402300800", "tomorrow", "10000-01-01T00:00:00Z"] {
                let response = try await client.execute(
                    uri: "/myhub/installations/e1", method: .put, headers: IngressFixture.listenAccess.withContentType("application/json"),
                    body: ByteBuffer(string: installation(expiry)))
                #expect(response.status == .badRequest, "\(expiry): \(response.text)")
                #expect(response.text.contains("templates.t.expiry") && response.text.contains("1970 to 9999"), "\(expiry): \(response.text)")
            }
            for expiry in ["0", "253402300799", "2030-01-01T00:00:00Z", "$(exp)", "{$(day) + 'T00:00:00Z'}"] {
                let response = try await client.execute(
                    uri: "/myhub/installations/e1", method: .put, headers: IngressFixture.listenAccess.withContentType("application/json"),
                    body: ByteBuffer(string: installation(expiry)))
                #expect(response.status == .ok, "\(expiry): \(response.text)")
            }
        }
    }

    @Test("a Listen key cannot give a device an app user's username: tag (in any case, on tags, templates or a patch); Manage can, and it may stay")
    func userTagsNeedManage() async throws {
        let fixture = try await IngressFixture()
        let listen = IngressFixture.listenAccess.withContentType("application/json")
        @Sendable func installation(_ tags: String, templateTags: String = "[]") -> ByteBuffer {
            ByteBuffer(
                string: #"{"installationId":"u1","platform":"apns","pushChannel":"aa","tags":\#(tags),"#
                    + #""templates":{"t":{"body":"{}","tags":\#(templateTags)}}}"#)
        }
        try await fixture.app.test(.router) { client in
            for (tags, templateTags) in [(#"["username:alice"]"#, "[]"), (#"["news","username:alice"]"#, "[]"), ("[]", #"["username:alice"]"#)] {
                let refused = try await client.execute(
                    uri: "/myhub/installations/u1", method: .put, headers: listen, body: installation(tags, templateTags: templateTags))
                #expect(refused.status == .forbidden, "\(tags) \(templateTags): \(refused.text)")
                #expect(refused.text.contains("username:alice"), "\(refused.text)")
            }
            #expect(try await fixture.store.installation(hub: "myhub", id: "u1") == nil, "nothing written")
            let ordinary = try await client.execute(uri: "/myhub/installations/u1", method: .put, headers: listen, body: installation(#"["sports"]"#))
            #expect(ordinary.status == .ok, "\(ordinary.text)")
            // A patch that adds one is refused too; the installation is as it was.
            let patch = try await client.execute(
                uri: "/myhub/installations/u1", method: .patch, headers: IngressFixture.listenAccess.withContentType("application/json-patch+json"),
                body: ByteBuffer(string: #"[{"op":"add","path":"/tags","value":"username:bob"}]"#))
            #expect(patch.status == .forbidden, "\(patch.text)")
            #expect(try await fixture.store.installation(hub: "myhub", id: "u1")?.tags == ["sports"])
            // Manage may set it (an app's own backend), and the device may then write its
            // installation again with it.
            let managed = try await client.execute(
                uri: "/myhub/installations/u1", method: .put, headers: IngressFixture.fullAccess.withContentType("application/json"),
                body: installation(#"["username:alice"]"#))
            #expect(managed.status == .ok, "\(managed.text)")
            let again = try await client.execute(
                uri: "/myhub/installations/u1", method: .put, headers: listen, body: installation(#"["username:alice","news"]"#))
            #expect(again.status == .ok, "\(again.text)")
            let replaced = try await client.execute(
                uri: "/myhub/installations/u1", method: .patch, headers: IngressFixture.listenAccess.withContentType("application/json-patch+json"),
                body: ByteBuffer(string: #"[{"op":"replace","path":"/tags","value":["username:alice","weather"]}]"#))
            #expect(replaced.status == .ok, "a tag it has may stay in a patch too: \(replaced.text)")
            // Not on another device: a Listen key naming the id with a channel of its own.
            let taken = try await client.execute(
                uri: "/myhub/installations/u1", method: .put, headers: listen,
                body: ByteBuffer(string: #"{"installationId":"u1","platform":"apns","pushChannel":"bbbb","tags":["username:alice"]}"#))
            #expect(taken.status == .forbidden, "\(taken.text)")
            let movedByPatch = try await client.execute(
                uri: "/myhub/installations/u1", method: .patch, headers: IngressFixture.listenAccess.withContentType("application/json-patch+json"),
                body: ByteBuffer(
                    string: #"[{"op":"replace","path":"/pushChannel","value":"cccc"},{"op":"add","path":"/tags","value":"username:alice"}]"#))
            #expect(movedByPatch.status == .forbidden, "\(movedByPatch.text)")
            #expect(try await fixture.store.installation(hub: "myhub", id: "u1")?.pushChannel == "aa")
            // Registrations through the Atom API alike.
            let atom = try await client.execute(
                uri: "/myhub/registrations", method: .post, headers: RegistrationAPITests.atom,
                body: ByteBuffer(
                    string: RegistrationAPITests.entry(
                        RegistrationAPITests.description(
                            "AppleRegistrationDescription", "<Tags>news, username:carol</Tags><DeviceToken>ABCDEF0123</DeviceToken>"))))
            #expect(atom.status == .forbidden, "\(atom.text)")
        }
    }

    @Test("ids the store would refuse are 400s naming the field: a registration id over 256 characters, a template name over 200 bytes")
    func overlongIds() async throws {
        let fixture = try await IngressFixture()
        try await fixture.app.test(.router) { client in
            for (id, status) in [(String(repeating: "r", count: 256), HTTPResponse.Status.ok), (String(repeating: "r", count: 257), .badRequest)] {
                let put = try await client.execute(
                    uri: "/myhub/registrations/\(id)", method: .put, headers: IngressFixture.fullAccess.withContentType("application/atom+xml"),
                    body: ByteBuffer(string: Self.gcmAtom))
                #expect(put.status == status, "\(id.count): \(put.text)")
                if status == .badRequest { #expect(put.text.contains("RegistrationId"), "\(put.text)") }
            }
            // 101 two-byte characters: 101 characters, 202 bytes.
            let name = String(repeating: "\u{E9}", count: 101)
            let response = try await client.execute(
                uri: "/myhub/installations/t1", method: .put, headers: IngressFixture.listenAccess.withContentType("application/json"),
                body: ByteBuffer(string: #"{"installationId":"t1","platform":"apns","pushChannel":"aa","templates":{"\#(name)":{"body":"{}"}}}"#))
            #expect(response.status == .badRequest && response.text.contains("templates"), "\(response.text)")
        }
    }

    @Test("reads by a handle, user or implicit tag holding U+0000 are 400s naming the parameter, not 503s")
    func readsWithNUL() async throws {
        let fixture = try await IngressFixture()
        try await fixture.app.test(.router) { client in
            for (uri, field) in [
                ("/myhub/registrations?$filter=DeviceToken%20eq%20'a%00b'", "$filter"),
                ("/myhub/installations?userId=a%00b", "userId"),
                ("/myhub/installations?tag=$UserId:%7Ba%00b%7D", "tag"),
            ] {
                let response = try await client.execute(uri: uri, method: .get, headers: IngressFixture.fullAccess)
                #expect(response.status == .badRequest && response.text.contains(field), "\(uri): \(response.status) \(response.text)")
            }
        }
    }

    @Test("a Windows send whose body holds U+0000 is a 400 naming the body")
    func windowsBodyNUL() async throws {
        let fixture = try await MessagingFixture()
        try await fixture.app.test(.router) { client in
            var headers = IngressFixture.fullAccess.withContentType("application/octet-stream")
            headers[HTTPField.Name("ServiceBusNotification-Format")!] = "windows"
            headers[HTTPField.Name("X-WNS-Type")!] = "wns/raw"
            let response = try await client.execute(
                uri: "/myhub/messages", method: .post, headers: headers, body: ByteBuffer(bytes: Array("raw\u{0}text".utf8)))
            #expect(response.status == .badRequest && response.text.contains("body"), "\(response.status) \(response.text)")
        }
    }

    @Test("Location comes from the configured public URL, and X-Forwarded-Proto only behind a trusted proxy")
    func locations() async throws {
        var forwarded = IngressFixture.fullAccess
        forwarded[HTTPField.Name("X-Forwarded-Proto")!] = "javascript"
        let headers = forwarded
        let plain = try await IngressFixture()
        try await plain.app.test(.router) { client in
            let response = try await client.execute(uri: "/myhub/registrationIDs", method: .post, headers: headers)
            #expect(response.headers[.location]?.hasPrefix("http://localhost/myhub/registrations/") == true, "\(response.headers)")
        }
        var configured = IngressFixture.hubs
        configured.publicBaseURL = "https://push.example.com/"
        let fixture = try await IngressFixture(hubs: configured)
        try await fixture.app.test(.router) { client in
            let response = try await client.execute(uri: "/myhub/registrationIDs", method: .post, headers: headers)
            #expect(response.headers[.location]?.hasPrefix("https://push.example.com/myhub/registrations/") == true, "\(response.headers)")
        }
    }

    @Test(
        "bodies past the parsers' limits are 400s that name the limit",
        arguments: [
            (
                "/myhub/registrations", HTTPRequest.Method.post, "application/atom+xml",
                String(repeating: "<a>", count: 40) + String(repeating: "</a>", count: 40), "nests at most 16"
            ),
            ("/myhub/registrations", .post, "application/atom+xml", "<r>" + String(repeating: "<a/>", count: 1001) + "</r>", "at most 1000 elements"),
            ("/myhub/installations/i1", .put, "application/json", String(repeating: "[", count: 5000), "JSON nests at most 32"),
            (
                "/myhub/installations/i1", .patch, "application/json-patch+json",
                "[" + Array(repeating: #"{"op":"add","path":"/tags","value":"a"}"#, count: 101).joined(separator: ",") + "]", "at most 100 operations"
            ),
            (
                "/myhub/installations/i1", .put, "application/json",
                #"{"installationId":"i1","platform":"apns","pushChannel":"aaaa","templates":{"t":{"body":"{\"a\":\""#
                    + String(repeating: "$(p)", count: 300) + #"\"}"}}}"#,
                "at most 256 expressions"
            ),
            // Escaped starts count too, and failed starts cannot make the work quadratic.
            (
                "/myhub/installations/i1", .put, "application/json",
                #"{"installationId":"i1","platform":"apns","pushChannel":"aaaa","templates":{"t":{"body":"{\"a\":\""#
                    + String(repeating: #".\\u0028"#, count: 1500) + String(repeating: "a", count: 1100) + #"\"}"}}}"#,
                "at most 256 expressions"
            ),
            (
                "/myhub/registrations", .post, "application/atom+xml", #"<!DOCTYPE x [<!ENTITY a "aaaa">]><entry/>"#,
                "must not declare a document type"
            ),
        ] as [(String, HTTPRequest.Method, String, String, String)])
    func parserLimits(_ uri: String, _ method: HTTPRequest.Method, _ contentType: String, _ body: String, _ reason: String) async throws {
        let fixture = try await IngressFixture()
        _ = try await fixture.store.upsertInstallation(Installation(installationId: "i1", platform: .apns, pushChannel: "aaaa"), hub: "myhub")
        try await fixture.app.test(.router) { client in
            let response = try await client.execute(
                uri: uri, method: method, headers: IngressFixture.fullAccess.withContentType(contentType), body: ByteBuffer(string: body))
            #expect(response.status == .badRequest, "\(response.text.prefix(300))")
            #expect(response.text.contains(reason), "\(response.text.prefix(300))")
        }
    }

    @Test("rich payloads: only media is kept, served as a sandboxed download, never kept for a refused send, and within a quota")
    func richPayloads() async throws {
        let fixture = try await MessagingFixture(richQuota: RichPayloadQuota(maximumCount: 2, maximumBytes: 1000))
        for name in ["alice", "bob"] { try await fixture.store.setUser(name: name, passwordHash: hashPassword("\(name)-secret")) }
        let alice = basic("alice", "alice-secret")
        try await fixture.app.test(.router) { client in
            var html = alice
            html[.contentType] = "text/html"
            let page = try await client.execute(
                uri: "/api/notifications/rich?to_tag=bob", method: .post, headers: html, body: ByteBuffer(string: "<script>x</script>"))
            #expect(page.status == .unsupportedMediaType, "\(page.text)")

            var png = alice
            png[.contentType] = "image/png"
            // A send that is refused (an unknown pns) keeps nothing: the first id stays unused.
            let refused = try await client.execute(
                uri: "/api/notifications/rich?to_tag=bob&pns=wns", method: .post, headers: png, body: ByteBuffer(string: "png"))
            #expect(refused.status == .badRequest)
            #expect(try await fixture.store.richPayload(hub: "myhub", id: 1, retention: 3600) == nil)

            let sent = try await client.execute(
                uri: "/api/notifications/rich?to_tag=bob", method: .post, headers: png, body: ByteBuffer(string: "png-bytes"))
            #expect(sent.status == .ok, "\(sent.text)")
            let richId = try #require(try JSONDecoder().decode([String: String].self, from: Data(buffer: sent.body))["richId"])
            let fetched = try await client.execute(uri: "/api/notifications/\(richId)", method: .get, headers: basic("bob", "bob-secret"))
            #expect(fetched.status == .ok)
            #expect(fetched.headers[.contentType] == "image/png")
            #expect(fetched.headers[.xContentTypeOptions] == "nosniff")
            #expect(fetched.headers[.contentDisposition]?.hasPrefix("attachment") == true)
            #expect(fetched.headers[.contentSecurityPolicy]?.contains("sandbox") == true)

            // The quota: two payloads, or 1,000 bytes, per sender.
            let second = try await client.execute(
                uri: "/api/notifications/rich?to_tag=bob", method: .post, headers: png, body: ByteBuffer(string: "more"))
            #expect(second.status == .ok)
            let third = try await client.execute(
                uri: "/api/notifications/rich?to_tag=bob", method: .post, headers: png, body: ByteBuffer(string: "more"))
            #expect(third.status == .tooManyRequests, "\(third.text)")
            var bobPNG = basic("bob", "bob-secret")
            bobPNG[.contentType] = "image/png"
            let large = try await client.execute(
                uri: "/api/notifications/rich?to_tag=alice", method: .post, headers: bobPNG,
                body: ByteBuffer(string: String(repeating: "x", count: 1001)))
            #expect(large.status == .tooManyRequests, "\(large.text)")
        }
    }

    /// Kafka as it fails a send: wholly, or some of its batches (then the request too).
    struct RefusingPublisher: NotificationPublisher {
        var partly: Bool
        struct Refused: Error {}

        func publish(_ request: SendRequest) async throws { throw Refused() }
        func publish(_ request: SendRequest, resolved targets: [Platform: [DeliveryBatch.Target]], recorded: Bool) async throws {
            throw partly ? PartlyPublished(acknowledged: 1, underlying: Refused()) : Refused()
        }
    }

    @Test(
        "a rich send Kafka refused leaves no payload; one of which some batches went out keeps its payload for the devices that have the push, and its send",
        arguments: [false, true])
    func richPayloadOfRefusedSends(partly: Bool) async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-\(UUID().uuidString).sqlite").path
        let store = try await SQLRegistrationStore.open(SQLiteDatabase(path: path))
        for name in ["alice", "bob"] { try await store.setUser(name: name, passwordHash: hashPassword("\(name)-secret")) }
        _ = try await store.upsertRegistration(
            Registration(
                registrationId: try await store.issueRegistrationId(hub: "myhub"), hub: "myhub", format: .apple,
                handle: String(repeating: "0b", count: 32), tags: ["username:bob"], updatedAt: Date()),
            ifMatch: nil)
        let app = Application(
            router: try buildIngressRouter(hubs: IngressFixture.hubs, stores: IngressStores(store), publisher: RefusingPublisher(partly: partly)))
        try await app.test(.router) { client in
            let sent = try await client.execute(
                uri: "/api/notifications/rich?to_tag=bob", method: .post, headers: basic("alice", "alice-secret").withContentType("image/png"),
                body: ByteBuffer(string: "png-bytes"))
            #expect(sent.status == .serviceUnavailable, "\(sent.text)")
            let kept = try await store.richPayload(hub: "myhub", id: 1, retention: 3600)
            #expect((kept != nil) == partly, "kept: \(kept != nil)")
            let sends = try await SQLiteDatabase(path: path).read { connection in
                try await connection.query("SELECT count(*) AS n FROM notifications WHERE hub = 'myhub'", []).first?.integer("n")
            }
            #expect(sends == (partly ? 1 : 0), "the send stays for recovery only when some of it went out")
            if partly {
                let fetched = try await client.execute(uri: "/api/notifications/1", method: .get, headers: basic("bob", "bob-secret"))
                #expect(fetched.status == .ok && String(buffer: fetched.body) == "png-bytes")
            }
        }
    }

    @Test("passwords are checked on all their bytes: a longer password than bcrypt reads is refused")
    func longPasswords() async throws {
        let fixture = try await IngressFixture()
        let password = String(repeating: "p", count: UserAuthenticator.maximumPasswordBytes)
        try await fixture.store.setUser(name: "alice", passwordHash: hashPassword(password))
        try await fixture.app.test(.router) { client in
            let exact = try await client.execute(uri: "/api/register", method: .post, headers: basic("alice", password))
            #expect(exact.status == .ok)
            let longer = try await client.execute(uri: "/api/register", method: .post, headers: basic("alice", password + "anything"))
            #expect(longer.status == .unauthorized, "bcrypt alone would accept it: it reads only the first 72 bytes")
        }
    }
    @Test("Atom bodies the fuzzer found crashing Foundation's XML parser (names that are not UTF-8) are 400s")
    func fuzzerFindings() async throws {
        let fixture = try await IngressFixture()
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let folder = root.appendingPathComponent("Fuzz/regressions/atom")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        #expect(!files.isEmpty)
        try await fixture.app.test(.router) { client in
            for file in files {
                let body = try Data(contentsOf: folder.appendingPathComponent(file))
                let response = try await client.execute(
                    uri: "/myhub/registrations", method: .post, headers: IngressFixture.listenAccess.withContentType("application/atom+xml"),
                    body: ByteBuffer(bytes: body))
                #expect(response.status == .badRequest, "\(file): \(response.text.prefix(200))")
            }
            let latin = try await client.execute(
                uri: "/myhub/registrations", method: .post, headers: IngressFixture.listenAccess.withContentType("application/atom+xml"),
                body: ByteBuffer(string: #"<?xml version="1.0" encoding="UTF-16"?><entry/>"#))
            #expect(latin.status == .badRequest)
        }
    }
    @Test("a store that fails answers 503 with Retry-After, one that refuses for good 400 without; never a bare 500, never its SQL")
    func storeFailures() async throws {
        let fixture = try await IngressFixture()
        try await fixture.store.setUser(name: "alice", passwordHash: hashPassword("alice-secret"))
        // Reading installation `x` fails as an unreachable database does, `taken` as a unique-key conflict.
        let failing = InterceptedStore(inner: fixture.store) { read in
            if case .registrations(_, .handle("refused")) = read {
                throw SQLError(message: "value out of range in: SELECT * FROM registrations", isPermanent: true, isServerAnswer: true)
            }
            guard case .installation(_, let id) = read else { return }
            if id == "x" { throw SQLError(message: "could not connect in: SELECT * FROM installations") }
            if id == "taken" { throw SQLError(message: "UNIQUE constraint failed in: INSERT …", isConstraintViolation: true) }
            if id == "refused" {
                throw SQLError(message: "statement too complex in: SELECT * FROM installations", isPermanent: true, isServerAnswer: true)
            }
        }
        // Registrations and users only: the intercepting store keeps no outcomes, schedules or rich payloads.
        let stores = IngressStores(registrations: failing, users: failing, outcomes: nil, schedules: nil, richPayloads: nil)
        let app = Application(router: try buildIngressRouter(hubs: IngressFixture.hubs, stores: stores))
        try await app.test(.router) { client in
            let response = try await client.execute(uri: "/myhub/installations/x", method: .get, headers: IngressFixture.listenAccess)
            #expect(response.status == .serviceUnavailable, "\(response.text)")
            #expect(response.headers[.retryAfter] == "5")
            #expect(!response.text.contains("SELECT"), "\(response.text)")
            let taken = try await client.execute(uri: "/myhub/installations/taken", method: .get, headers: IngressFixture.listenAccess)
            #expect(taken.status == .conflict, "\(taken.text)")
            let refused = try await client.execute(uri: "/myhub/installations/refused", method: .get, headers: IngressFixture.listenAccess)
            #expect(refused.status == .badRequest, "\(refused.text)")
            #expect(refused.headers[.retryAfter] == nil)
            #expect(refused.text.contains("would refuse it again") && !refused.text.contains("SELECT"), "\(refused.text)")
            // The app backend answers the same in its JSON.
            let api = try await client.execute(uri: "/api/register?handle=refused", method: .post, headers: basic("alice", "alice-secret"))
            #expect(api.status == .badRequest && api.headers[.retryAfter] == nil, "\(api.text)")
            #expect(api.text.hasPrefix(#"{"error":"#) && api.text.contains("would refuse it again") && !api.text.contains("SELECT"), "\(api.text)")
        }
    }
}
