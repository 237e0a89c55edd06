import Foundation
import PushModel

/// `X-WNS-Type`: what kind of notification WNS is asked to deliver.
public enum WNSNotificationType: String, Sendable, CaseIterable {
    case toast = "wns/toast"
    case tile = "wns/tile"
    case badge = "wns/badge"
    case raw = "wns/raw"

    /// Whatever its case, as senders write it.
    public init?(header: String) { self.init(rawValue: header.lowercased()) }

    /// The body form: raw notifications are bytes, the others XML.
    public var contentType: String { self == .raw ? "application/octet-stream" : "text/xml" }
}

/// WNS requests built from a delivery, without a network: `POST` to the channel URI.
public enum WNSRequest {
    public static let maximumPayload = 5000
    /// Headers of the send that WNS reads, passed through as they are.
    static let passedHeaders = [
        "X-WNS-Cache-Policy", "X-WNS-Tag", "X-WNS-Group", "X-WNS-Match", "X-WNS-SuppressPopup", "X-WNS-RequestForStatus", "X-WNS-PRIORITY",
    ]

    /// What a request for `delivery` carries to any channel: its headers (no authorization)
    /// and body.
    public struct Parts: Sendable {
        public var headers: PNSHeaderFields
        public var body: Data
    }

    /// The headers and body for `delivery`, or why it is not sent.
    public static func make(_ delivery: PNSDelivery, now: Date = Date()) -> Result<Parts, NotSent> {
        let typeText = delivery.header("X-WNS-Type") ?? WNSNotificationType.toast.rawValue
        guard let type = WNSNotificationType(header: typeText) else {
            return .failure(NotSent(.payloadRejected, "X-WNS-Type \(typeText) is not one WNS knows"))
        }
        let body = Data(delivery.body.utf8)
        guard body.count <= maximumPayload else { return .failure(NotSent(.payloadRejected, "the payload is over 5000 bytes")) }
        var headers: PNSHeaderFields = [("X-WNS-Type", typeText), ("content-type", type.contentType)]
        for name in passedHeaders { if let value = delivery.header(name) { headers.add(name, value) } }
        if let ttl = delivery.header("X-WNS-TTL") {
            headers.add("X-WNS-TTL", ttl)
        } else if let expiresAt = delivery.expiresAt {
            headers.add("X-WNS-TTL", String(max(1, Int(expiresAt.timeIntervalSince(now)))))
        }
        return .success(Parts(headers: headers, body: body))
    }
}

/// WNS answers: the HTTP status (and `X-WNS-Error-Description`), classified.
public enum WNSResponse {
    public static func classify(status: Int, description: String? = nil, retryAfter: Duration? = nil) -> PNSClassification {
        switch status {
        case 200: .delivered
        case 401: .renewToken  // the access token expired: authenticate again
        case 404, 410: .invalidHandle
        case 406: .throttled(retryAfter: retryAfter)
        case 400, 413: .payloadRejected
        case 403: .misconfigured(.refusedByPNS(description ?? "the package SID does not own this channel"))
        case 500, 503: .retry(retryAfter: retryAfter)
        default: .unknown(description.map { "\(status) \($0)" } ?? String(status))
        }
    }
}
