import Foundation
import PushModel

/// A push service that takes one request per device, with each hub's own account: FCM, WNS,
/// Huawei Push Kit, ADM, Xiaomi and Baidu (APNs and Web Push have their own providers). The service says how the part of a request that a run of
/// equal pushes shares is made (once per run, not once per device), how one device's request
/// is made from it, and what an answer means; `PerDeviceProvider` does the rest, the same for
/// all of them.
public protocol PerDeviceService: Sendable {
    associatedtype Credentials: Sendable
    /// What a run of pushes with one body, format, headers and expiry share.
    associatedtype Shared

    static var platform: Platform { get }

    /// The OAuth access tokens of an account, when the service takes bearer tokens.
    func accessTokens(_ credentials: Credentials, transport: any PNSTransport, now: @escaping @Sendable () -> Date) -> CachedAccessToken?

    /// Why `handle` is not sent at all (a dead or disallowed handle), checked before anything
    /// else, so such a handle is pruned or refused whatever its push holds; nil to go on.
    func refusal(of handle: String, credentials: Credentials) -> NotSent?

    /// What the pushes of a run share, or why the service would refuse them.
    func shared(_ delivery: PNSDelivery, credentials: Credentials) -> Result<Shared, NotSent>

    /// One device's request, without its bearer token, or why it is not sent.
    func request(_ shared: Shared, handle: String, credentials: Credentials) -> Result<PNSRequest, NotSent>

    /// Waits until the account may send one more request (a rate limit), if it has one.
    func admit(_ credentials: Credentials) async

    /// What the service's answer means.
    func classify(_ response: PNSResponse) -> PNSAnswer
}

extension PerDeviceService {
    public func admit(_ credentials: Credentials) async {}

    /// An empty handle is dead on every service.
    public func refusal(of handle: String, credentials: Credentials) -> NotSent? {
        handle.isEmpty ? NotSent(.invalidHandle, "empty handle") : nil
    }
}

/// The provider of a `PerDeviceService`: every hub's account, each push's request built from
/// its run's shared part, the access token fetched once per hub and batch, the requests sent
/// together, and a refused token dropped once per hub.
public final class PerDeviceProvider<Service: PerDeviceService>: PushProvider {
    public var platform: Platform { Service.platform }

    struct Account: Sendable {
        var key: String
        var credentials: Service.Credentials
        var tokens: CachedAccessToken?
    }

    private let accounts: [String: Account]
    private let service: Service
    private let transport: any PNSTransport

    public init(
        _ service: Service, hubs: [String: Service.Credentials], transport: any PNSTransport, now: @escaping @Sendable () -> Date = { Date() }
    ) {
        var accounts: [String: Account] = [:]
        for (hub, credentials) in hubs {
            let key = hub.lowercased()
            accounts[key] = Account(key: key, credentials: credentials, tokens: service.accessTokens(credentials, transport: transport, now: now))
        }
        self.accounts = accounts
        self.service = service
        self.transport = transport
    }

    public func deliver(_ delivery: PNSDelivery) async -> PNSAnswer {
        await deliverAll([delivery])[0]
    }

