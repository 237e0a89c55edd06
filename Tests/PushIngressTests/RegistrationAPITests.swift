import Foundation
import Hummingbird
import HummingbirdTesting
import PushIngress
import PushModel
import PushStore
import Testing

@Suite("Registrations API (Atom XML)")
struct RegistrationAPITests {
    static let atom = IngressFixture.listenAccess.withContentType("application/atom+xml;type=entry;charset=utf-8")

    static func entry(_ description: String) -> String {
        """
        <?xml version="1.0" encoding="utf-8"?>
        <entry xmlns="http://www.w3.org/2005/Atom">
            <content type="application/xml">
                \(description)
            </content>
        </entry>
        """
    }

    static func description(_ type: String, _ fields: String) -> String {
        "<\(type) xmlns:i=\"http://www.w3.org/2001/XMLSchema-instance\" xmlns=\"http://schemas.microsoft.com/netservices/2010/10/servicebus/connect\">\(fields)</\(type)>"
    }

    @Test(
        "every description type round-trips through create and read",
        arguments: [
            (
                "AppleRegistrationDescription", "<Tags>Sports, Politics</Tags><DeviceToken>ABCDEF0123</DeviceToken>", NotificationFormat.apple,
                "ABCDEF0123"
            ),
            ("GcmRegistrationDescription", "<Tags>a</Tags><GcmRegistrationId>gcm-1</GcmRegistrationId>", .gcm, "gcm-1"),
            ("FcmV1RegistrationDescription", "<FcmV1RegistrationId>fcm-v1</FcmV1RegistrationId>", .fcmv1, "fcm-v1"),
            (
                "WindowsRegistrationDescription", "<ChannelUri>https://db5.notify.windows.com/?token=x&amp;y=1</ChannelUri>", .windows,
                "https://db5.notify.windows.com/?token=x&y=1"
            ),
            (
                "BrowserRegistrationDescription", "<Endpoint>https://push.example/s/1</Endpoint><P256DH>BKey</P256DH><Auth>authsecret</Auth>",
                .browser, "https://push.example/s/1"
            ),
            (
                "AppleTemplateRegistrationDescription",
                #"<Tags>News</Tags><DeviceToken>T1</DeviceToken><BodyTemplate><![CDATA[{"aps":{"alert":"$(messageParam)"}}]]></BodyTemplate><Expiry>0</Expiry><TemplateName>simpleAPNSTemplate</TemplateName>"#,
                .apple, "T1"
            ),
            (
                "WindowsTemplateRegistrationDescription",
                "<ChannelUri>https://db5.notify.windows.com/2</ChannelUri><BodyTemplate>&lt;toast&gt;&lt;text&gt;$(msg)&lt;/text&gt;&lt;/toast&gt;</BodyTemplate><WnsHeaders><WnsHeader><Header>X-WNS-Type</Header><Value>wns/toast</Value></WnsHeader></WnsHeaders>",
                .windows, "https://db5.notify.windows.com/2"
            ),
            (
                "AdmRegistrationDescription", "<Tags>kindle</Tags><AdmRegistrationId>amzn1.adm-registration.v3.Y</AdmRegistrationId>", .adm,
                "amzn1.adm-registration.v3.Y"
            ),
            (
                "AdmTemplateRegistrationDescription",
                #"<AdmRegistrationId>amzn1.adm-registration.v3.Z</AdmRegistrationId><BodyTemplate><![CDATA[{"data":{"msg":"$(message)"}}]]></BodyTemplate><TemplateName>adm</TemplateName>"#,
                .adm, "amzn1.adm-registration.v3.Z"
            ),
            ("BaiduRegistrationDescription", "<BaiduUserId>7001</BaiduUserId><BaiduChannelId>4411</BaiduChannelId>", .baidu, "7001-4411"),
            (
                "BaiduTemplateRegistrationDescription",
                #"<BaiduUserId>7002</BaiduUserId><BaiduChannelId>4412</BaiduChannelId><BodyTemplate><![CDATA[{"title":"$(title)"}]]></BodyTemplate><TemplateName>baidu</TemplateName><MessageType>1</MessageType>"#,
                .baidu, "7002-4412"
            ),
            ("XiaomiRegistrationDescription", "<XiaomiRegistrationId>mi-regid-1</XiaomiRegistrationId>", .xiaomi, "mi-regid-1"),
            ("HmsRegistrationDescription", "<HmsPushToken>hms-token-1</HmsPushToken>", .hms, "hms-token-1"),
        ] as [(String, String, NotificationFormat, String)])
    func roundTrip(_ type: String, _ fields: String, _ format: NotificationFormat, _ handle: String) async throws {
        let fixture = try await IngressFixture()
        try await fixture.app.test(.router) { client in
            let created = try await client.execute(
                uri: "/myhub/registrations?api-version=2015-01", method: .post, headers: Self.atom,
                body: ByteBuffer(string: Self.entry(Self.description(type, fields))))
            #expect(created.status == .ok, "\(created.text)")
            #expect(created.headers[.eTag] == "W/\"1\"")
            #expect(created.text.contains("<\(type) "), "the answer has the same description type: \(created.text)")
            let id = try #require(created.text.firstMatch(of: /<RegistrationId>([^<]+)<\/RegistrationId>/)?.1)

            let stored = try #require(try await fixture.store.registration(hub: "myhub", id: String(id)))
            #expect(stored.format.notificationFormat == format)
            #expect(stored.handle == handle)

            try await client.execute(uri: "/myhub/registrations/\(id)", method: .get, headers: IngressFixture.listenAccess) { read in
                #expect(read.status == .ok)
                #expect(read.text == created.text, "reading gives what creating answered")
            }
        }
    }

