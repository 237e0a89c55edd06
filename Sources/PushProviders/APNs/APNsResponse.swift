/// A `reason` APNs answers with, as Apple documents them; `unknown` keeps one this build does
/// not know by name.
public enum APNsReason: Error, PNSReasonCode {
    case badCollapseId, badDeviceToken, badExpirationDate, badMessageId, badPriority, badTopic, deviceTokenNotForTopic
    case duplicateHeaders, idleTimeout, invalidPushType, missingDeviceToken, missingTopic, payloadEmpty, topicDisallowed
    case badCertificate, badCertificateEnvironment, expiredProviderToken, forbidden, invalidProviderToken, missingProviderToken
    case badPath, methodNotAllowed, expiredToken, unregistered, payloadTooLarge, tooManyProviderTokenUpdates, tooManyRequests
    case internalServerError, serviceUnavailable, shutdown
    case unknown(String)

    /// Each known reason with Apple's spelling.
    public static let names: [(APNsReason, String)] = [
        (.badCollapseId, "BadCollapseId"), (.badDeviceToken, "BadDeviceToken"), (.badExpirationDate, "BadExpirationDate"),
        (.badMessageId, "BadMessageId"), (.badPriority, "BadPriority"), (.badTopic, "BadTopic"),
        (.deviceTokenNotForTopic, "DeviceTokenNotForTopic"), (.duplicateHeaders, "DuplicateHeaders"), (.idleTimeout, "IdleTimeout"),
        (.invalidPushType, "InvalidPushType"), (.missingDeviceToken, "MissingDeviceToken"), (.missingTopic, "MissingTopic"),
        (.payloadEmpty, "PayloadEmpty"), (.topicDisallowed, "TopicDisallowed"), (.badCertificate, "BadCertificate"),
        (.badCertificateEnvironment, "BadCertificateEnvironment"), (.expiredProviderToken, "ExpiredProviderToken"), (.forbidden, "Forbidden"),
        (.invalidProviderToken, "InvalidProviderToken"), (.missingProviderToken, "MissingProviderToken"), (.badPath, "BadPath"),
        (.methodNotAllowed, "MethodNotAllowed"), (.expiredToken, "ExpiredToken"), (.unregistered, "Unregistered"),
        (.payloadTooLarge, "PayloadTooLarge"), (.tooManyProviderTokenUpdates, "TooManyProviderTokenUpdates"),
        (.tooManyRequests, "TooManyRequests"), (.internalServerError, "InternalServerError"), (.serviceUnavailable, "ServiceUnavailable"),
        (.shutdown, "Shutdown"),
    ]

    public var unknownName: String? {
        if case .unknown(let name) = self { return name }
        return nil
    }
}

/// APNs answers (HTTP status and `reason`), as Apple documents them, classified.
public enum APNsResponse {
    public static func classify(status: Int, reason: APNsReason?, retryAfter: Duration? = nil) -> PNSClassification {
        switch (status, reason) {
        case (200, _): .delivered
        case (400, .badDeviceToken), (400, .deviceTokenNotForTopic), (410, .unregistered), (410, .expiredToken), (410, nil): .invalidHandle
        case (400, .badCollapseId), (400, .badExpirationDate), (400, .badMessageId), (400, .badPriority), (400, .duplicateHeaders),
            (400, .invalidPushType), (400, .missingDeviceToken), (400, .payloadEmpty), (413, _):
            .payloadRejected
        case (400, .idleTimeout): .retry(retryAfter: nil)
        case (400, .badTopic), (400, .missingTopic), (400, .topicDisallowed), (400, .badCertificate), (400, .badCertificateEnvironment):
            .misconfigured(.refusedByPNS(reason?.description ?? ""))
        case (403, .expiredProviderToken): .renewToken
        case (403, let reason?): .misconfigured(.refusedByPNS(reason.description))
        case (404, _), (405, _): .misconfigured(.refusedByPNS(reason?.description ?? "BadPath"))
        case (429, _): .throttled(retryAfter: retryAfter)
        case (500, _), (502, _), (503, _), (504, _): .retry(retryAfter: retryAfter)
        default: .unknown(reason.map { "\(status) \($0)" } ?? String(status))
        }
    }
}