    public func deliverAll(_ deliveries: [PNSDelivery]) async -> [PNSAnswer] {
        var answers = [PNSAnswer?](repeating: nil, count: deliveries.count)
        var requests: [PNSRequest] = []
        var sent: [(index: Int, account: Account)] = []
        var accessTokens: [String: Result<String, any Error>] = [:]
        var hubNames = HubNames()
        var last:
            (
                hub: String, body: String, format: NotificationFormat, headers: [String: String], expiresAt: Date?,
                shared: Result<Service.Shared, NotSent>
            )?
        for (index, delivery) in deliveries.enumerated() {
            let hub = hubNames.key(delivery.hub)
            guard let account = accounts[hub] else {
                answers[index] = .notSent(.noCredentials(hub: delivery.hub, platform: Service.platform))
                continue
            }
            if let refusal = service.refusal(of: delivery.handle, credentials: account.credentials) {
                answers[index] = refusal.answer
                continue
            }
            // A batch's pushes mostly share one body: its shared part is made once per run.
            if last == nil || last!.hub != hub || last!.body != delivery.body || last!.format != delivery.format
                || last!.expiresAt != delivery.expiresAt || last!.headers != delivery.headers
            {
                last = (
                    hub, delivery.body, delivery.format, delivery.headers, delivery.expiresAt,
                    service.shared(delivery, credentials: account.credentials)
                )
            }
            var request: PNSRequest
            switch last!.shared.flatMap({ service.request($0, handle: delivery.handle, credentials: account.credentials) }) {
            case .success(let made): request = made
            case .failure(let notSent):
                answers[index] = notSent.answer
                continue
            }
            if let tokens = account.tokens {
                if accessTokens[hub] == nil {
                    do { accessTokens[hub] = .success(try await tokens.token()) } catch { accessTokens[hub] = .failure(error) }
                }
                switch accessTokens[hub]! {
                case .success(let accessToken): request.headers.add("authorization", "Bearer \(accessToken)")
                case .failure(let error):
                    answers[index] = PNSAnswer(.retry(retryAfter: nil), reason: "OAuth: \(error)")
                    continue
                }
            }
            await service.admit(account.credentials)
            requests.append(request)
            sent.append((index, account))
        }
        let exchanges = await transport.sendAll(requests)
        var dropped: Set<String> = []
        for (exchange, request) in zip(exchanges, sent) {
            answers[request.index] = await .reading(exchange) { response in
                let answer = service.classify(response)
                // The token is dropped here, once per hub; resending is the worker's.
                if answer.classification == .renewToken, let tokens = request.account.tokens, dropped.insert(request.account.key).inserted {
                    await tokens.invalidate()
                }
                return answer
            }
        }
        return answers.map { $0! }
    }
}

/// A JSON request body cut around one string that differs per device (a token), so the pushes
/// of a run share one parse and one serialization: each body is the part before, the value
/// quoted, and the part after. FCM's and Huawei's bodies are made so.
public struct SplicedJSON: Sendable {
    let prefix: Data
    let suffix: Data

    public struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }

    /// `build` makes the whole body with the string it is given in the device's place.
    static func make(_ build: (String) throws(Failure) -> Data) -> Result<SplicedJSON, Failure> {
        // A marker no payload holds, replaced by each device's value.
        let marker = "pushhub-token-" + RandomID.make()
        let whole: Data
        do { whole = try build(marker) } catch { return .failure(error) }
        guard let found = whole.range(of: Data(JSONText.quoted(marker))) else {
            return .failure(Failure(message: "the message could not be encoded"))
        }
        return .success(SplicedJSON(prefix: whole[..<found.lowerBound], suffix: whole[found.upperBound...]))
    }

    /// The body for one device.
    func body(_ value: String) -> Data {
        var body = Data(capacity: prefix.count + value.utf8.count + 2 + suffix.count)
        body.append(prefix)
        body.append(contentsOf: JSONText.quoted(value))
        body.append(suffix)
        return body
    }

    /// `object` as compact JSON, keys sorted, slashes as they are.
    static func encode(_ object: Any) throws(Failure) -> Data {
        do {
            return try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        } catch {
            throw Failure(message: "the message could not be encoded")
        }
    }
}

/// `application/x-www-form-urlencoded` bodies (Xiaomi, Baidu, OAuth token endpoints).
public enum FormEncoding {
    /// ASCII letters and digits only (`CharacterSet.alphanumerics` holds every script's).
    private static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    /// `text` with everything but RFC 3986's unreserved characters percent-encoded.
    public static func escape(_ text: String) -> String { text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? "" }

    /// The fields as a form body, in the order given.
    public static func encode(_ fields: [(String, String)]) -> String { fields.map { "\($0.0)=\(escape($0.1))" }.joined(separator: "&") }
}
