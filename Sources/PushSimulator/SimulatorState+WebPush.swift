import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import PushConfiguration
import PushModel
import PushProviders
import Synchronization
import _CryptoExtras

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// The Web Push simulator: VAPID checked, payloads decrypted and recorded.
extension SimulatorState {
    func webPush(_ request: SimRequest, subscription id: String, faults: SimulatorFaults) -> SimAnswer {
        let body = request.body
        let answer: SimAnswer = {
            guard let authorization = request.header("authorization"), let origin = request.origin,
                verifyVAPID(authorization, audience: origin)
            else { return Self.text(401, "VAPID: missing or invalid authorization") }
            guard let ttl = request.header("ttl"), Int(ttl) != nil else { return Self.text(400, "TTL header missing") }
            guard request.header("content-encoding") == "aes128gcm" else {
                return Self.text(415, "Content-Encoding must be aes128gcm")
            }
            guard body.readableBytes <= 4096 else { return Self.text(413, "Payload too large") }
            if faults.isDead(id) { return Self.text(410, "push subscription has unsubscribed or expired") }
            // A push service never reads the payload; the simulator decrypts what it keeps for
            // `GET /sim/deliveries`, which is how tests see what was sent.
            let kept = keeps("webpush/\(id)")
            var plaintext = Data()
            if kept {
                let subscription = SimulatedSubscription(id: id)
                do throws(WebPushEncryption.Failure) {
                    plaintext = try WebPushEncryption.decrypt(
                        Data(body.readableBytesView), userAgentKey: subscription.agreementKey, auth: subscription.auth)
                } catch {
                    return Self.text(400, "decryption failed: \(error.message)")
                }
            }
            if let injected = injected(
                faults, throttle: { Self.withRetryAfter(Self.text(429, "Too Many Requests"), faults.retryAfterSeconds) },
                error: { Self.withRetryAfter(Self.text(503, "Service Unavailable"), faults.retryAfterSeconds) })
            {
                return injected
            }
            if kept {
                record(
                    .webpush, handle: "webpush/\(id)", payload: String(decoding: plaintext, as: UTF8.self), header: request.header,
                    names: ["TTL", "Urgency", "Topic"])
            }
            return SimAnswer(status: 201, headers: [("location", "/message/\(uniqueID())")])
        }()
        return count(.webpush, answer)
    }

    func verifyVAPID(_ authorization: String, audience: String) -> Bool {
        guard authorization.hasPrefix("vapid ") else { return false }
        // A header verified before is good until its token's expiry.
        let header = audience + "\n" + authorization
        let now = Int(Date().timeIntervalSince1970)
        if let expiry = mutable.withLock({ $0.verifiedVAPID[header] }) { return expiry > now }
        var fields: [String: String] = [:]
        for part in authorization.dropFirst(6).split(separator: ",") {
            let pair = part.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1).map(String.init)
            if pair.count == 2 { fields[pair[0]] = pair[1] }
        }
        guard let jwt = fields["t"], let key = fields["k"], vapidKeys.isEmpty || vapidKeys.contains(key) else { return false }
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, let claims = Self.jsonObject(parts[1]), claims["aud"] as? String == audience,
            let expiry = claims["exp"] as? Int, expiry > now, expiry <= now + 86400, claims["sub"] is String,
            let publicBytes = Base64URL.decode(key), let publicKey = try? P256.Signing.PublicKey(x963Representation: publicBytes),
            let signature = Base64URL.decode(parts[2]), let ecdsa = try? P256.Signing.ECDSASignature(rawRepresentation: signature)
        else { return false }
        guard publicKey.isValidSignature(ecdsa, for: Data("\(parts[0]).\(parts[1])".utf8)) else { return false }
        mutable.withLock {
            if $0.verifiedVAPID.count >= 10_000 { $0.verifiedVAPID.removeAll() }
            $0.verifiedVAPID[header] = expiry
        }
        return true
    }
}
