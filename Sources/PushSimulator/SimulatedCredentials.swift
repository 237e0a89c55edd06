import Crypto
import Foundation
import PushConfiguration
import PushModel
import _CryptoExtras

extension HubsConfiguration.Credentials {
    /// Fresh credentials for every platform whose endpoints are a simulator's: an APNs key, an
    /// FCM service account (RSA 2048), a WNS package, VAPID keys, and the Huawei, ADM, Xiaomi and
    /// Baidu apps' secrets.
    public static func simulated(apns: String, http: String, hub: String = "hub") throws -> HubsConfiguration.Credentials {
        let vapid = P256.Signing.PrivateKey()
        let rsa = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        return HubsConfiguration.Credentials(
            apns: .init(
                keyId: "SIM" + String(UUID().uuidString.prefix(7)), teamId: "SIMTEAM" + String(UUID().uuidString.prefix(3)),
                bundleId: "com.example.\(hub)", environment: .sandbox, privateKey: P256.Signing.PrivateKey().pemRepresentation, endpoint: apns),
            fcm: .init(
                projectId: "\(hub)-project", clientEmail: "pushhub@\(hub)-project.iam.gserviceaccount.com", privateKey: rsa.pemRepresentation,
                tokenURI: "\(http)/oauth2/token", endpoint: http),
            wns: .init(
                packageSid: "ms-app://s-1-15-2-\(UUID().uuidString)",
                secret: randomSecret(),
                tokenURI: "\(http)/wns/token"),
            webPush: .init(
                subject: "mailto:push@example.com", publicKey: Base64URL.encode(vapid.publicKey.x963Representation),
                privateKey: Base64URL.encode(vapid.rawRepresentation)),
            hms: .init(
                appId: "10\(Int.random(in: 1_000_000...9_999_999))", clientSecret: randomSecret(), tokenURI: "\(http)/hms/token", endpoint: apns),
            adm: .init(
                clientId: "amzn1.application-oa2-client.\(Hex.lowercase(SymmetricKey(size: .bits128).withUnsafeBytes { Array($0) }))",
                clientSecret: randomSecret(), tokenURI: "\(http)/adm/token", endpoint: apns),
            xiaomi: .init(appSecret: randomSecret(), packageName: "com.example.\(hub)", endpoint: apns),
            baidu: .init(apiKey: randomSecret(), secretKey: randomSecret(), endpoint: apns))
    }

    /// 256 random bits, base64url.
    static func randomSecret() -> String { Base64URL.encode(Data(SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) })) }
}

extension HubsConfiguration {
    /// Gives the hubs named in `names` simulated credentials for every platform they have none
    /// for (their endpoints are pointed at a simulator afterwards, with `pointed`).
    public mutating func attachSimulatedCredentials(to names: [String]) throws {
        for index in hubs.indices where names.contains(where: { CaseFolding.equal($0, hubs[index].name) }) {
            let fresh = try Credentials.simulated(apns: "https://127.0.0.1", http: "http://127.0.0.1", hub: hubs[index].name.lowercased())
            var credentials = hubs[index].credentials
            credentials.apns = credentials.apns ?? fresh.apns
            credentials.fcm = credentials.fcm ?? fresh.fcm
            credentials.wns = credentials.wns ?? fresh.wns
            credentials.webPush = credentials.webPush ?? fresh.webPush
            credentials.hms = credentials.hms ?? fresh.hms
            credentials.adm = credentials.adm ?? fresh.adm
            credentials.xiaomi = credentials.xiaomi ?? fresh.xiaomi
            credentials.baidu = credentials.baidu ?? fresh.baidu
            hubs[index].credentials = credentials
        }
    }

    /// The hubs named in `hubs` (all when `nil`) with their PNS endpoints pointed at a simulator.
    public func pointed(at apns: String, http: String, hubs names: [String]? = nil) -> HubsConfiguration {
        var copy = self
        for index in copy.hubs.indices
        where names.map({ $0.contains { CaseFolding.equal($0, copy.hubs[index].name) } }) ?? true {
            // FCM over HTTP/2 and TLS, as Google serves it; the token endpoints on plain HTTP.
            copy.hubs[index].credentials.apns?.endpoint = apns
            copy.hubs[index].credentials.fcm?.endpoint = apns
            copy.hubs[index].credentials.fcm?.tokenURI = "\(http)/oauth2/token"
            copy.hubs[index].credentials.wns?.tokenURI = "\(http)/wns/token"
            // Huawei, ADM, Xiaomi and Baidu over HTTP/2 and TLS too; their token endpoints on plain HTTP.
            copy.hubs[index].credentials.hms?.endpoint = apns
            copy.hubs[index].credentials.hms?.tokenURI = "\(http)/hms/token"
            copy.hubs[index].credentials.adm?.endpoint = apns
            copy.hubs[index].credentials.adm?.tokenURI = "\(http)/adm/token"
            copy.hubs[index].credentials.xiaomi?.endpoint = apns
            copy.hubs[index].credentials.baidu?.endpoint = apns
            // WNS channels and Web Push endpoints at either of the simulator's listeners are
            // allowed, and nothing else local.
            let listeners = [apns, http].compactMap { base -> String? in
                guard let url = URLComponents(string: base), let host = url.host, let port = url.port else { return nil }
                return "\(host):\(port)"
            }
            if !listeners.isEmpty { copy.hubs[index].endpoints = copy.hubs[index].endpointPolicy.allowing(simulator: listeners) }
        }
        return copy
    }
}

/// Handles at the simulator for each platform.
public enum SimulatedHandle {
    /// A 64-hex-digit APNs device token derived from `seed`.
    public static func apns(_ seed: String) -> String {
        Hex.lowercase(SHA256.hash(data: Data(seed.utf8)))
    }

    public static func wnsChannel(base: String, id: String) -> String { "\(base)/wns/channel/\(id)" }
}
