import Crypto
import Foundation

/// RFC 8291 message encryption for Web Push, content coding `aes128gcm` (RFC 8188), in one
/// record: the subscription's `p256dh` key and `auth` secret, an ephemeral sender key, a
/// random salt.
public enum WebPushEncryption {
    /// The record size written in the header.
    public static let recordSize: UInt32 = 4096

    public struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }

    /// Encrypts `plaintext` for a subscription. `senderKey` and `salt` are fresh for every
    /// message; they are parameters so tests can use the RFC's.
    public static func encrypt(
        _ plaintext: Data, p256dh: Data, auth: Data,
        senderKey: P256.KeyAgreement.PrivateKey = WebPushEncryption.freshSenderKey(),
        salt: Data = Data((0..<16).map { _ in UInt8.random(in: .min ... .max) })
    ) throws(Failure) -> Data {
        guard auth.count == 16 else { throw Failure(message: "the subscription's auth secret must be 16 bytes, not \(auth.count)") }
        guard salt.count == 16 else { throw Failure(message: "the salt must be 16 bytes") }
        // One record: the plaintext, the last-record delimiter, and its tag must fit.
        guard plaintext.count + 1 + 16 <= Int(recordSize) else {
            throw Failure(message: "\(plaintext.count) bytes do not fit one \(recordSize)-byte record")
        }
        let userAgentKey: P256.KeyAgreement.PublicKey
        do { userAgentKey = try P256.KeyAgreement.PublicKey(x963Representation: p256dh) } catch {
            throw Failure(message: "the subscription's p256dh is not an uncompressed P-256 public key")
        }
        let senderPublic = senderKey.publicKey.x963Representation
        let shared: SharedSecret
        do { shared = try senderKey.sharedSecretFromKeyAgreement(with: userAgentKey) } catch {
            throw Failure(message: "key agreement with the subscription's key failed")
        }
        let (key, nonce) = deriveKeyAndNonce(shared: shared, auth: auth, salt: salt, userAgentPublic: p256dh, senderPublic: senderPublic)
        var padded = plaintext
        padded.append(0x02)  // the last (and only) record
        let sealed: AES.GCM.SealedBox
        do { sealed = try AES.GCM.seal(padded, using: key, nonce: nonce) } catch {
            throw Failure(message: "AES-GCM sealing failed")
        }
        var body = salt
        withUnsafeBytes(of: recordSize.bigEndian) { body.append(contentsOf: $0) }
        body.append(UInt8(senderPublic.count))
        body.append(senderPublic)
        body.append(sealed.ciphertext)
        body.append(sealed.tag)
        return body
    }

    /// A new P-256 key for one message: a scalar of 32 bytes from the system's secure random
    /// source (one point multiplication). swift-crypto's own generator also runs a FIPS pairwise
    /// test on each key and draws again until the key is compact-representable, about six
    /// multiplications a key; a tenth of a push's cost here.
    public static func freshSenderKey() -> P256.KeyAgreement.PrivateKey {
        var generator = SystemRandomNumberGenerator()
        while true {
            var scalar = [UInt8]()
            scalar.reserveCapacity(32)
            for _ in 0..<4 { withUnsafeBytes(of: generator.next() as UInt64) { scalar.append(contentsOf: $0) } }
            // Zero and scalars past the group's order (odds about 2^-32) are refused: draw again.
            if let key = try? P256.KeyAgreement.PrivateKey(rawRepresentation: scalar) { return key }
        }
    }

    /// The user agent's side: what a browser does with a message, as the simulator checks it.
    public static func decrypt(_ body: Data, userAgentKey: P256.KeyAgreement.PrivateKey, auth: Data) throws(Failure) -> Data {
        let bytes = [UInt8](body)
        guard bytes.count >= 21 else { throw Failure(message: "the body is shorter than an aes128gcm header") }
        let salt = Data(bytes[0..<16])
        let idLength = Int(bytes[20])
        guard bytes.count >= 21 + idLength + 17 else { throw Failure(message: "the body ends inside its header or tag") }
        let senderPublic = Data(bytes[21..<21 + idLength])
        let sealedBytes = Data(bytes[(21 + idLength)...])
        let senderKey: P256.KeyAgreement.PublicKey
        do { senderKey = try P256.KeyAgreement.PublicKey(x963Representation: senderPublic) } catch {
            throw Failure(message: "the header's key id is not a P-256 public key")
        }
        let shared: SharedSecret
        do { shared = try userAgentKey.sharedSecretFromKeyAgreement(with: senderKey) } catch {
            throw Failure(message: "key agreement with the sender's key failed")
        }
        let (key, nonce) = deriveKeyAndNonce(
            shared: shared, auth: auth, salt: salt, userAgentPublic: userAgentKey.publicKey.x963Representation, senderPublic: senderPublic)
        let padded: Data
        do {
            let box = try AES.GCM.SealedBox(nonce: nonce, ciphertext: sealedBytes.dropLast(16), tag: sealedBytes.suffix(16))
            padded = try AES.GCM.open(box, using: key)
        } catch {
            throw Failure(message: "the message does not decrypt with this subscription's keys")
        }
        // Strip zero padding, then the delimiter.
        guard let delimiter = padded.lastIndex(where: { $0 != 0 }), padded[delimiter] == 0x02 else {
            throw Failure(message: "the record has no last-record delimiter")
        }
        return Data(padded[..<delimiter])
    }

    private static func deriveKeyAndNonce(
        shared: SharedSecret, auth: Data, salt: Data, userAgentPublic: Data, senderPublic: Data
    ) -> (SymmetricKey, AES.GCM.Nonce) {
        let ecdhSecret = shared.withUnsafeBytes { Data($0) }
        // HKDF (RFC 5869) with SHA-256, each output at most one hash long: extract is
        // HMAC(salt, IKM), expand is the first bytes of HMAC(PRK, info || 0x01). Written with
        // HMAC directly, it costs a third of swift-crypto's HKDF type here.
        func hmac(key: Data, _ message: Data) -> Data {
            Data(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key)))
        }
        // RFC 8291 §3.3: the auth secret and both public keys go into the input keying material.
        var keyInfo = Data("WebPush: info\0".utf8)
        keyInfo.append(userAgentPublic)
        keyInfo.append(senderPublic)
        keyInfo.append(1)
        let ikm = hmac(key: hmac(key: auth, ecdhSecret), keyInfo)
        // RFC 8188 §2.2: the content encryption key and nonce.
        let prk = hmac(key: salt, ikm)
        let key = SymmetricKey(data: hmac(key: prk, contentEncryptionKeyInfo).prefix(16))
        // A 12-byte nonce is always valid.
        let nonce = try! AES.GCM.Nonce(data: hmac(key: prk, nonceInfo).prefix(12))
        return (key, nonce)
    }

    private static let contentEncryptionKeyInfo = Data("Content-Encoding: aes128gcm\0\u{1}".utf8)
    private static let nonceInfo = Data("Content-Encoding: nonce\0\u{1}".utf8)
}
