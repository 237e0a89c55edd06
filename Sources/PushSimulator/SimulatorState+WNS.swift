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

/// The WNS simulator and its token endpoint.
extension SimulatorState {
    func wnsToken(_ request: SimRequest) -> SimAnswer {
        clientCredentialsToken(request, service: "wns", scope: "notify.windows.com", secret: { wnsClients[$0] }) { token, _ in
            mutable.withLock { _ = $0.wnsAccessTokens.insert(token) }
        }
    }

    func wns(_ request: SimRequest, channel: String, faults: SimulatorFaults) -> SimAnswer {
        let body = request.body
        let answer: SimAnswer = {
            guard let bearer = bearer(request), mutable.withLock({ $0.wnsAccessTokens.contains(bearer) }) else {
                return wnsError(401, "Token expired or invalid")
            }
            guard let type = request.header("x-wns-type"), let expected = WNSNotificationType(header: type)?.contentType else {
                return wnsError(400, "X-WNS-Type missing or invalid")
            }
            guard request.header("content-type")?.lowercased().hasPrefix(expected) == true else {
                return wnsError(400, "Content-Type must be \(expected)")
            }
            guard body.readableBytes <= 5000 else { return wnsError(413, "Payload exceeds 5000 bytes") }
            if expected == "text/xml", !isWellFormedXML(Data(body.readableBytesView)) { return wnsError(400, "Invalid XML payload") }
            if faults.isDead(channel) { return wnsError(410, "Channel expired") }
            if let injected = injected(
                faults, throttle: { self.wnsError(406, "Throttle limit exceeded") }, error: { self.wnsError(503, "Service unavailable") })
            {
                return injected
            }
            record(
                .wns, handle: "wns/channel/\(channel)", payload: String(buffer: body), header: request.header,
                names: [
                    "X-WNS-Type", "X-WNS-TTL", "X-WNS-Tag", "X-WNS-Cache-Policy", "Content-Type",
                ])
            return SimAnswer(status: 200, headers: [("X-WNS-Status", "received"), ("X-WNS-Msg-ID", String(uniqueID().suffix(16)))])
        }()
        return count(.wns, answer)
    }

    /// Whether `payload` is well-formed XML. A broadcast sends one toast many times, so the
    /// last documents found well-formed are remembered rather than parsed again.
    func isWellFormedXML(_ payload: Data) -> Bool {
        passes(payload, remembered: \.wellFormedXML, WellFormedXML.check)
    }

    func wnsError(_ status: Int, _ description: String) -> SimAnswer {
        var headers = [("X-WNS-Error-Description", description)]
        if status == 406 || status == 503 { headers.append(("Retry-After", String(faults.retryAfterSeconds))) }
        return SimAnswer(status: status, headers: headers)
    }
}
