import Foundation
import Hummingbird
import PushIngress
import PushModel
import PushStore
import PushTestSupport
import Testing

/// docs/openapi.yaml describes every route the ingress serves, and nothing else.
@Suite("OpenAPI description")
struct OpenAPITests {
    struct NoPublisher: NotificationPublisher {
        func publish(_ request: SendRequest) async throws {}
        func publish(_ request: SendRequest, resolved targets: [Platform: [DeliveryBatch.Target]], recorded: Bool) async throws {}
    }

    @Test("every route the router serves is in docs/openapi.yaml, and every documented route is served")
    func everyRouteDocumented() async throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-\(UUID().uuidString).sqlite").path
        let store = try await SQLRegistrationStore.open(SQLiteDatabase(path: path))
        // With a publisher and the app backend on: every route there is.
        let router = try buildIngressRouter(hubs: IngressFixture.hubs, stores: IngressStores(store), publisher: NoPublisher())
        // The web console's pages are HTML for people, not API: docs/architecture.md describes them.
        let routes = router.routes.map { "\($0.method.rawValue) \($0.path)" }.filter { !$0.contains(" /console") }
        #expect(router.routes.contains { "\($0.path)" == "/console/signin" }, "the console is served")
        #expect(routes.count > 25, "\(routes)")
        let list = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-routes-\(UUID().uuidString).txt")
        try routes.joined(separator: "\n").write(to: list, atomically: true, encoding: .utf8)
        let (status, output) = try await ProcessLaunch.output([
            "python3", root.appendingPathComponent("scripts/check-openapi.py").path,
            "--spec", root.appendingPathComponent("docs/openapi.yaml").path, list.path,
        ])
        #expect(status == 0, "\(output)")
    }
}
