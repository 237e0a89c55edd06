import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import PushIngress
import PushModel
import Testing

@Suite("Batch direct sends", .timeLimit(.minutes(2)))
struct BatchDirectTests {
    static func multipart(notification: String, devices: String?, boundary: String = "simple-boundary") -> String {
        var body = "--\(boundary)\r\nContent-Type: application/json\r\nContent-Disposition: inline; name=notification\r\n\r\n\(notification)\r\n"
        if let devices {
            body += "--\(boundary)\r\nContent-Type: application/json\r\nContent-Disposition: inline; name=devices\r\n\r\n\(devices)\r\n"
        }
        return body + "--\(boundary)--\r\n"
    }

    static let headers: HTTPFields = {
        var headers = IngressFixture.fullAccess
        headers[HTTPField.Name("ServiceBusNotification-Format")!] = "apple"
        headers[.contentType] = "multipart/mixed; boundary=\"simple-boundary\""
        return headers
    }()

    @Test("one notification to a list of handles, as Azure's documentation writes it")
    func batch() async throws {
        let fixture = try await MessagingFixture()
        try await fixture.app.test(.router) { client in
            let response = try await client.execute(
                uri: "/myhub/messages/$batch?direct&api-version=2015-04", method: .post, headers: Self.headers,
                body: ByteBuffer(
                    string: Self.multipart(notification: #"{"aps":{"alert":"Hello"}}"#, devices: "['Device Token1','Device Token2','Device Token3']"))
            )
            #expect(response.status == .created, "\(response.text)")
        }
        let batch = try #require(try await fixture.deliveries(1).first)
        #expect(batch.platform == .apns && batch.targets.map(\.handle) == ["Device Token1", "Device Token2", "Device Token3"])
        #expect(batch.body == #"{"aps":{"alert":"Hello"}}"#)
    }

    @Test(
        "refused batches",
        arguments: [
            (
                multipart(notification: "{}", devices: String(describing: (0...1000).map { "t\($0)" }).replacingOccurrences(of: "\"", with: "'")),
                HTTPResponse.Status.badRequest, "1 to 1000"
            ),
            (multipart(notification: "{}", devices: nil), .badRequest, "part named devices"),
            (multipart(notification: "{}", devices: "[]"), .badRequest, "list of device handles"),
            ("no parts at all", .badRequest, "no part delimited"),
            (multipart(notification: "{}", devices: #"["tok\u0000en"]"#), .badRequest, "handles[0].handle: must not hold control characters"),
            (multipart(notification: "{}", devices: "['ok', '\(String(repeating: "t", count: 2049))']"), .badRequest, "handles[1].handle: is longer"),
        ] as [(String, HTTPResponse.Status, String)])
    func refused(_ body: String, _ status: HTTPResponse.Status, _ reason: String) async throws {
        let fixture = try await MessagingFixture()
        try await fixture.app.test(.router) { client in
            let response = try await client.execute(
                uri: "/myhub/messages/$batch?direct", method: .post, headers: Self.headers, body: ByteBuffer(string: body))
            #expect(response.status == status)
            #expect(response.text.contains(reason), "\(response.text)")
            var plain = Self.headers
            plain[.contentType] = "application/json"
            #expect(
                try await client.execute(uri: "/myhub/messages/$batch?direct", method: .post, headers: plain, body: ByteBuffer(string: body)).status
                    == .unsupportedMediaType)
            #expect(
                try await client.execute(uri: "/myhub/messages/$batch", method: .post, headers: Self.headers, body: ByteBuffer(string: body)).status
                    == .badRequest)
        }
    }
}
