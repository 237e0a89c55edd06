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

/// The FCM v1 simulator and Google's token endpoint.
extension SimulatorState {
    func googleToken(_ request: SimRequest) -> SimAnswer {
        let form = Self.form(request.body)
        mutable.withLock { $0.tokenRequests["fcm", default: 0] += 1 }
        guard form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer", let assertion = form["assertion"] else {
            return Self.json(400, #"{"error":"unsupported_grant_type"}"#)
        }
        let parts = assertion.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, let header = Self.jsonObject(parts[0]), let claims = Self.jsonObject(parts[1]),
            header["alg"] as? String == "RS256", let email = claims["iss"] as? String, let client = fcmClients[email],
            claims["scope"] as? String == FCMAccessTokens.scope, let expiry = claims["exp"] as? Int, expiry > Int(Date().timeIntervalSince1970),
            let signature = Base64URL.decode(parts[2]), let key = try? _RSA.Signing.PublicKey(derRepresentation: client.publicKey),
            key.isValidSignature(
                _RSA.Signing.RSASignature(rawRepresentation: signature), for: Data("\(parts[0]).\(parts[1])".utf8), padding: .insecurePKCS1v1_5)
        else {
            return Self.json(400, #"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#)
        }
        let token = "ya29.sim-" + UUID().uuidString
        mutable.withLock { $0.fcmAccessTokens[token] = client.projects }
        return Self.json(200, #"{"access_token":"\#(token)","expires_in":3599,"token_type":"Bearer"}"#)
    }

    func fcm(_ request: SimRequest, project: String, faults: SimulatorFaults) -> SimAnswer {
        let body = request.body
        let answer: SimAnswer = {
            guard let bearer = bearer(request), let projects = mutable.withLock({ $0.fcmAccessTokens[bearer] }) else {
                return fcmError(401, "UNAUTHENTICATED", nil, "Request had invalid authentication credentials.")
            }
            guard projects.contains(project) else { return fcmError(403, "PERMISSION_DENIED", "SENDER_ID_MISMATCH", "SenderId mismatch") }
            let token: String
            switch fcmMessageToken(body) {
            case .token(let found): token = found
            case .refused(let refusal): return refusal
            }
            guard body.readableBytes <= 4096 + 512 else { return fcmError(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "Message is too big") }
            if faults.isDead(token) { return fcmError(404, "NOT_FOUND", "UNREGISTERED", "Requested entity was not found.") }
            if let injected = injected(
                faults, throttle: { self.fcmError(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", "Quota exceeded.") },
                error: { self.fcmError(503, "UNAVAILABLE", "UNAVAILABLE", "The service is currently unavailable.") })
            {
                return injected
            }
            record(.fcm, handle: token, payload: String(buffer: body), header: request.header, names: [])
            return Self.json(200, #"{"name":"projects/\#(project)/messages/0:\#(uniqueID())"}"#)
        }()
        return count(.fcm, answer)
    }

    /// The message's token, or the 400 for a body that is not a valid FCM message. A batch's
    /// messages differ in their token only, so once a message is found valid, the rest of it
    /// (the bytes around its one `"token":"…"`) is remembered, and a message whose rest is
    /// remembered is not parsed again.
    func fcmMessageToken(_ body: ByteBuffer) -> FCMMessageCheck {
        let split = body.withUnsafeReadableBytes { Self.splitToken($0) }
        if let split, !split.token.isEmpty, mutable.withLock({ $0.validFCMMessages.contains(split.rest) }) { return .token(split.token) }
        guard let object = try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any],
            let message = object["message"] as? [String: Any], let token = message["token"] as? String, !token.isEmpty
        else {
            return .refused(fcmError(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "The message is missing or has no token."))
        }
        if let data = message["data"] as? [String: Any], data.values.contains(where: { !($0 is String) }) {
            return .refused(fcmError(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "Invalid value at 'message.data': values must be strings."))
        }
        // Remembered only when the one "token" found is the message's own.
        if let split, split.token == token { remember(split.rest, in: \.validFCMMessages) }
        return .token(token)
    }

    /// A message's token, or the answer that refuses the message.
    enum FCMMessageCheck {
        case token(String)
        case refused(SimAnswer)
    }

    private static let tokenName = Array(#""token""#.utf8)
    private static let tokenKey = Array(#""token":""#.utf8)

    /// The value of the body's `"token":"…"` (no escapes, no control characters) and the body
    /// without it; nil unless `"token"` appears in the body once, as that key.
    static func splitToken(_ bytes: UnsafeRawBufferPointer) -> (token: String, rest: Data)? {
        func find(_ needle: [UInt8], from start: Int) -> Int? {
            guard bytes.count >= needle.count, start <= bytes.count - needle.count else { return nil }
            for at in start...(bytes.count - needle.count)
            where bytes[at] == needle[0] && (1..<needle.count).allSatisfy({ bytes[at + $0] == needle[$0] }) {
                return at
            }
            return nil
        }
        guard let key = find(tokenName, from: 0), find(tokenName, from: key + 1) == nil, find(tokenKey, from: key) == key else { return nil }
        let start = key + tokenKey.count
        guard let end = bytes[start...].firstIndex(of: UInt8(ascii: "\"")),
            bytes[start..<end].allSatisfy({ $0 >= 0x20 && $0 != UInt8(ascii: "\\") })
        else { return nil }
        var rest = Data(bytes[..<start])
        rest.append(contentsOf: bytes[end...])
        return (String(decoding: bytes[start..<end], as: UTF8.self), rest)
    }

    func fcmError(_ status: Int, _ statusText: String, _ errorCode: String?, _ message: String) -> SimAnswer {
        let details = errorCode.map { #","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#($0)"}]"# } ?? ""
        let answer = Self.json(status, #"{"error":{"code":\#(status),"message":"\#(message)","status":"\#(statusText)"\#(details)}}"#)
        return status == 429 || status == 503 ? Self.withRetryAfter(answer, faults.retryAfterSeconds) : answer
    }
}