    @Test("the template fields are kept")
    func templateFields() async throws {
        let fixture = try await IngressFixture()
        try await fixture.app.test(.router) { client in
            try await client.execute(
                uri: "/myhub/registrations/t-1", method: .put, headers: Self.atom,
                body: ByteBuffer(
                    string: Self.entry(
                        Self.description(
                            "WindowsTemplateRegistrationDescription",
                            "<Tags>a,b</Tags><ChannelUri>https://db5.notify.windows.com/3</ChannelUri><BodyTemplate>&lt;toast/&gt;</BodyTemplate><WnsHeaders><WnsHeader><Header>X-WNS-Type</Header><Value>wns/toast</Value></WnsHeader><WnsHeader><Header>X-WNS-Tag</Header><Value>$(tag)</Value></WnsHeader></WnsHeaders>"
                        )))
            ) { response in
                #expect(response.status == .ok, "\(response.text)")
            }
        }
        let stored = try #require(try await fixture.store.registration(hub: "myhub", id: "t-1"))
        #expect(stored.tags == ["a", "b"])
        #expect(stored.template == Template(body: "<toast/>", headers: ["X-WNS-Type": "wns/toast", "X-WNS-Tag": "$(tag)"]))
    }

    @Test("registration ids, create-or-update with If-Match, delete")
    func lifecycle() async throws {
        let fixture = try await IngressFixture()
        let apple = Self.entry(Self.description("AppleRegistrationDescription", "<Tags>x</Tags><DeviceToken>D1</DeviceToken>"))
        try await fixture.app.test(.router) { client in
            let location = try await client.execute(uri: "/myhub/registrationIDs", method: .post, headers: IngressFixture.listenAccess).headers[
                .location]
            let id = try #require(location?.firstMatch(of: /\/myhub\/registrations\/([^?]+)\?/)?.1)
            #expect(try await fixture.store.registrationIdState(hub: "myhub", id: String(id)) == .issued)

            let first = try await client.execute(uri: "/myhub/registrations/\(id)", method: .put, headers: Self.atom, body: ByteBuffer(string: apple))
            #expect(first.status == .ok)
            let second = try await client.execute(
                uri: "/myhub/Registrations/\(id)", method: .put, headers: Self.atom.withIfMatch("W/\"1\""), body: ByteBuffer(string: apple))
            #expect(second.headers[.eTag] == "W/\"2\"")
            let stale = try await client.execute(
                uri: "/myhub/registrations/\(id)", method: .put, headers: Self.atom.withIfMatch("\"1\""), body: ByteBuffer(string: apple))
            #expect(stale.status == .preconditionFailed)
            let wrongDelete = try await client.execute(
                uri: "/myhub/registrations/\(id)", method: .delete, headers: IngressFixture.listenAccess.withIfMatch("1"))
            #expect(wrongDelete.status == .preconditionFailed)
            let deleted = try await client.execute(
                uri: "/myhub/registrations/\(id)", method: .delete, headers: IngressFixture.listenAccess.withIfMatch("*"))
            #expect(deleted.status == .ok)
            let again = try await client.execute(uri: "/myhub/registrations/\(id)", method: .delete, headers: IngressFixture.listenAccess)
            #expect(again.status == .notFound)
        }
    }

