import Crypto
import Foundation
import PushModel

/// A browser's Web Push subscription at the simulator, derived from its id alone, so tests
/// and load generators can make as many as they like and the simulator can decrypt what is
/// sent to each: `endpoint` is `{base}/webpush/{id}`.
public struct SimulatedSubscription: Sendable {
    public var id: String
    /// The user agent's P-256 key (raw, 32 bytes).
    var privateKey: Data
    public var keys: WebPushKeys

    public init(id: String) {
        self.id = id
        var seed = Data(SHA256.hash(data: Data("pushhub-sim-webpush-key:\(id)".utf8)))
        // A seed that is not a valid scalar (vanishingly rare) is hashed again.
        var key = try? P256.KeyAgreement.PrivateKey(rawRepresentation: seed)
        while key == nil {
            seed = Data(SHA256.hash(data: seed))
            key = try? P256.KeyAgreement.PrivateKey(rawRepresentation: seed)
        }
        privateKey = seed
        let auth = Data(SHA256.hash(data: Data("pushhub-sim-webpush-auth:\(id)".utf8))).prefix(16)
        keys = WebPushKeys(p256dh: Base64URL.encode(key!.publicKey.x963Representation), auth: Base64URL.encode(auth))
    }

    public func endpoint(base: String) -> String { "\(base)/webpush/\(id)" }

    var agreementKey: P256.KeyAgreement.PrivateKey { try! P256.KeyAgreement.PrivateKey(rawRepresentation: privateKey) }
    var auth: Data { Base64URL.decode(keys.auth)! }
}
