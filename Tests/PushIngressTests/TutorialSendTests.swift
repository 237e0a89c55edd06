import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import PushIngress
import PushModel
import PushStore
import Testing

@Suite("The tutorials' sends: /api/notifications and rich push", .timeLimit(.minutes(2)))
struct TutorialSendTests {
    static func fixture() async throws -> MessagingFixture {
        let fixture = try await MessagingFixture()
        for name in ["alice", "bob", "carol"] {
            try await fixture.store.setUser(name: name, passwordHash: hashPassword("\(name)-secret"))
        }
        // Bob's devices, as /api/register tags them.
        try await fixture.register(.apple, handle: String(repeating: "0b", count: 32), tags: ["username:bob"])
        try await fixture.register(.gcm, handle: "bob-fcm-token", tags: ["username:bob"])
        try await fixture.register(.windows, handle: "https://db5.notify.windows.com/?token=bob", tags: ["username:bob"])
        return fixture
    }

    static let alice = basic("alice", "alice-secret")

    @Test("'From {sender}: {message}' in each platform's native payload, to username:{to_tag}, escaped")
    func nativeSends() async throws {
        let fixture = try await Self.fixture()
        let message = #"hi "there" </text> & ü"#
        let body = String(decoding: try JSONEncoder().encode(message), as: UTF8.self)
        let ids = try await fixture.app.test(.router) { client in
            var ids: [String: String] = [:]
            for pns in ["apns", "fcm", "wns"] {
                let response = try await client.execute(
                    uri: "/api/notifications?pns=\(pns)&to_tag=bob", method: .post, headers: Self.alice, body: ByteBuffer(string: body))
                #expect(response.status == .ok, "\(pns): \(response.text)")
                ids[pns] = try JSONDecoder().decode([String: String].self, from: Data(buffer: response.body))["notificationId"]
            }
            return ids
        }
        // Sent to bob's devices only, resolved as each send was accepted.
        let requests = Dictionary(uniqueKeysWithValues: try await fixture.deliveries(3).map { ($0.notificationId, $0) })
        let apns = try #require(requests[ids["apns"]!])
        #expect(apns.targets.map(\.handle) == [String(repeating: "0b", count: 32)])
        let alert = try JSONSerialization.jsonObject(with: Data(apns.body.utf8)) as? [String: [String: String]]
        #expect(alert?["aps"]?["alert"] == "From alice: \(message)")
        let fcm = try #require(requests[ids["fcm"]!])
        #expect(fcm.format == .gcm)
        #expect(
            (try JSONSerialization.jsonObject(with: Data(fcm.body.utf8)) as? [String: [String: String]])?["data"]?["message"]
                == "From alice: \(message)")
        let wns = try #require(requests[ids["wns"]!])
        #expect(wns.format == .windows && wns.headers["X-WNS-Type"] == "wns/toast")
        #expect(wns.body.contains("<text id=\"1\">From alice: hi &quot;there&quot; &lt;/text&gt; &amp; ü</text>"))
    }

    @Test(
        "bad tutorial sends are refused",
        arguments: [
            ("/api/notifications?pns=mpns&to_tag=bob", #""hi""#, HTTPResponse.Status.badRequest, "use one of apns, fcm, gcm, wns"),
            ("/api/notifications?pns=apns&to_tag=bob", "hi", .badRequest, "JSON string"),
            ("/api/notifications?pns=apns", #""hi""#, .badRequest, "to_tag"),
            ("/api/notifications?pns=apns&to_tag=bad%20name", #""hi""#, .badRequest, "to_tag"),
        ] as [(String, String, HTTPResponse.Status, String)])
    func refused(_ uri: String, _ body: String, _ status: HTTPResponse.Status, _ reason: String) async throws {
        let fixture = try await Self.fixture()
        try await fixture.app.test(.router) { client in
            let response = try await client.execute(uri: uri, method: .post, headers: Self.alice, body: ByteBuffer(string: body))
            #expect(response.status == status)
            #expect(response.text.contains(reason), "\(response.text)")
            #expect(try await client.execute(uri: uri, method: .post, body: ByteBuffer(string: body)).status == .unauthorized)
        }
    }

    @Test("rich push: the payload is kept, a silent push carries its id, only sender and recipient may fetch it")
    func richPush() async throws {
        let fixture = try await Self.fixture()
        let image = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0xFF])
        let (richId, notificationId) = try await fixture.app.test(.router) { client in
            let response = try await client.execute(
                uri: "/api/notifications/rich?pns=apns&to_tag=bob&message=Check%20this%20image%20out!&type=img", method: .post,
                headers: Self.alice.withContentType("image/png"), body: ByteBuffer(bytes: image))
            #expect(response.status == .ok, "\(response.text)")
            let answer = try JSONDecoder().decode([String: String].self, from: Data(buffer: response.body))
            let richId = try #require(answer["richId"])
            #expect(Int(richId) != nil, "the tutorial's client reads the id with intValue")

            let bob = try await client.execute(uri: "/api/notifications/\(richId)", method: .get, headers: basic("bob", "bob-secret"))
            #expect(bob.status == .ok)
            #expect(bob.headers[.contentType] == "image/png")
            #expect(Data(buffer: bob.body) == image)
            #expect(try await client.execute(uri: "/api/notifications/\(richId)", method: .get, headers: Self.alice).status == .ok)
            #expect(
                try await client.execute(uri: "/api/notifications/\(richId)", method: .get, headers: basic("carol", "carol-secret")).status
                    == .forbidden)
            #expect(try await client.execute(uri: "/api/notifications/99999", method: .get, headers: Self.alice).status == .notFound)
            #expect(try await client.execute(uri: "/api/notifications/abc", method: .get, headers: Self.alice).status == .notFound)
            return (richId, answer["notificationId"])
        }
        let silent = try #require(try await fixture.deliveries(1).first)
        #expect(silent.notificationId == notificationId)
        #expect(silent.platform == .apns && silent.targets.count == 1, "bob's one APNs device")
        #expect(silent.headers == ["apns-push-type": "background", "apns-priority": "5"])
        let payload = try #require(try JSONSerialization.jsonObject(with: Data(silent.body.utf8)) as? [String: Any])
        #expect((payload["aps"] as? [String: Any])?["content-available"] as? Int == 1)
        #expect(payload["richId"] as? String == richId)
        #expect(payload["richMessage"] as? String == "Check this image out!")
        #expect(payload["richType"] as? String == "img")
    }

    @Test("without Kafka the send endpoints answer 503")
    func withoutKafka() async throws {
        let fixture = try await IngressFixture()
        try await fixture.store.setUser(name: "alice", passwordHash: hashPassword("alice-secret"))
        try await fixture.app.test(.router) { client in
            let response = try await client.execute(
                uri: "/api/notifications?pns=apns&to_tag=bob", method: .post, headers: Self.alice, body: ByteBuffer(string: #""hi""#))
            #expect(response.status == .serviceUnavailable)
        }
    }
}
