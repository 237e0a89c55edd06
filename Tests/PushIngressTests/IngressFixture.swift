import Foundation
import Hummingbird
import HummingbirdTesting
import PushConfiguration
import PushIngress
import PushModel
import PushStore

/// A hub `myhub` with a full, a listen-only and a send-only key, on a fresh SQLite store.
struct IngressFixture {
    static let fullKey = String(repeating: "f", count: 44)
    static let listenKey = String(repeating: "l", count: 44)
    static let sendKey = String(repeating: "s", count: 44)

    static let hubs = HubsConfiguration(
        hubs: [
            .init(
                name: "myhub",
                sasRules: [
                    .init(name: "DefaultFullSharedAccessSignature", key: fullKey, rights: [.manage, .listen, .send]),
                    .init(name: "DefaultListenSharedAccessSignature", key: listenKey, rights: [.listen]),
                    .init(name: "SendOnly", key: sendKey, rights: [.send]),
                ]),
            .init(
                name: "otherhub",
                sasRules: [.init(name: "DefaultFullSharedAccessSignature", key: String(repeating: "o", count: 44), rights: [.manage])]),
        ],
        appBackend: .init(hub: "myhub"))

    let store: any RegistrationStore
    let app: any ApplicationProtocol

    init(hubs: HubsConfiguration = IngressFixture.hubs, now: @escaping @Sendable () -> Date = { Date() }) async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-\(UUID().uuidString).sqlite").path
        let sql = try await SQLRegistrationStore.open(SQLiteDatabase(path: path))
        store = sql
        app = Application(router: try buildIngressRouter(hubs: hubs, stores: IngressStores(sql), now: now))
    }

    /// A token for `path` on the test client's host.
    static func token(_ path: String, key: String = fullKey, name: String = "DefaultFullSharedAccessSignature", lifetime: TimeInterval = 600)
        -> String
    {
        SharedAccessSignature.token(resourceURI: "https://localhost\(path)", keyName: name, key: key, expiry: Date().addingTimeInterval(lifetime))
    }

    static let fullAccess: HTTPFields = [.authorization: token("/myhub")]
    static let listenAccess: HTTPFields = [.authorization: token("/myhub", key: listenKey, name: "DefaultListenSharedAccessSignature")]
}

extension HTTPFields {
    func withContentType(_ value: String) -> HTTPFields {
        var copy = self
        copy[.contentType] = value
        return copy
    }
}

extension TestResponse {
    var text: String { String(buffer: body) }
}

/// `Authorization: Basic …` for a user.
func basic(_ user: String, _ password: String) -> HTTPFields {
    [.authorization: "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()]
}