    @Test("listing: all with $top and continuation (Manage), by tag (Manage), by channel (Listen)")
    func listing() async throws {
        let fixture = try await IngressFixture()
        for index in 0..<7 {
            _ = try await fixture.store.upsertRegistration(
                Registration(
                    registrationId: "r\(index)", hub: "myhub", format: .apple, handle: "h\(index % 2)", tags: index < 3 ? ["Sports"] : [],
                    updatedAt: Date()),
                ifMatch: nil)
        }
        try await fixture.app.test(.router) { client in
            var seen: [String] = []
            var token: String?
            repeat {
                let uri = "/myhub/registrations?$top=3" + (token.map { "&ContinuationToken=\($0)" } ?? "")
                let page = try await client.execute(uri: uri, method: .get, headers: IngressFixture.fullAccess)
                #expect(page.status == .ok)
                #expect(page.headers[.contentType] == "application/atom+xml;type=feed;charset=utf-8")
                seen += page.text.matches(of: /<RegistrationId>([^<]+)<\/RegistrationId>/).map { String($0.1) }
                token = page.headers[.init("X-MS-ContinuationToken")!]
            } while token != nil
            #expect(seen.sorted() == (0..<7).map { "r\($0)" })

            let listenAll = try await client.execute(uri: "/myhub/registrations", method: .get, headers: IngressFixture.listenAccess)
            #expect(listenAll.status == .forbidden, "listing everything needs Manage")

            let byTag = try await client.execute(uri: "/myhub/tags/Sports/registrations", method: .get, headers: IngressFixture.fullAccess)
            #expect(byTag.text.matches(of: /<RegistrationId>/).count == 3)

            let byChannel = try await client.execute(
                uri: "/myhub/registrations?$filter=DeviceToken%20eq%20'h1'", method: .get, headers: IngressFixture.listenAccess)
            #expect(byChannel.status == .ok)
            #expect(byChannel.text.matches(of: /<RegistrationId>/).count == 3)

            let badFilter = try await client.execute(
                uri: "/myhub/registrations?$filter=Tags%20eq%20'x'", method: .get, headers: IngressFixture.listenAccess)
            #expect(badFilter.status == .badRequest)
        }
    }

    @Test("an installation appears as its registrations and cannot be changed through them")
    func installationRegistrations() async throws {
        let fixture = try await IngressFixture()
        _ = try await fixture.store.upsertInstallation(
            Installation(installationId: "inst-1", platform: .fcmv1, pushChannel: "fcm-token", tags: ["t"]), hub: "myhub")
        try await fixture.app.test(.router) { client in
            let id = Registration.installationRegistrationId("inst-1", template: nil)
            let read = try await client.execute(uri: "/myhub/registrations/\(id)", method: .get, headers: IngressFixture.listenAccess)
            #expect(read.status == .ok)
            #expect(read.text.contains("<FcmV1RegistrationId>fcm-token</FcmV1RegistrationId>"))
            #expect(read.text.contains("$InstallationId:{inst-1}"))
            let overwrite = try await client.execute(
                uri: "/myhub/registrations/\(id)", method: .put, headers: Self.atom,
                body: ByteBuffer(string: Self.entry(Self.description("AppleRegistrationDescription", "<DeviceToken>X</DeviceToken>"))))
            #expect(overwrite.status == .forbidden, "ids of installations are not the registrations API's to write")
        }
    }

