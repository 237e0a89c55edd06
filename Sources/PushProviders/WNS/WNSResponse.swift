/// WNS answers: the HTTP status (and `X-WNS-Error-Description`), classified.
public enum WNSResponse {
    /// The body form for `X-WNS-Type` (raw notifications are bytes, the others XML).
    public static func contentType(forType type: String) -> String? {
        switch type.lowercased() {
        case "wns/toast", "wns/tile", "wns/badge": "text/xml"
        case "wns/raw": "application/octet-stream"
        default: nil
        }
    }

    public static func classify(status: Int, description: String? = nil, retryAfter: Duration? = nil) -> PNSClassification {
        switch status {
        case 200: .delivered
        case 401: .renewToken  // the access token expired: authenticate again
        case 404, 410: .invalidHandle
        case 406: .throttled(retryAfter: retryAfter)
        case 400, 413: .payloadRejected
        case 403: .misconfigured(description ?? "the package SID does not own this channel")
        case 500, 503: .retry(retryAfter: retryAfter)
        default: .unknown(description.map { "\(status) \($0)" } ?? String(status))
        }
    }
}
