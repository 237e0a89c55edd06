import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import PushConfiguration
import PushIngress
import PushModel
import PushStore
import Synchronization
import Testing

/// The web console through HTTP: sign-in, its cookie and CSRF token, the rights of each key,
/// and hostile input. The pages as a person sees them are tested in a browser
/// (`ConsoleBrowserTests`).
@Suite("Web console")
struct ConsoleTests {
    static let form: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]

    static func encoded(_ fields: [(String, String)]) -> ByteBuffer {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return ByteBuffer(
            string: fields.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")" }.joined(separator: "&"))
    }

    static func connectionString(key: String = IngressFixture.fullKey, name: String = "DefaultFullSharedAccessSignature") -> String {
        "Endpoint=sb://localhost/;SharedAccessKeyName=\(name);SharedAccessKey=\(key)"
    }

    /// Signs in with a key and answers the session cookie (`name=value`).
    static func signIn(
        _ client: some TestClientProtocol, hub: String = "myhub", key: String = IngressFixture.fullKey,
        name: String = "DefaultFullSharedAccessSignature"
    ) async throws -> String {
        try await client.execute(
            uri: "/console/signin", method: .post, headers: form,
            body: encoded([("method", "key"), ("hub", hub), ("connectionString", connectionString(key: key, name: name))])
        ) { response in
            #expect(response.status == .seeOther, "\(response.text)")
            let cookie = try #require(response.headers[.setCookie])
            return String(cookie.split(separator: ";")[0])
        }
    }

    static func csrf(in html: String) -> String? {
        guard let range = html.range(of: #"name="csrf" value=""#) else { return nil }
        return String(html[range.upperBound...].prefix { $0 != "\"" })
    }

    static func get(_ client: some TestClientProtocol, _ uri: String, cookie: String) async throws -> (HTTPResponse.Status, String) {
        try await client.execute(uri: uri, method: .get, headers: [.cookie: cookie]) { ($0.status, $0.text) }
    }

    @Test("a Manage key signs in: the cookie is HttpOnly, SameSite=Strict and for /console only; every page answers")
    func signInWithManageKey() async throws {
        let fixture = try await IngressFixture()
        try await fixture.app.test(.router) { client in
            try await client.execute(uri: "/console", method: .get) { response in
                #expect(response.status == .seeOther)
                #expect(response.headers[.location] == "/console/signin")
            }
            try await client.execute(
                uri: "/console/signin", method: .post, headers: Self.form,
                body: Self.encoded([("method", "key"), ("hub", "myhub"), ("connectionString", Self.connectionString())])
            ) { response in
                let cookie = try #require(response.headers[.setCookie])
                #expect(cookie.hasPrefix("pushhub_console="))
                for attribute in ["HttpOnly", "SameSite=Strict", "Path=/console", "Max-Age=28800"] {
                    #expect(cookie.contains(attribute), "\(attribute) in \(cookie)")
                }
                #expect(!cookie.contains(IngressFixture.fullKey), "the key is not in the cookie")
            }
            let cookie = try await Self.signIn(client)
            for page in ["overview", "notifications", "devices", "send"] {
                let (status, html) = try await Self.get(client, "/console/\(page)", cookie: cookie)
                #expect(status == .ok, "\(page): \(html.prefix(300))")
                #expect(html.contains(#"aria-current="page""#), "\(page) marks its link")
            }
            try await client.execute(uri: "/console/overview", method: .get, headers: [.cookie: cookie]) { response in
                let policy = try #require(response.headers[.contentSecurityPolicy])
                #expect(policy.contains("script-src 'self'") && policy.contains("frame-ancestors 'none'"))
                #expect(response.headers[.cacheControl] == "no-store")
            }
        }
    }

    @Test("wrong keys, unknown hubs, cross-site sign-ins, tampered and expired cookies are refused alike")
    func refusals() async throws {
        let clock = SendRecoveryTests.TestClock()
        let fixture = try await IngressFixture(now: { clock.now })
        try await fixture.app.test(.router) { client in
            for (hub, key) in [("myhub", String(repeating: "x", count: 44)), ("nohub", IngressFixture.fullKey)] {
                try await client.execute(
                    uri: "/console/signin", method: .post, headers: Self.form,
                    body: Self.encoded([("method", "key"), ("hub", hub), ("connectionString", Self.connectionString(key: key))])
                ) { response in
                    #expect(response.status == .unauthorized)
                    #expect(response.text.contains("The hub, or the key or password, is not right."))
                    #expect(response.headers[.setCookie] == nil)
                }
            }
            var crossSite = Self.form
            crossSite[HTTPField.Name("Sec-Fetch-Site")!] = "cross-site"
            try await client.execute(
                uri: "/console/signin", method: .post, headers: crossSite,
                body: Self.encoded([("method", "key"), ("hub", "myhub"), ("connectionString", Self.connectionString())])
            ) { response in
                #expect(response.status == .forbidden)
                #expect(response.headers[.setCookie] == nil)
            }
            let cookie = try await Self.signIn(client)
            var tampered = Array(cookie)
            let index = tampered.firstIndex(of: ".")! - 3
            tampered[index] = tampered[index] == "A" ? "B" : "A"
            for bad in [String(tampered), "pushhub_console=" + String(repeating: "a", count: 5_000), "pushhub_console=..", "pushhub_console="] {
                try await client.execute(uri: "/console/overview", method: .get, headers: [.cookie: bad]) { response in
                    #expect(response.status == .seeOther, "\(bad.prefix(60))")
                    #expect(response.headers[.location] == "/console/signin")
                }
            }
            clock.advance(8 * 3_600 + 1)
            try await client.execute(uri: "/console/overview", method: .get, headers: [.cookie: cookie]) { response in
                #expect(response.status == .seeOther, "a session ends after its eight hours")
            }
        }
    }

    @Test("a Listen key sees neither devices nor sends; a Send key sees sends but not devices")
    func rights() async throws {
        let fixture = try await IngressFixture()
        try await fixture.app.test(.router) { client in
            let listen = try await Self.signIn(client, key: IngressFixture.listenKey, name: "DefaultListenSharedAccessSignature")
            let (status, overview) = try await Self.get(client, "/console/overview", cookie: listen)
            #expect(status == .ok)
            #expect(overview.contains("This key has the Listen right only"))
            #expect(!overview.contains("Devices</h2>") && !overview.contains("Sends</h2>"))
            for page in ["notifications", "devices", "send", "live", "notifications/x", "devices/x", "live/charts"] {
                let (refused, html) = try await Self.get(client, "/console/\(page)", cookie: listen)
                #expect(refused == .forbidden, "\(page)")
                #expect(html.contains("lacks") || page == "live/charts")
            }
            #expect(!overview.contains("/console/notifications") && !overview.contains("/console/devices"), "no links to what it may not see")

            let send = try await Self.signIn(client, key: IngressFixture.sendKey, name: "SendOnly")
            let (status1, _) = try await Self.get(client, "/console/notifications", cookie: send)
            #expect(status1 == .ok)
            let (status2, _) = try await Self.get(client, "/console/send", cookie: send)
            #expect(status2 == .ok)
            let (status3, _) = try await Self.get(client, "/console/devices", cookie: send)
            #expect(status3 == .forbidden)
        }
    }

    @Test("deleting a device needs the session's CSRF token; with it the installation is gone")
    func csrfOnDelete() async throws {
        let fixture = try await IngressFixture()
        _ = try await fixture.store.upsertInstallation(
            Installation(installationId: "phone-1", platform: .apns, pushChannel: String(repeating: "a", count: 64), tags: ["sports"]), hub: "myhub")
        try await fixture.app.test(.router) { client in
            let cookie = try await Self.signIn(client)
            let (status, page) = try await Self.get(client, "/console/devices/installation.phone-1", cookie: cookie)
            #expect(status == .ok, "\(page.prefix(500))")
            let token = try #require(Self.csrf(in: page))
            for wrong in [nil, "", String(repeating: "A", count: 43), token + "x"] {
                try await client.execute(
                    uri: "/console/devices/installation.phone-1/delete", method: .post, headers: Self.form.merging([.cookie: cookie]),
                    body: Self.encoded(wrong.map { [("csrf", $0)] } ?? [])
                ) { response in
                    #expect(response.status == .forbidden, "\(wrong ?? "none")")
                }
            }
            #expect(try await fixture.store.installation(hub: "myhub", id: "phone-1") != nil, "nothing deleted without the token")
            // Another session's token is not this one's.
            let other = try await Self.signIn(client)
            let otherToken = try #require(Self.csrf(in: try await Self.get(client, "/console/devices/installation.phone-1", cookie: other).1))
            #expect(otherToken != token)
            try await client.execute(
                uri: "/console/devices/installation.phone-1/delete", method: .post, headers: Self.form.merging([.cookie: cookie]),
                body: Self.encoded([("csrf", otherToken)])
            ) { response in
                #expect(response.status == .forbidden)
            }
            try await client.execute(
                uri: "/console/devices/installation.phone-1/delete", method: .post, headers: Self.form.merging([.cookie: cookie]),
                body: Self.encoded([("csrf", token)])
            ) { response in
                #expect(response.status == .seeOther)
                #expect(response.headers[.location] == "/console/devices?deleted=1")
            }
            #expect(try await fixture.store.installation(hub: "myhub", id: "phone-1") == nil)
            let (_, after) = try await Self.get(client, "/console/devices?deleted=1", cookie: cookie)
            #expect(after.contains("The device was deleted."))
            // Deleting what is not there says so, and claims nothing.
            try await client.execute(
                uri: "/console/devices/installation.phone-1/delete", method: .post, headers: Self.form.merging([.cookie: cookie]),
                body: Self.encoded([("csrf", token)])
            ) { response in
                #expect(response.status == .notFound)
                #expect(!response.text.contains("deleted"))
            }
        }
    }

    @Test("device search by tag expression, platform, user and handle prefix; what devices hold is escaped; bad input is named")
    func deviceSearch() async throws {
        let fixture = try await IngressFixture()
        let hostile = "<script>alert(1)</script>"
        _ = try await fixture.store.upsertInstallation(
            Installation(
                installationId: "ios-1", userId: "alice", platform: .apns, pushChannel: "aa11" + String(repeating: "0", count: 60), tags: ["sports"],
                templates: ["alert": Template(body: #"{"aps":{"alert":"\#(hostile)"}}"#)]),
            hub: "myhub")
        _ = try await fixture.store.upsertInstallation(
            Installation(installationId: "android-1", userId: "bob", platform: .fcmv1, pushChannel: "bb22-token", tags: ["sports", "politics"]),
            hub: "myhub")
        try await fixture.app.test(.router) { client in
            let cookie = try await Self.signIn(client)
            let cases: [(String, [String])] = [
                ("tags=sports", ["ios-1", "android-1"]),
                ("tags=sports+%26%26+%21politics", ["ios-1"]),
                ("platform=fcm", ["android-1"]),
                ("user=alice", ["ios-1"]),
                ("handle=bb2", ["android-1"]),
                ("tags=sports&platform=apns&handle=aa1", ["ios-1"]),
                ("handle=zz", []),
            ]
            for (query, expected) in cases {
                let (status, html) = try await Self.get(client, "/console/devices?\(query)", cookie: cookie)
                #expect(status == .ok, "\(query)")
                for id in ["ios-1", "android-1"] {
                    #expect(html.contains("installation.\(id)</a>") == expected.contains(id), "\(query): \(id)")
                }
            }
            let (_, device) = try await Self.get(client, "/console/devices/installation.ios-1", cookie: cookie)
            #expect(device.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "a template is shown, escaped")
            #expect(!device.contains(hostile))
            for (query, field) in [
                ("tags=%28%28a", "tags:"), ("platform=nokia", "platform:"), ("user=" + String(repeating: "u", count: 300), "user:"),
            ] {
                let (status, html) = try await Self.get(client, "/console/devices?\(query)", cookie: cookie)
                #expect(status == .badRequest, "\(query)")
                #expect(html.contains(field), "\(query) names \(field)")
            }
            let (status, _) = try await Self.get(client, "/console/devices?" + (0..<40).map { "f\($0)=1" }.joined(separator: "&"), cookie: cookie)
            #expect(status == .badRequest, "too many fields")
        }
    }

    @Test("the test send's check answers with the API's own checks, naming the field")
    func sendCheck() async throws {
        let fixture = try await IngressFixture()
        try await fixture.app.test(.router) { client in
            let cookie = try await Self.signIn(client)
            let token = try #require(Self.csrf(in: try await Self.get(client, "/console/send", cookie: cookie).1))
            let cases: [([(String, String)], Bool, String)] = [
                ([("format", "apple"), ("payload", #"{"aps":{"alert":"hi"}}"#)], true, "Looks right"),
                ([("format", "apple"), ("payload", "[1]")], false, "body"),
                ([("format", "apple"), ("payload", "{\"a\":\"" + String(repeating: "x", count: 5_000) + "\"}")], false, "4096"),
                ([("format", "nokia"), ("payload", "{}")], false, "ServiceBusNotification-Format"),
                ([("format", "windows"), ("payload", "<toast/>")], false, "X-WNS-Type"),
                ([("format", "windows"), ("headers", "X-WNS-Type: wns/toast"), ("payload", "<toast/>")], true, "Looks right"),
                ([("format", "apple"), ("payload", "{}"), ("tags", "((a")], false, "ServiceBusNotification-Tags"),
                ([("format", "apple"), ("payload", "{}"), ("devices", (1...11).map { "d\($0)" }.joined(separator: "\n"))], false, "devices"),
                ([("format", "apple"), ("payload", "{}"), ("headers", "no colon here")], false, "headers"),
            ]
            for (fields, ok, mentions) in cases {
                try await client.execute(
                    uri: "/console/send/check", method: .post, headers: Self.form.merging([.cookie: cookie]),
                    body: Self.encoded([("csrf", token)] + fields)
                ) { response in
                    #expect(response.status == .ok)
                    let answer = try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any]
                    #expect(answer?["ok"] as? Bool == ok, "\(fields.first!.1): \(response.text)")
                    #expect((answer?["message"] as? String)?.contains(mentions) == true, "\(response.text) mentions \(mentions)")
                }
            }
            // Without Kafka the test send itself is refused plainly.
            try await client.execute(
                uri: "/console/send", method: .post, headers: Self.form.merging([.cookie: cookie]),
                body: Self.encoded([("csrf", token), ("format", "apple"), ("payload", "{}")])
            ) { response in
                #expect(response.status == .serviceUnavailable)
            }
        }
    }

    @Test("console accounts sign in with their password, on their hubs only; a replaced key ends its sessions; off means 404")
    func accountsAndRotation() async throws {
        var hubs = IngressFixture.hubs
        hubs.console = ConsoleConfiguration(
            sessionSecret: String(repeating: "s", count: 40),
            accounts: [.init(name: "ops", passwordHash: hashPassword("a long password"), hubs: ["myhub"])])
        try hubs.validate(source: "test")
        let fixture = try await IngressFixture(hubs: hubs)
        let keyCookie = try await fixture.app.test(.router) { client in
            for (hub, password, expected) in [
                ("myhub", "wrong password", HTTPResponse.Status.unauthorized), ("otherhub", "a long password", .unauthorized),
                ("myhub", "a long password", .seeOther),
            ] {
                try await client.execute(
                    uri: "/console/signin", method: .post, headers: Self.form,
                    body: Self.encoded([("method", "account"), ("hub", hub), ("account", "ops"), ("password", password)])
                ) { response in
                    #expect(response.status == expected, "\(hub) \(password)")
                }
            }
            return try await Self.signIn(client)
        }
        // Another ingress with the same session secret takes the session, until the key changes.
        let same = try await IngressFixture(hubs: hubs)
        try await same.app.test(.router) { client in
            let (status, _) = try await Self.get(client, "/console/overview", cookie: keyCookie)
            #expect(status == .ok)
        }
        var rotated = hubs
        rotated.hubs[0].sasRules[0].key = String(repeating: "n", count: 44)
        let afterRotation = try await IngressFixture(hubs: rotated)
        try await afterRotation.app.test(.router) { client in
            let (status, _) = try await Self.get(client, "/console/overview", cookie: keyCookie)
            #expect(status == .seeOther)
        }
        var off = hubs
        off.console?.enabled = false
        let disabled = try await IngressFixture(hubs: off)
        try await disabled.app.test(.router) { client in
            let (status4, _) = try await Self.get(client, "/console/signin", cookie: "")
            #expect(status4 == .notFound)
        }
        var bad = hubs
        bad.console?.sessionSecret = "short"
        #expect(throws: ConfigurationError.self) { try bad.validate(source: "test") }
        bad = hubs
        bad.console?.accounts = [.init(name: "x", passwordHash: "plain")]
        #expect(throws: ConfigurationError.self) { try bad.validate(source: "test") }
    }
}

extension ConsoleTests {
    @Test("a paging position past what 64 bits hold, or not one, is refused, and the process goes on")
    func hostilePaging() async throws {
        let fixture = try await IngressFixture()
        try await fixture.app.test(.router) { client in
            let cookie = try await Self.signIn(client, key: IngressFixture.sendKey, name: "SendOnly")
            for before in ["9223372036854775807.x", "99999999999999999999.x", "-1.x", "abc", "1.", String(repeating: "9", count: 400)] {
                let (status, html) = try await Self.get(client, "/console/notifications?before=\(before)", cookie: cookie)
                #expect(status == .badRequest, "\(before)")
                #expect(html.contains("before:"))
            }
            let (status, _) = try await Self.get(client, "/console/notifications", cookie: cookie)
            #expect(status == .ok)
            let (overview, _) = try await Self.get(client, "/console/overview", cookie: cookie)
            #expect(overview == .ok, "a Send key lands on the overview it signed in to")
        }
    }

    @Test(
        "sign-out ends the session for good; a new account password ends its sessions; a cross-site Origin is refused; a planted cookie hides nothing"
    )
    func sessionEnds() async throws {
        var hubs = IngressFixture.hubs
        hubs.console = ConsoleConfiguration(
            sessionSecret: String(repeating: "s", count: 40), accounts: [.init(name: "ops", passwordHash: hashPassword("a long password"))])
        let fixture = try await IngressFixture(hubs: hubs)
        let (cookie, account) = try await fixture.app.test(.router) { client in
            let cookie = try await Self.signIn(client)
            let (_, page) = try await Self.get(client, "/console/overview", cookie: cookie)
            let token = try #require(Self.csrf(in: page))
            let (planted, _) = try await Self.get(client, "/console/overview", cookie: "pushhub_console=planted.x; \(cookie)")
            #expect(planted == .ok, "a cookie of the same name set by someone else does not hide the session")
            try await client.execute(
                uri: "/console/signout", method: .post, headers: Self.form.merging([.cookie: cookie]), body: Self.encoded([("csrf", token)])
            ) { response in
                #expect(response.status == .seeOther)
                #expect(response.headers[.setCookie]?.contains("Max-Age=0") == true)
            }
            let (after, _) = try await Self.get(client, "/console/overview", cookie: cookie)
            #expect(after == .seeOther, "the cookie kept from before sign-out no longer works")
            var crossOrigin = Self.form
            crossOrigin[HTTPField.Name("Origin")!] = "https://evil.example"
            try await client.execute(
                uri: "/console/signin", method: .post, headers: crossOrigin,
                body: Self.encoded([("method", "key"), ("hub", "myhub"), ("connectionString", Self.connectionString())])
            ) { response in
                #expect(response.status == .forbidden)
            }
            let account = try await client.execute(
                uri: "/console/signin", method: .post, headers: Self.form,
                body: Self.encoded([("method", "account"), ("hub", "myhub"), ("account", "ops"), ("password", "a long password")])
            ) { String(try #require($0.headers[.setCookie]).split(separator: ";")[0]) }
            return (cookie, account)
        }
        _ = cookie
        var changed = hubs
        changed.console?.accounts = [.init(name: "ops", passwordHash: hashPassword("another long password"))]
        let restarted = try await IngressFixture(hubs: changed)
        try await restarted.app.test(.router) { client in
            let (status, _) = try await Self.get(client, "/console/overview", cookie: account)
            #expect(status == .seeOther, "a session begun with the old password ends")
        }
        let same = try await IngressFixture(hubs: hubs)
        try await same.app.test(.router) { client in
            let (status, _) = try await Self.get(client, "/console/overview", cookie: account)
            #expect(status == .ok, "with the password unchanged it holds")
        }
    }

    @Test("the test send's headers are checked as HTTP would; the live charts answer a script plainly")
    func headersAndCharts() async throws {
        let fixture = try await IngressFixture()
        try await fixture.app.test(.router) { client in
            let cookie = try await Self.signIn(client)
            let token = try #require(Self.csrf(in: try await Self.get(client, "/console/send", cookie: cookie).1))
            for headers in ["apns-collapse-id: a\u{01}b", "apns-collapse-id: a\u{7F}", "apns-pri ority: 10"] {
                try await client.execute(
                    uri: "/console/send/check", method: .post, headers: Self.form.merging([.cookie: cookie]),
                    body: Self.encoded([("csrf", token), ("format", "apple"), ("payload", "{}"), ("headers", headers)])
                ) { response in
                    let answer = try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any]
                    #expect(answer?["ok"] as? Bool == false, "\(headers.debugDescription): \(response.text)")
                }
            }
            try await client.execute(uri: "/console/live/charts", method: .get) { response in
                #expect(response.status == .unauthorized, "not a redirect to the sign-in page")
            }
            // One hub's key of a two-hub ingress: refused plainly, with the page's headers.
            try await client.execute(uri: "/console/live/charts", method: .get, headers: [.cookie: cookie]) { response in
                #expect(response.status == .forbidden)
                #expect(response.headers[.contentSecurityPolicy] != nil)
            }
        }
    }

    @Test("hostile metrics from another process (huge, endless, many series) cost nothing and crash nothing")
    func hostileMetrics() async throws {
        // Another process's /metrics, whose text gets worse with each reading.
        let readings = Mutex(0)
        let router = Router()
        router.get("/metrics") { _, _ -> Response in
            let reading = readings.withLock { value in
                defer { value += 1 }
                return value
            }
            var text = """
                pushhub_kafka_consumer_lag{group="g",topic="t",partition="0"} 1e19
                pushhub_kafka_consumer_lag{group="g",topic="ok",partition="0"} 7
                pushhub_deliveries_total{platform="apns",outcome="delivered"} \(reading == 0 ? "0" : "1.7e308")
                pushhub_deliveries_total{platform="apns",outcome="failed"} \(reading == 0 ? "0" : "1.7e308")
                pushhub_pns_request_duration_seconds_bucket{platform="apns",le="1e20"} \(reading * 10)
                pushhub_pns_request_duration_seconds_bucket{platform="apns",le="+Inf"} \(reading * 10)
                pushhub_deliveries_total{platform="fcm",outcome="delivered"} \(reading * 4)
                pushhub_kafka_consumer_lag{topic="unterminated} 5

                """
            for index in 0..<5_000 { text += "pushhub_deliveries_total{platform=\"p\(index)\"} 1\n" }
            for index in 0..<200 { text += "pushhub_kafka_consumer_lag{topic=\"t\(index)\"} 1\n" }
            return Response(status: .ok, headers: [.contentType: "text/plain"], body: .init(byteBuffer: ByteBuffer(string: text)))
        }
        let port = Mutex<Int?>(nil)
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in port.withLock { $0 = channel.localAddress?.port } },
            logger: Logger(label: "metrics") { _ in SwiftLogNoOpLogHandler() })
        let server = Task { try? await app.runService() }
        defer { server.cancel() }
        // A minute: the rest of the suite may be loading the machine.
        let deadline = ContinuousClock.now + .seconds(60)
        while port.withLock({ $0 }) == nil, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        var hubs = IngressFixture.hubs
        hubs.console = ConsoleConfiguration(
            accounts: [.init(name: "ops", passwordHash: Self.opsHash)], metrics: ["http://127.0.0.1:\(try #require(port.withLock { $0 }))/metrics"])
        let clock = SendRecoveryTests.TestClock()
        let fixture = try await IngressFixture(hubs: hubs, now: { clock.now })
        try await fixture.app.test(.router) { client in
            let cookie = try await Self.signInAccount(client, "ops")
            let (status, overview) = try await Self.get(client, "/console/overview", cookie: cookie)
            #expect(status == .ok)
            // This process's own registry holds the lag of every other test's topics too: the
            // sane topic is shown unless the 64 topics a sample keeps are full.
            let lagSection = overview.components(separatedBy: "lag-heading").last ?? ""
            let topicRows = lagSection.components(separatedBy: "<tr><th scope=\"row\">").count - 1
            #expect(topicRows <= 64, "topics are bounded: \(topicRows)")
            #expect(overview.contains("<th scope=\"row\">ok</th><td>7</td>") || topicRows == 64, "the sane topic is shown")
            #expect(!overview.contains(">t<") && !overview.contains("10000000000000000000"), "a lag past what PushHub could have is not")
            for _ in 0..<3 {
                clock.advance(3)
                try await client.execute(uri: "/console/live/charts", method: .get, headers: [.cookie: cookie]) { response in
                    #expect(response.status == .ok)
                    let svg = response.text
                    #expect(svg.utf8.count < 200_000, "\(svg.utf8.count) bytes")
                    #expect(!svg.contains("p4999") && !svg.contains("inf") && !svg.contains("nan"), "only PushHub's platforms, finite figures")
                }
            }
        }
    }
}

extension ConsoleTests {
    static let opsHash = hashPassword("a long password")

    static func signInAccount(_ client: some TestClientProtocol, _ name: String, hub: String = "myhub") async throws -> String {
        try await client.execute(
            uri: "/console/signin", method: .post, headers: form,
            body: encoded([("method", "account"), ("hub", hub), ("account", name), ("password", "a long password")])
        ) { response in
            #expect(response.status == .seeOther, "\(response.text)")
            return String(try #require(response.headers[.setCookie]).split(separator: ";")[0])
        }
    }

    @Test("every hub's live figures and lag go only to those who see every hub, never to one tenant's key")
    func tenantsSeeTheirOwn() async throws {
        var hubs = IngressFixture.hubs
        hubs.console = ConsoleConfiguration(accounts: [
            .init(name: "ops", passwordHash: Self.opsHash), .init(name: "tenant", passwordHash: Self.opsHash, hubs: ["myhub"]),
        ])
        let fixture = try await IngressFixture(hubs: hubs)
        try await fixture.app.test(.router) { client in
            for cookie in [try await Self.signIn(client), try await Self.signInAccount(client, "tenant")] {
                let (live, _) = try await Self.get(client, "/console/live", cookie: cookie)
                #expect(live == .forbidden)
                let (charts, _) = try await Self.get(client, "/console/live/charts", cookie: cookie)
                #expect(charts == .forbidden)
                let (_, overview) = try await Self.get(client, "/console/overview", cookie: cookie)
                #expect(!overview.contains("Consumer lag") && !overview.contains("/console/live"))
            }
            let operator_ = try await Self.signInAccount(client, "ops")
            let (live, _) = try await Self.get(client, "/console/live", cookie: operator_)
            #expect(live == .ok)
            let (_, overview) = try await Self.get(client, "/console/overview", cookie: operator_)
            #expect(overview.contains("Consumer lag") && overview.contains("/console/live"))
        }
    }
}

extension HTTPFields {
    func merging(_ other: HTTPFields) -> HTTPFields {
        var copy = self
        for field in other { copy[field.name] = field.value }
        return copy
    }
}
