import PushModel
import Crypto
import Foundation
import PushIngress
import Testing
import _CryptoExtras

@Suite("pushhub.yaml")
struct ConfigurationTests {
    static let apnsKey = P256.Signing.PrivateKey().pemRepresentation
    static let vapidRaw = P256.Signing.PrivateKey().rawRepresentation
    static var vapid: P256.Signing.PrivateKey { try! P256.Signing.PrivateKey(rawRepresentation: vapidRaw) }

    static func yaml(hubName: String = "myhub", key: String = String(repeating: "k", count: 44), apnsKey: String = apnsKey,
                     vapidPublic: String = Base64URL.encode(vapid.publicKey.x963Representation), appBackendHub: String = "myhub") -> String {
        """
        hubs:
          - name: \(hubName)
            sasRules:
              - name: DefaultFullSharedAccessSignature
                key: "\(key)"
                rights: [Listen, Send, Manage]
            credentials:
              apns:
                keyId: ABC123DEFG
                teamId: DEF123GHIJ
                bundleId: com.example.app
                environment: sandbox
                privateKey: |
        \(apnsKey.split(separator: "\n").map { "              \($0)" }.joined(separator: "\n"))
              wns:
                packageSid: ms-app://s-1-15-2-1
                secret: wns-secret
              webPush:
                subject: mailto:ops@example.com
                publicKey: \(vapidPublic)
                privateKey: \(Base64URL.encode(vapid.rawRepresentation))
        appBackend:
          hub: \(appBackendHub)
        """
    }

    @Test("a full configuration with credentials loads")
    func loads() throws {
        let configuration = try HubsConfiguration.parse(Self.yaml())
        let hub = try #require(configuration.hub(named: "MyHub"), "hub names are case-insensitive")
        #expect(hub.sasRules[0].rights == [.listen, .send, .manage])
        #expect(hub.credentials.apns?.environment == .sandbox)
        #expect(hub.credentials.webPush?.subject == "mailto:ops@example.com")
        #expect(configuration.appBackend?.hub == "myhub")
    }

    @Test("bad configurations are refused with the place and the reason", arguments: [
        (yaml(hubName: "-bad"), "hubs[0].name"),
        (yaml(key: "short"), "sasRules[0].key: at least 32 characters"),
        (yaml(apnsKey: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----"), "credentials.apns.privateKey"),
        (yaml(vapidPublic: Base64URL.encode(P256.Signing.PrivateKey().publicKey.x963Representation)), "webPush.publicKey: does not belong"),
        (yaml(appBackendHub: "nohub"), "appBackend.hub: no hub named nohub"),
        ("hubs: []", "at least one hub"),
        ("hubs:\n  - name: x1\n", "sasRules"),
        ("hubs: [", "not valid YAML"),
    ])
    func refused(_ text: String, _ reason: String) {
        let error = #expect(throws: ConfigurationError.self) { try HubsConfiguration.parse(text) }
        #expect(error?.message.contains(reason) == true, "\(String(describing: error))")
    }

    @Test("an FCM service account's key must be RSA")
    func fcmKey() throws {
        let rsa = try _RSA.Signing.PrivateKey(keySize: .bits2048).pemRepresentation
        var configuration = HubsConfiguration.development()
        configuration.hubs[0].credentials.fcm = .init(projectId: "p", clientEmail: "svc@p.iam.gserviceaccount.com", privateKey: rsa, tokenURI: nil, endpoint: nil)
        try configuration.validate()
        configuration.hubs[0].credentials.fcm?.privateKey = Self.apnsKey
        #expect(throws: ConfigurationError.self) { try configuration.validate() }
    }

    @Test("the development configuration is valid and survives a round trip through YAML")
    func development() throws {
        let configuration = HubsConfiguration.development()
        try configuration.validate()
        #expect(try HubsConfiguration.parse(try configuration.yaml()) == configuration)
        #expect(configuration.hubs[0].sasRules.map(\.name) == ["DefaultFullSharedAccessSignature", "DefaultListenSharedAccessSignature"])
    }
}
