import Foundation
import NIOCore
import PushModel
import PushProviders

/// The Huawei Push Kit simulator and its OAuth token endpoint, and the ADM simulator and its
/// Login with Amazon token endpoint: both take client credentials and bearer tokens.
extension SimulatorState {
    func hmsToken(_ request: SimRequest) -> SimAnswer {
        clientCredentialsToken(request, service: "hms", scope: nil, secret: { hmsClients[$0]?.secret }) { token, client in
            let app = hmsClients[client]?.appId ?? ""
            mutable.withLock { $0.hmsAccessTokens[token] = app }
        }
    }

    func hms(_ request: SimRequest, appId: String, faults: SimulatorFaults) -> SimAnswer {
        let answer: SimAnswer = {
            guard let bearer = bearer(request), let app = mutable.withLock({ $0.hmsAccessTokens[bearer] }) else {
                return hmsAnswer(401, "80200003", "OAuth token expired")
            }
            guard app == appId else { return hmsAnswer(401, "80200001", "Oauth Authentication error") }
            guard let object = JSONLimits.dictionary(Data(request.body.readableBytesView)), let message = object["message"] as? [String: Any],
                let tokens = message["token"] as? [String], message["data"] != nil || message["notification"] != nil || message["android"] != nil
            else { return hmsAnswer(400, "80100003", "Illegal payload") }
            guard (1...1000).contains(tokens.count), tokens.allSatisfy({ !$0.isEmpty }) else {
                return hmsAnswer(400, "80300010", "Number of tokens is invalid")
            }
            if let data = message["data"], !(data is String) { return hmsAnswer(400, "80100003", "message.data must be a string") }
            // The limit is on the message without its tokens.
            let tokenBytes = tokens.reduce(0) { $0 + $1.utf8.count + 3 }
            guard request.body.readableBytes - tokenBytes <= 4096 + 64 else {
                return hmsAnswer(400, "80300008", "The message body size exceeds the default value")
            }
            let dead = tokens.filter(faults.isDead)
            if dead.count == tokens.count { return hmsAnswer(400, "80300007", "All the tokens are invalid") }
            if let injected = injected(
                faults, throttle: { Self.withRetryAfter(Self.json(503, #"{"msg":"flow control"}"#), faults.retryAfterSeconds) },
                error: { self.hmsAnswer(500, "81000001", "System inner error") })
            {
                return injected
            }
            for token in tokens where !dead.contains(token) {
                record(.hms, handle: token, payload: String(buffer: request.body), header: request.header, names: [])
            }
            guard dead.isEmpty else {
                let detail = String(
                    decoding: try! JSONSerialization.data(withJSONObject: [
                        "success": tokens.count - dead.count, "failure": dead.count, "illegal_tokens": dead,
                    ]), as: UTF8.self)
                return hmsAnswer(200, "80100000", detail)
            }
            return hmsAnswer(200, "80000000", "Success")
        }()
        return count(.hms, answer)
    }

    func hmsAnswer(_ status: Int, _ code: String, _ message: String) -> SimAnswer {
        Self.json(status, #"{"code":"\#(code)","msg":\#(String(decoding: JSONText.quoted(message), as: UTF8.self)),"requestId":"\#(uniqueID())"}"#)
    }

    func admToken(_ request: SimRequest) -> SimAnswer {
        clientCredentialsToken(request, service: "adm", scope: "messaging:push", secret: { admClients[$0] }) { token, _ in
            mutable.withLock { _ = $0.admAccessTokens.insert(token) }
        }
    }

    func adm(_ request: SimRequest, registrationId: String, faults: SimulatorFaults) -> SimAnswer {
        let answer: SimAnswer = {
            guard let bearer = bearer(request), mutable.withLock({ $0.admAccessTokens.contains(bearer) }) else {
                return admReason(401, "AccessTokenExpired")
            }
            guard request.header("x-amzn-type-version") == "com.amazon.device.messaging.ADMMessage@1.0" else { return admReason(400, "InvalidType") }
            guard let registration = registrationId.removingPercentEncoding, !registration.isEmpty else {
                return admReason(400, "InvalidRegistrationId")
            }
            guard let message = JSONLimits.dictionary(Data(request.body.readableBytesView)), let data = message["data"] as? [String: Any],
                data.values.allSatisfy({ $0 is String })
            else { return admReason(400, "InvalidData") }
            if let expires = message["expiresAfter"], !((expires as? Int).map { (60...2_678_400).contains($0) } ?? false) {
                return admReason(400, "InvalidExpiration")
            }
            guard data.reduce(0, { $0 + $1.key.utf8.count + (($1.value as? String)?.utf8.count ?? 0) + 6 }) <= 6144 else {
                return admReason(413, "MessageTooLarge")
            }
            if faults.isDead(registration) { return admReason(400, "Unregistered") }
            if let injected = injected(
                faults, throttle: { Self.withRetryAfter(self.admReason(429, "MaxRateExceeded"), faults.retryAfterSeconds) },
                error: { Self.withRetryAfter(self.admReason(503, "Unavailable"), faults.retryAfterSeconds) })
            {
                return injected
            }
            record(.adm, handle: registration, payload: String(buffer: request.body), header: request.header, names: [])
            return SimAnswer(
                status: 200, headers: [("Content-Type", "application/json"), ("x-amzn-RequestId", uniqueID())],
                body: #"{"registrationID":\#(String(decoding: JSONText.quoted(registration), as: UTF8.self))}"#)
        }()
        return count(.adm, answer)
    }

    func admReason(_ status: Int, _ reason: String) -> SimAnswer {
        Self.json(status, #"{"reason":"\#(reason)"}"#)
    }
}
