import Foundation
import PushConfiguration
import PushModel

/// APNs over HTTP/2: `POST /3/device/{token}` with a provider token shared by every hub and
/// connection that uses the same key.
public final class APNsProvider: PushProvider {
    public let platform = Platform.apns
    public static let maximumPayload = 4096
    public static let maximumCollapseId = 64

    private let hubs: [String: (credentials: APNsCredentials, tokens: APNsTokenManager)]
    private let http: PNSHTTPClient

    /// `hubs` by name. `now` is the provider tokens' clock.
    public init(hubs: [String: APNsCredentials], http: PNSHTTPClient, now: @escaping @Sendable () -> Date = { Date() }) throws {
        var managers: [String: APNsTokenManager] = [:]
        var entries: [String: (APNsCredentials, APNsTokenManager)] = [:]
        for (hub, credentials) in hubs {
            let key = "\(credentials.teamId)/\(credentials.keyId)"
            let manager =
                try managers[key]
                ?? APNsTokenManager(keyId: credentials.keyId, teamId: credentials.teamId, privateKeyPEM: credentials.privateKey, now: now)
            managers[key] = manager
            entries[hub.lowercased()] = (credentials, manager)
        }
        self.hubs = entries.mapValues { (credentials: $0.0, tokens: $0.1) }
        self.http = http
    }

    public func deliver(_ delivery: PNSDelivery) async -> PNSAnswer {
        guard let (credentials, tokens) = hubs[delivery.hub.lowercased()] else {
            return .notSent(.misconfigured("NoCredentials"), "NoCredentials: hub \(delivery.hub) has no APNs credentials")
        }
        let token = delivery.handle
        guard !token.isEmpty, token.count <= 200, token.allSatisfy(\.isHexDigit) else {
            return .notSent(.invalidHandle, "BadDeviceToken")
        }
        let payload = Data(delivery.body.utf8)
        guard payload.count <= Self.maximumPayload else { return .notSent(.payloadRejected, "PayloadTooLarge") }
        let headers: [(String, String)]
        switch Self.headers(for: delivery, payload: payload, bundleId: credentials.bundleId) {
        case .success(let built): headers = built
        case .failure(let reason): return .notSent(.payloadRejected, reason.description)
        }
        let path = "/3/device/\(token)"
        let jwt: String
        do { jwt = try await tokens.token() } catch { return .notSent(.misconfigured("InvalidProviderKey"), "the APNs key could not sign") }
        let response: PNSHTTPClient.Response
        do {
            response = try await http.sendHTTP2(
                origin: credentials.resolvedEndpoint, path: path, headers: headers + [("authorization", "bearer \(jwt)")], body: payload)
        } catch {
            return PNSAnswer(.retry(retryAfter: nil), reason: "transport: \(error)")
        }
        let reason = response.status == 200 ? nil : response.json?["reason"] as? String
        let classification = APNsResponse.classify(
            status: response.status, reason: reason, retryAfter: RetryAfter.parse(response.headers.first(name: "retry-after")))
        // The token is renewed here; resending is the worker's, which retries `renewToken` at
        // once within its retry budget (one place, so one target cannot cost two budgets).
        if classification == .renewToken { await tokens.expired(jwt) }
        return PNSAnswer(classification, status: response.status, reason: reason)
    }

    struct HeaderProblem: Error, CustomStringConvertible { var description: String }

    /// The request headers, from the send's headers and the payload.
    static func headers(for delivery: PNSDelivery, payload: Data, bundleId: String) -> Result<[(String, String)], HeaderProblem> {
        var headers: [(String, String)] = []
        let pushType = delivery.header("apns-push-type") ?? (isBackground(payload) ? "background" : "alert")
        headers.append(("apns-push-type", pushType))
        headers.append(("apns-topic", delivery.header("apns-topic") ?? bundleId))
        let priority = delivery.header("apns-priority") ?? (pushType == "background" ? "5" : "10")
        guard ["1", "5", "10"].contains(priority) else { return .failure(HeaderProblem(description: "BadPriority")) }
        headers.append(("apns-priority", priority))
        if let expiration = delivery.header("apns-expiration") {
            guard Int(expiration) != nil else { return .failure(HeaderProblem(description: "BadExpirationDate")) }
            headers.append(("apns-expiration", expiration))
        } else if let expiresAt = delivery.expiresAt {
            headers.append(("apns-expiration", String(Int(expiresAt.timeIntervalSince1970))))
        }
        if let collapseId = delivery.header("apns-collapse-id") {
            guard collapseId.utf8.count <= maximumCollapseId else { return .failure(HeaderProblem(description: "BadCollapseId")) }
            headers.append(("apns-collapse-id", collapseId))
        } else {
            headers.append(("apns-collapse-id", CollapseKey.apns(delivery)))
        }
        // Without one, APNs makes the apns-id itself and returns it.
        if let apnsId = delivery.header("apns-id") {
            guard UUID(uuidString: apnsId) != nil else { return .failure(HeaderProblem(description: "BadMessageId")) }
            headers.append(("apns-id", apnsId))
        }
        return .success(headers)
    }

    /// A payload whose `aps` holds only `content-available: 1` is a background push.
    static func isBackground(_ payload: Data) -> Bool {
        // Most payloads do not mention it at all: no need to parse them.
        guard payload.range(of: Data("content-available".utf8)) != nil else { return false }
        guard let object = JSONLimits.dictionary(payload), let aps = object["aps"] as? [String: Any] else {
            return false
        }
        return aps.count == 1 && (aps["content-available"] as? NSNumber)?.intValue == 1
    }
}
