import Foundation
import PushModel

/// FCM HTTP v1 request bodies, and what FCM's answers mean.
public enum FCMMessage {
    public struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }

    /// The v1 request for one device. A `fcmv1` body is the `message` object (or a whole
    /// `{"message": …}`); a legacy `gcm` body (`{"data": …, "notification": …}`, as in the
    /// tutorials) is mapped onto a v1 message, `data` values made strings as v1 requires.
    public static func request(body: String, format: String, token: String) throws(Failure) -> Data {
        guard let object = JSONLimits.dictionary(Data(body.utf8)) else {
            throw Failure(message: "the FCM body is not a JSON object")
        }
        var message: [String: Any]
        if format == "gcm" {
            message = [:]
            var android: [String: Any] = [:]
            if let data = object["data"] as? [String: Any] { message["data"] = data.mapValues(Self.string) }
            if let notification = object["notification"] as? [String: Any] {
                // v1's notification holds title, body and image; the rest goes to android.notification.
                let common = ["title", "body", "image"]
                message["notification"] = notification.filter { common.contains($0.key) }.mapValues(Self.string)
                let rest = notification.filter { !common.contains($0.key) }
                if !rest.isEmpty { android["notification"] = rest }
            }
            if let priority = object["priority"] as? String { android["priority"] = priority == "high" ? "HIGH" : "NORMAL" }
            if let ttl = object["time_to_live"] as? Int { android["ttl"] = "\(ttl)s" }
            if !android.isEmpty { message["android"] = android }
        } else {
            message = (object["message"] as? [String: Any]) ?? object
        }
        message["token"] = token
        do {
            return try JSONSerialization.data(withJSONObject: ["message": message], options: [.sortedKeys, .withoutEscapingSlashes])
        } catch {
            throw Failure(message: "the FCM message could not be encoded")
        }
    }

    static func string(_ value: Any) -> String {
        if let text = value as? String { return text }
        if let data = try? JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed, .sortedKeys]) {
            return String(decoding: data, as: UTF8.self)
        }
        return "\(value)"
    }

    /// FCM v1 answers: HTTP status and the `error.status` / `FcmError.errorCode` of the body.
    public static func classify(status: Int, errorCode: String?, retryAfter: Duration? = nil) -> PNSClassification {
        switch (status, errorCode) {
        case (200, _): .delivered
        case (404, _), (_, "UNREGISTERED"): .invalidHandle
        case (400, "INVALID_ARGUMENT"), (400, nil): .payloadRejected
        case (429, _), (_, "QUOTA_EXCEEDED"): .throttled(retryAfter: retryAfter)
        case (503, _), (500, _), (_, "UNAVAILABLE"), (_, "INTERNAL"): .retry(retryAfter: retryAfter)
        case (401, _), (403, "SENDER_ID_MISMATCH"), (_, "THIRD_PARTY_AUTH_ERROR"): .misconfigured(errorCode ?? "UNAUTHENTICATED")
        default: .unknown(errorCode.map { "\(status) \($0)" } ?? String(status))
        }
    }
}
