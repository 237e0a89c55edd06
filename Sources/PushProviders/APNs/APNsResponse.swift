/// APNs answers (HTTP status and `reason`), as Apple documents them, classified.
public enum APNsResponse {
    public static func classify(status: Int, reason: String?, retryAfter: Duration? = nil) -> PNSClassification {
        switch (status, reason) {
        case (200, _): .delivered
        case (400, "BadDeviceToken"), (400, "DeviceTokenNotForTopic"), (410, "Unregistered"), (410, "ExpiredToken"), (410, nil): .invalidHandle
        case (400, "BadCollapseId"), (400, "BadExpirationDate"), (400, "BadMessageId"), (400, "BadPriority"), (400, "DuplicateHeaders"),
            (400, "InvalidPushType"), (400, "MissingDeviceToken"), (400, "PayloadEmpty"), (413, _):
            .payloadRejected
        case (400, "IdleTimeout"): .retry(retryAfter: nil)
        case (400, "BadTopic"), (400, "MissingTopic"), (400, "TopicDisallowed"), (400, "BadCertificate"), (400, "BadCertificateEnvironment"):
            .misconfigured(reason ?? "")
        case (403, "ExpiredProviderToken"): .renewToken
        case (403, let reason?): .misconfigured(reason)
        case (404, _), (405, _): .misconfigured(reason ?? "BadPath")
        case (429, _): .throttled(retryAfter: retryAfter)
        case (500, _), (502, _), (503, _), (504, _): .retry(retryAfter: retryAfter)
        default: .unknown(reason.map { "\(status) \($0)" } ?? String(status))
        }
    }
}
