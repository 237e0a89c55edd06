import Foundation
import Hummingbird
import HummingbirdTesting
import PushIngress
import PushModel
import Testing

@Suite("Ingress over a real socket")
struct LiveSmokeTests {
    @Test("PUT and GET an installation through a listening server")
    func live() async throws {
        let fixture = try await IngressFixture()
        try await fixture.app.test(.live) { client in
            let put = try await client.execute(
                uri: "/myhub/installations/live-1", method: .put, headers: IngressFixture.listenAccess.withContentType("application/json"),
                body: ByteBuffer(string: #"{"installationId":"live-1","platform":"wns","pushChannel":"https://db5.notify.windows.com/live"}"#))
            #expect(put.status == .ok, "\(put.text)")
            let get = try await client.execute(uri: "/myhub/installations/live-1", method: .get, headers: IngressFixture.listenAccess)
            #expect(get.status == .ok)
            #expect(get.text.contains(#""pushChannel":"https://db5.notify.windows.com/live""#))
            #expect(try await client.execute(uri: "/health/live", method: .get).status == .ok)
        }
    }
}
