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

/// The APNs simulator: provider tokens checked against the configured keys, Apple's reasons.
extension SimulatorState {
    /// APNs: `POST /3/device/{token}`; `header` reads a request header by lower-case name.
    func apns(token: String, header: (String) -> String?, payload: Data, faults: SimulatorFaults) -> SimAnswer {
        let answer: SimAnswer = {
            guard let authorization = header("authorization"), authorization.utf8.count > 7,
                authorization.utf8.prefix(7).elementsEqual("bearer ".utf8, by: { $0 | 0x20 == $1 })
            else {
                return apnsError(403, "MissingProviderToken", faults)
            }
            let jwt = String(decoding: authorization.utf8.dropFirst(7), as: UTF8.self)
            guard let verified = verifyProviderToken(jwt) else { return apnsError(403, "InvalidProviderToken", faults) }
            let now = Int(Date().timeIntervalSince1970)
            if now - verified.issuedAt > 3600 || verified.issuedAt < (faults.expireProviderTokensBefore ?? .min) {
                return apnsError(403, "ExpiredProviderToken", faults)
            }
            guard let topic = header("apns-topic") else { return apnsError(400, "MissingTopic", faults) }
            guard verified.bundleIds.contains(where: { topic == $0 || topic.hasPrefix($0 + ".") }) else {
                return apnsError(400, "TopicDisallowed", faults)
            }
            if let type = header("apns-push-type"),
                !["alert", "background", "location", "voip", "complication", "fileprovider", "mdm", "liveactivity", "pushtotalk"].contains(type)
            {
                return apnsError(400, "InvalidPushType", faults)
            }
            if let priority = header("apns-priority"), !["1", "5", "10"].contains(priority) { return apnsError(400, "BadPriority", faults) }
            if let collapse = header("apns-collapse-id"), collapse.utf8.count > 64 { return apnsError(400, "BadCollapseId", faults) }
            guard (8...200).contains(token.utf8.count), token.utf8.allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 | 0x20 >= 97 && $0 | 0x20 <= 102) })
            else { return apnsError(400, "BadDeviceToken", faults) }
            guard !payload.isEmpty else { return apnsError(400, "PayloadEmpty", faults) }
            guard payload.count <= 4096 else { return apnsError(413, "PayloadTooLarge", faults) }
            guard isJSONObject(payload) else { return apnsError(400, "BadPayload", faults) }
            if faults.isDead(token) { return apnsError(410, "Unregistered", faults, timestamp: true) }
            if let injected = injected(
                faults, throttle: { apnsError(429, "TooManyRequests", faults) }, error: { apnsError(503, "ServiceUnavailable", faults) })
            {
                return injected
            }
            record(
                .apns, handle: token, payload: String(decoding: payload, as: UTF8.self), header: header,
                names: [
                    "apns-topic", "apns-push-type", "apns-priority", "apns-expiration", "apns-collapse-id", "apns-id",
                ])
            return SimAnswer(status: 200, headers: [("apns-id", header("apns-id") ?? uniqueID())])
        }()
        count(.apns, answer.status)
        return answer
    }

    /// Whether `payload` is a JSON object. A broadcast sends one payload many times, so the
    /// last payloads found valid are remembered rather than parsed again.
    func isJSONObject(_ payload: Data) -> Bool {
        passes(payload, remembered: \.validPayloads) { (try? JSONSerialization.jsonObject(with: $0)) is [String: Any] }
    }

    func verifyProviderToken(_ jwt: String) -> (issuedAt: Int, bundleIds: Set<String>)? {
        if let known = mutable.withLock({ $0.verifiedProviderTokens[jwt] }) { return known }
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, let header = Self.jsonObject(parts[0]), let claims = Self.jsonObject(parts[1]),
            header["alg"] as? String == "ES256", let kid = header["kid"] as? String, let key = apnsKeys[kid],
            claims["iss"] as? String == key.teamId, let issuedAt = claims["iat"] as? Int,
            let signature = Base64URL.decode(parts[2]), let ecdsa = try? P256.Signing.ECDSASignature(rawRepresentation: signature),
            let publicKey = try? P256.Signing.PublicKey(rawRepresentation: key.publicKey),
            publicKey.isValidSignature(ecdsa, for: Data("\(parts[0]).\(parts[1])".utf8))
        else { return nil }
        let verified = (issuedAt: issuedAt, bundleIds: key.bundleIds)
        mutable.withLock {
            if $0.verifiedProviderTokens.count > 10_000 { $0.verifiedProviderTokens.removeAll() }
            $0.verifiedProviderTokens[jwt] = verified
        }
        return verified
    }

    func apnsError(_ status: Int, _ reason: String, _ faults: SimulatorFaults, timestamp: Bool = false) -> SimAnswer {
        var body = #"{"reason":"\#(reason)""#
        if timestamp { body += #","timestamp":\#(Int(Date().timeIntervalSince1970 * 1000))"# }
        var headers = [("content-type", "application/json")]
        if status == 429 || status == 503 { headers.append(("retry-after", String(faults.retryAfterSeconds))) }
        return SimAnswer(status: status, headers: headers, body: body + "}")
    }
}
