import Foundation
import PushConfiguration
import PushModel

/// Huawei Push Kit's server API: `POST /v1/{appId}/messages:send` with an OAuth access token
/// from the client-credentials flow. The body is Push Kit's request, `{"message": …}` (or the
/// message alone), with the device's token put in `message.token`.
public struct HMSService: PerDeviceService {
    public static let platform = Platform.hms
    /// Push Kit's limit on a message (bytes).
    public static let maximumPayload = 4096

    public struct Shared {
        var url: String
        var body: SplicedJSON
    }

    public init() {}

    public func accessTokens(_ credentials: HMSCredentials, transport: any PNSTransport, now: @escaping @Sendable () -> Date)
        -> CachedAccessToken?
    {
        .clientCredentials(
            tokenURI: credentials.resolvedTokenURI, clientId: credentials.resolvedClientId, secret: credentials.clientSecret, scope: nil,
            transport: transport, now: now)
    }

    public func shared(_ delivery: PNSDelivery, credentials: HMSCredentials) -> Result<Shared, NotSent> {
        guard let object = JSONLimits.dictionary(Data(delivery.body.utf8)) else {
            return .failure(NotSent(.payloadRejected, "80100003: the Push Kit body is not a JSON object"))
        }
        var message = (object["message"] as? [String: Any]) ?? object
        // A PushHub send addresses devices; a topic or condition would reach others.
        for field in ["topic", "condition"] where message[field] != nil {
            return .failure(NotSent(.payloadRejected, "80100003: message.\(field) is not allowed; PushHub addresses each device by its token"))
        }
        if let expiresAt = delivery.expiresAt {
            var android = (message["android"] as? [String: Any]) ?? [:]
            if android["ttl"] == nil { android["ttl"] = "\(max(1, Int(expiresAt.timeIntervalSinceNow.rounded(.up))))s" }
            message["android"] = android
        }
        let url = "\(credentials.resolvedEndpoint)/v1/\(credentials.appId)/messages:send"
        return SplicedJSON.make { marker throws(SplicedJSON.Failure) in
            var addressed = message
            addressed["token"] = [marker]
            return try SplicedJSON.encode(["validate_only": false, "message": addressed])
        }
        .mapError { NotSent(.payloadRejected, "80100003: \($0.message)") }
        .flatMap { body in
            // The message without its token is what Push Kit's limit is about.
            guard body.prefix.count + body.suffix.count <= Self.maximumPayload + 64 else {
                return .failure(NotSent(.payloadRejected, "80300008: the message is larger than \(Self.maximumPayload) bytes"))
            }
            return .success(Shared(url: url, body: body))
        }
    }

    public func request(_ shared: Shared, to token: String, credentials: HMSCredentials) -> Result<PNSRequest, NotSent> {
        .success(PNSRequest(.url(shared.url), headers: .json, body: shared.body.body(token)))
    }

    public func classify(_ response: PNSResponse) -> PNSAnswer {
        let object = response.json
        let code = (object?["code"] as? String) ?? (object?["code"] as? NSNumber)?.stringValue
        let message = object?["msg"] as? String
        let classification = Self.classify(status: response.status, code: code, message: message, retryAfter: response.retryAfter)
        guard classification != .delivered else { return PNSAnswer(.delivered, status: response.status) }
        return PNSAnswer(
            classification, status: response.status, reason: code.map { code in message.map { "\(code) \($0)" } ?? code } ?? "HTTP \(response.status)"
        )
    }

    /// Push Kit's answers: the HTTP status and the body's `code`.
    public static func classify(status: Int, code: String?, message: String?, retryAfter: Duration?) -> PNSClassification {
        switch (status, code) {
        case (200, "80000000"): return .delivered
        // Some of the tokens were refused; with one token a request, that token. Its `msg` is
        // JSON listing them (`illegal_tokens`, or `illegalTokens` in newer answers).
        case (_, "80100000"):
            let failed = (message ?? "").range(of: "illegal", options: .caseInsensitive) != nil
            return failed ? .invalidHandle : .delivered
        case (_, "80300007"): return .invalidHandle
        case (_, "80200001"), (_, "80200003"), (401, _): return .renewToken
        case (_, "80100001"), (_, "80100003"), (_, "80100004"), (_, "80300008"), (_, "80300010"): return .payloadRejected
        case (_, "80300002"), (403, _): return .misconfigured(.refusedByPNS(code.map { "\($0) \(message ?? "")" } ?? "HTTP 403"))
        // Push Kit answers flow control with 503.
        case (429, _), (503, _): return .throttled(retryAfter: retryAfter)
        case (500..., _), (_, "81000001"): return .retry(retryAfter: retryAfter)
        case (200, nil): return .unknown("200 without a code")
        default: return .unknown(code.map { "\(status) \($0)" } ?? String(status))
        }
    }
}

/// Huawei Push Kit's provider.
public typealias HMSProvider = PerDeviceProvider<HMSService>
