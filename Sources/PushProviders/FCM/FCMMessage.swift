import Foundation
import PushModel

/// FCM HTTP v1 request bodies, and what FCM's answers mean.
public enum FCMMessage {
    public typealias Failure = SplicedJSON.Failure

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
        return try SplicedJSON.encode(["message": message])
    }

    static func string(_ value: Any) -> String {
        if let text = value as? String { return text }
        if let data = try? JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed, .sortedKeys]) {
            return String(decoding: data, as: UTF8.self)
        }
        return "\(value)"
    }

    /// The v1 request body for `body` in `format`, cut around its token, so the pushes of one
    /// batch share one parse and one serialization; or why FCM would refuse it.
    static func template(body: String, format: NotificationFormat) -> Result<SplicedJSON, Failure> {
        if format != .gcm, let spliced = splicedV1(Data(body.utf8)) { return .success(spliced) }
        return SplicedJSON.make { marker throws(Failure) in try request(body: body, format: format == .gcm ? "gcm" : "fcmv1", token: marker) }
    }

    /// A v1 body's request cut around its token from the body's own text, without parsing it
    /// into objects and writing it again (which was a quarter of the FCM worker's time when
    /// each batch held one device): `{"message":{"token":…,` and the message's members as
    /// written. Nil where `request` must decide: a body that is not a JSON object, a key given
    /// twice, a message that already has a token, a `message` beside other keys or that is
    /// not an object, or a message that would pass FCM's size only once written compactly.
    static func splicedV1(_ body: Data) -> SplicedJSON? {
        guard let top = JSONMembers.of(body) else { return nil }
        var message = top
        if let wrapped = top.members.first(where: { $0.key == "message" }) {
            guard top.members.count == 1, body[wrapped.value.lowerBound] == UInt8(ascii: "{"),
                let inner = JSONMembers.of(body, in: wrapped.value)
            else { return nil }
            message = inner
        }
        guard !message.members.contains(where: { $0.key == "token" }), message.range.count <= FCMService.maximumPayload else { return nil }
        var suffix = Data()
        if !message.members.isEmpty {
            suffix.append(UInt8(ascii: ","))
            suffix.append(body[(message.range.lowerBound + 1)..<(message.range.upperBound - 1)])
        }
        suffix.append(contentsOf: "}}".utf8)
        return SplicedJSON(prefix: Data(#"{"message":{"token":"#.utf8), suffix: suffix)
    }

    /// The request for the device `token` from a batch's template.
    static func make(_ token: String, from template: SplicedJSON, url: String) -> Result<PNSRequest, Failure> {
        let body = template.body(token)
        guard body.count <= FCMService.maximumPayload + 512 else { return .failure(Failure(message: "message too big")) }
        return .success(PNSRequest(.url(url), headers: .json, body: body))
    }

    /// FCM v1 answers: HTTP status and the `error.status` / `FcmError.errorCode` of the body.
    public static func classify(status: Int, errorCode: FCMErrorCode?, retryAfter: Duration? = nil) -> PNSClassification {
        switch (status, errorCode) {
        case (200, _): .delivered
        case (401, .thirdPartyAuthError): .misconfigured(.refusedByPNS(FCMErrorCode.thirdPartyAuthError.description))
        case (401, _): .renewToken
        case (404, _), (_, .unregistered): .invalidHandle
        case (400, .invalidArgument), (400, nil): .payloadRejected
        case (429, _), (_, .quotaExceeded): .throttled(retryAfter: retryAfter)
        case (503, _), (500, _), (_, .unavailable), (_, .internal): .retry(retryAfter: retryAfter)
        case (403, .senderIdMismatch), (_, .thirdPartyAuthError): .misconfigured(.refusedByPNS(errorCode?.description ?? "UNAUTHENTICATED"))
        default: .unknown(errorCode.map { "\(status) \($0)" } ?? String(status))
        }
    }

    /// `FcmError.errorCode` from the details, else the error's `status`.
    static func errorCode(_ response: PNSResponse) -> FCMErrorCode? {
        guard let error = response.json?["error"] as? [String: Any] else { return nil }
        for detail in (error["details"] as? [[String: Any]]) ?? [] {
            if let code = detail["errorCode"] as? String { return FCMErrorCode(code) }
        }
        return (error["status"] as? String).map(FCMErrorCode.init)
    }
}

/// An FCM v1 error code (`FcmError.errorCode`, or the error's gRPC `status`); `unknown` keeps
/// one this build does not know by name.
public enum FCMErrorCode: PNSReasonCode {
    case unspecifiedError, invalidArgument, unregistered, senderIdMismatch, quotaExceeded, unavailable, `internal`, thirdPartyAuthError
    case unauthenticated, permissionDenied, notFound
    case unknown(String)

    /// Each known code with FCM's spelling.
    public static let names: [(FCMErrorCode, String)] = [
        (.unspecifiedError, "UNSPECIFIED_ERROR"), (.invalidArgument, "INVALID_ARGUMENT"), (.unregistered, "UNREGISTERED"),
        (.senderIdMismatch, "SENDER_ID_MISMATCH"), (.quotaExceeded, "QUOTA_EXCEEDED"), (.unavailable, "UNAVAILABLE"), (.internal, "INTERNAL"),
        (.thirdPartyAuthError, "THIRD_PARTY_AUTH_ERROR"), (.unauthenticated, "UNAUTHENTICATED"), (.permissionDenied, "PERMISSION_DENIED"),
        (.notFound, "NOT_FOUND"),
    ]

    public var unknownName: String? {
        if case .unknown(let name) = self { return name }
        return nil
    }
}
