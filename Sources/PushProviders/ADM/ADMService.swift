import Foundation
import PushConfiguration
import PushModel

/// Amazon Device Messaging: `POST /messaging/registrations/{registrationId}/messages` with a
/// Login with Amazon access token (client credentials, scope `messaging:push`). The body is
/// ADM's message: `data` (strings), `consolidationKey`, `expiresAfter`.
public struct ADMService: PerDeviceService {
    public static let platform = Platform.adm
    /// ADM's limit on a message's data (bytes).
    public static let maximumPayload = 6144

    public struct Shared {
        var body: Data
        var base: String
    }

    public init() {}

    public func accessTokens(_ credentials: ADMCredentials, transport: any PNSTransport, now: @escaping @Sendable () -> Date)
        -> CachedAccessToken?
    {
        .clientCredentials(
            tokenURI: credentials.resolvedTokenURI, clientId: credentials.clientId, secret: credentials.clientSecret, scope: "messaging:push",
            transport: transport, now: now)
    }

    public func shared(_ delivery: PNSDelivery, credentials: ADMCredentials) -> Result<Shared, NotSent> {
        guard var message = JSONLimits.dictionary(Data(delivery.body.utf8)) else {
            return .failure(NotSent(.payloadRejected, "InvalidData: the ADM body is not a JSON object"))
        }
        // ADM takes string values only; a template's numbers become their text.
        guard let data = message["data"] as? [String: Any] else {
            return .failure(NotSent(.payloadRejected, "InvalidData: an ADM message needs a data object"))
        }
        message["data"] = data.mapValues(FCMMessage.string)
        // ADM takes 60 s to 31 days.
        if let expiresAt = delivery.expiresAt, message["expiresAfter"] == nil {
            message["expiresAfter"] = min(2_678_400, max(60, Int(expiresAt.timeIntervalSinceNow.rounded(.up))))
        }
        let body: Data
        do { body = try SplicedJSON.encode(message) } catch { return .failure(NotSent(.payloadRejected, "InvalidData: \(error.message)")) }
        guard body.count <= Self.maximumPayload + 512 else {
            return .failure(NotSent(.payloadRejected, "MessageTooLarge: the message is larger than \(Self.maximumPayload) bytes"))
        }
        return .success(Shared(body: body, base: "\(credentials.resolvedEndpoint)/messaging/registrations/"))
    }

    static let headers: PNSHeaderFields = [
        ("content-type", "application/json"), ("accept", "application/json"),
        ("x-amzn-type-version", "com.amazon.device.messaging.ADMMessage@1.0"),
        ("x-amzn-accept-type", "com.amazon.device.messaging.ADMSendResult@1.0"),
    ]

    public func request(_ shared: Shared, to registrationId: String, credentials: ADMCredentials) -> Result<PNSRequest, NotSent> {
        // One path segment, whatever the id holds (`..` included).
        .success(PNSRequest(.url(shared.base + FormEncoding.pathSegment(registrationId) + "/messages"), headers: Self.headers, body: shared.body))
    }

    public func classify(_ response: PNSResponse) -> PNSAnswer {
        guard response.status != 200 else { return PNSAnswer(.delivered, status: 200) }
        let reason = response.json?["reason"] as? String
        let classification = Self.classify(status: response.status, reason: reason, retryAfter: response.retryAfter)
        return PNSAnswer(classification, status: response.status, reason: response.status == 200 ? nil : reason ?? "HTTP \(response.status)")
    }

    /// ADM's answers: the HTTP status and the body's `reason`.
    public static func classify(status: Int, reason: String?, retryAfter: Duration?) -> PNSClassification {
        switch (status, reason) {
        case (200, _): .delivered
        case (400, "InvalidRegistrationId"), (400, "Unregistered"), (410, _): .invalidHandle
        case (400, _), (413, _): .payloadRejected
        case (401, _): .renewToken
        case (403, _): .misconfigured(.refusedByPNS(reason ?? "HTTP 403"))
        case (429, _): .throttled(retryAfter: retryAfter)
        case (500..., _): .retry(retryAfter: retryAfter)
        default: .unknown(reason.map { "\(status) \($0)" } ?? String(status))
        }
    }
}

/// Amazon Device Messaging's provider.
public typealias ADMProvider = PerDeviceProvider<ADMService>