    @Test(
        "bad entries are refused with what is wrong",
        arguments: [
            ("<entry><content>", "not well-formed XML"),
            (entry("<NokiaRegistrationDescription><Token>x</Token></NokiaRegistrationDescription>"), "unknown description type"),
            (entry(description("AppleRegistrationDescription", "<Tags>ok</Tags>")), "DeviceToken: missing"),
            (entry(description("AppleRegistrationDescription", "<Tags>bad tag</Tags><DeviceToken>x</DeviceToken>")), "Tags"),
            (entry(description("AppleTemplateRegistrationDescription", "<DeviceToken>x</DeviceToken>")), "BodyTemplate: missing"),
            (entry(description("BrowserRegistrationDescription", "<Endpoint>https://p/1</Endpoint>")), "needs P256DH and Auth"),
            (entry(description("BaiduRegistrationDescription", "<BaiduChannelId>1</BaiduChannelId>")), "BaiduUserId: missing, or holds a hyphen"),
            (
                entry(description("BaiduRegistrationDescription", "<BaiduUserId>a-b</BaiduUserId><BaiduChannelId>1</BaiduChannelId>")),
                "BaiduUserId: missing, or holds a hyphen"
            ),
            (
                entry(
                    description(
                        "BaiduTemplateRegistrationDescription",
                        #"<BaiduUserId>1</BaiduUserId><BaiduChannelId>2</BaiduChannelId><BodyTemplate>{"a":"b"}</BodyTemplate><MessageType>5</MessageType>"#
                    )), "MessageType: must be 0 (message) or 1 (notification)"
            ),
            (
                entry(
                    description(
                        "AdmTemplateRegistrationDescription", "<AdmRegistrationId>x</AdmRegistrationId><BodyTemplate>&lt;toast/&gt;</BodyTemplate>")),
                "BodyTemplate.body"
            ),
            (
                entry(
                    description("AppleTemplateRegistrationDescription", #"<DeviceToken>x</DeviceToken><BodyTemplate>{"a":"$(p, x)"}</BodyTemplate>"#)),
                "BodyTemplate.body"
            ),
            (
                entry(
                    description(
                        "WindowsTemplateRegistrationDescription",
                        "<ChannelUri>https://w</ChannelUri><BodyTemplate>&lt;toast&gt;$(p&lt;/toast&gt;</BodyTemplate>")), "is not closed"
            ),
            (
                entry(description("AppleRegistrationDescription", "<DeviceToken>x</DeviceToken><ExpirationTime>soon</ExpirationTime>")),
                "ExpirationTime"
            ),
            ("<entry/>", "no …RegistrationDescription"),
        ])
    func refused(_ body: String, _ reason: String) async throws {
        let fixture = try await IngressFixture()
        try await fixture.app.test(.router) { client in
            let response = try await client.execute(uri: "/myhub/registrations", method: .post, headers: Self.atom, body: ByteBuffer(string: body))
            #expect(response.status == .badRequest)
            #expect(response.text.contains(reason), "\(response.text)")
        }
        #expect(try await fixture.store.registrations(hub: "myhub", matching: .all, after: nil, limit: 10).registrations.isEmpty)
    }
}

extension HTTPFields {
    func withIfMatch(_ value: String) -> HTTPFields {
        var copy = self
        copy[.ifMatch] = value
        return copy
    }
}
