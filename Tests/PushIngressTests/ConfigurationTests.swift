import Crypto
import Foundation
import PushConfiguration
import PushIngress
import PushModel
import Testing
import _CryptoExtras

@Suite("pushhub.yaml")
struct ConfigurationTests {
    static let apnsKey = P256.Signing.PrivateKey().pemRepresentation
    static let vapidRaw = P256.Signing.PrivateKey().rawRepresentation
    static var vapid: P256.Signing.PrivateKey { try! P256.Signing.PrivateKey(rawRepresentation: vapidRaw) }

    static func yaml(
        hubName: String = "myhub", key: String = String(repeating: "k", count: 44), apnsKey: String = apnsKey,
        vapidPublic: String = Base64URL.encode(vapid.publicKey.x963Representation), appBackendHub: String = "myhub"
    ) -> String {
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

    @Test(
        "bad configurations are refused with the place and the reason",
        arguments: [
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

    @Test("recovery: a mode alone, or a mapping with durations; defaults per broker; a round trip through YAML")
    func recovery() throws {
        #expect(try HubsConfiguration.parse(Self.yaml()).sendRecovery == SendRecoveryConfiguration())
        #expect(try HubsConfiguration.parse(Self.yaml() + "\nrecovery: republish").recovery == SendRecoveryConfiguration(mode: .republish))
        let mapping = try HubsConfiguration.parse(
            Self.yaml() + "\nrecovery:\n  mode: off\n  checkEvery: 500ms\n  grace: 90s\n  abandonAfter: 1h\n  keepEnded: 2d")
        #expect(mapping.recovery == SendRecoveryConfiguration(mode: .off, checkEvery: 0.5, grace: 90, abandonAfter: 3600, keepEnded: 2 * 86_400))
        #expect(try HubsConfiguration.parse(try mapping.yaml()) == mapping)

        // Republished on the embedded cluster whatever the file says; on Kafka only when asked.
        #expect(SendRecoveryConfiguration().republishes(embeddedKafka: true))
        #expect(SendRecoveryConfiguration(mode: .off).republishes(embeddedKafka: true))
        #expect(!SendRecoveryConfiguration().republishes(embeddedKafka: false))
        #expect(SendRecoveryConfiguration(mode: .republish).republishes(embeddedKafka: false))
        let defaults = SendRecoverySettings(SendRecoveryConfiguration(), embeddedKafka: false)
        #expect(defaults.checkEvery == .seconds(15) && defaults.grace == 120 && defaults.abandonAfter == 1800 && defaults.keepEnded == 7 * 86_400)
        #expect(SendRecoverySettings(try #require(mapping.recovery), embeddedKafka: false).keepEnded == 2 * 86_400)
    }

    @Test(
        "bad recovery settings are refused with the place and the reason",
        arguments: [
            ("recovery: always", "recovery: must be republish or off"),
            ("recovery:\n  grace: soon", "recovery.grace: soon is not a duration"),
            ("recovery:\n  checkEvery: 0s", "recovery.checkEvery: 0s is not a duration from 100ms to 1h"),
            ("recovery:\n  abandonAfter: 30d", "recovery.abandonAfter: 30d is not a duration from 1s to 7d"),
            ("recovery:\n  keepEnded: 12h", "recovery.keepEnded: 12h is not a duration from 1d to 366d"),
            ("recovery:\n  mode: sometimes", "recovery.mode"),
        ])
    func badRecovery(_ text: String, _ expected: String) throws {
        let error = #expect(throws: ConfigurationError.self) { try HubsConfiguration.parse(Self.yaml() + "\n" + text) }
        #expect(error?.message.contains(expected) == true, "\(error?.message ?? "")")
    }

    @Test("an FCM service account's key must be RSA")
    func fcmKey() throws {
        let rsa = try _RSA.Signing.PrivateKey(keySize: .bits2048).pemRepresentation
        var configuration = HubsConfiguration.development()
        configuration.hubs[0].credentials.fcm = .init(
            projectId: "p", clientEmail: "svc@p.iam.gserviceaccount.com", privateKey: rsa, tokenURI: nil, endpoint: nil)
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
