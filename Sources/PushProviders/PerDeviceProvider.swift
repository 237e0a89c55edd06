import Foundation
import PushModel

/// A push service that takes one request per device, with each hub's own account: FCM, WNS,
/// Huawei Push Kit, ADM, Xiaomi and Baidu (APNs and Web Push have their own providers). The
/// service says where a handle is sent (or why it is not), how the part of a request that a run
/// of equal pushes shares is made (once per run, not once per device), how one device's request
/// is made from the two, and what an answer means; `PerDeviceProvider` does the rest, the same
/// for all of them.
public protocol PerDeviceService: Sendable {
    associatedtype Credentials: Sendable
    /// What a run of pushes with one body, format, headers and expiry share.
    associatedtype Shared
    /// What a handle was checked into: the handle itself, a checked URL, a channel id.
    associatedtype Address = String

    static var platform: Platform { get }

    /// The OAuth access tokens of an account, when the service takes bearer tokens.
    func accessTokens(_ credentials: Credentials, transport: any PNSTransport, now: @escaping @Sendable () -> Date) -> CachedAccessToken?

    /// Where `handle` is sent, or why it is not sent at all (a dead or disallowed handle):
    /// checked before anything else, so such a handle is pruned or refused whatever its push
    /// holds. The request goes to what this returns, never to the handle unchecked.
    func address(of handle: String, credentials: Credentials) -> Result<Address, NotSent>

    /// What the pushes of a run share, or why the service would refuse them.
    func shared(_ delivery: PNSDelivery, credentials: Credentials) -> Result<Shared, NotSent>

    /// One device's request, without its bearer token, or why it is not sent.
    func request(_ shared: Shared, to address: Address, credentials: Credentials) -> Result<PNSRequest, NotSent>

    /// Waits until the account may send one more request (a rate limit), if it has one.
    func admit(_ credentials: Credentials) async

    /// What the service's answer means.
    func classify(_ response: PNSResponse) -> PNSAnswer
}

extension PerDeviceService {
    public func admit(_ credentials: Credentials) async {}
}

extension PerDeviceService where Address == String {
    /// An empty handle is dead on every service.
    public func address(of handle: String, credentials: Credentials) -> Result<String, NotSent> {
        handle.isEmpty ? .failure(NotSent(.invalidHandle, "empty handle")) : .success(handle)
    }
}

/// The provider of a `PerDeviceService`: every hub's account, each push's request built from
/// its run's shared part, the access token fetched once per hub and batch, the requests sent
/// together, and a refused token dropped once per hub.
public final class PerDeviceProvider<Service: PerDeviceService>: PushProvider {
    public var platform: Platform { Service.platform }

    struct Account: Sendable {
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
            accounts[hub.lowercased()] = Account(credentials: credentials, tokens: service.accessTokens(credentials, transport: transport, now: now))
        }
        self.accounts = accounts
        self.service = service
        self.transport = transport
    }

    public func deliver(_ delivery: PNSDelivery) async -> PNSAnswer {
        await deliverAll([delivery])[0]
    }

    // Specialized for each service: unspecialized, every push paid for generic metadata and
    // witness calls (FCM 17.6 → 19.8 CPU-µs a delivery when it moved here).
    @_specialize(exported:true,where Service == FCMService)
    @_specialize(exported:true,where Service == WNSService)
    @_specialize(exported:true,where Service == HMSService)
    @_specialize(exported:true,where Service == ADMService)
    @_specialize(exported:true,where Service == XiaomiService)
    @_specialize(exported:true,where Service == BaiduService)
    public func deliverAll(_ deliveries: [PNSDelivery]) async -> [PNSAnswer] {
        var answers = [PNSAnswer?](repeating: nil, count: deliveries.count)
        var requests: [PNSRequest] = []
        requests.reserveCapacity(deliveries.count)
        var sent: [(index: Int, hub: String, tokens: CachedAccessToken?)] = []
        sent.reserveCapacity(deliveries.count)
        // Each hub's `Authorization` value, or why there is none, once per batch.
        var authorizations: [String: Result<String, NotSent>] = [:]
        var hubNames = HubNames()
        // A stopping worker's pushes still to be admitted (FCM's rate limit) are not sent.
        let stop = SendingStop.current
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
            let address: Service.Address
            switch service.address(of: delivery.handle, credentials: account.credentials) {
            case .success(let checked): address = checked
            case .failure(let refusal):
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
            switch last!.shared {
            case .success(let shared):
                switch service.request(shared, to: address, credentials: account.credentials) {
                case .success(let made): request = made
                case .failure(let notSent):
                    answers[index] = notSent.answer
                    continue
                }
            case .failure(let notSent):
                answers[index] = notSent.answer
                continue
            }
            if let tokens = account.tokens {
                if authorizations[hub] == nil { authorizations[hub] = await Self.authorization(tokens) }
                switch authorizations[hub]! {
                case .success(let authorization): request.headers.add("authorization", authorization)
                case .failure(let notSent):
                    answers[index] = notSent.answer
                    continue
                }
            }
            if let stop, stop.isStopped {
                answers[index] = .stopped
                continue
            }
            await service.admit(account.credentials)
            requests.append(request)
            sent.append((index, hub, account.tokens))
        }
        let exchanges = await transport.sendAll(requests)
        var dropped: Set<String> = []
        for (exchange, request) in zip(exchanges, sent) {
            answers[request.index] = await .reading(exchange) { response in
                let answer = service.classify(response)
                // The token is dropped here, once per hub; resending is the worker's.
                if answer.classification == .renewToken, let tokens = request.tokens, dropped.insert(request.hub).inserted {
                    await tokens.invalidate()
                }
                return answer
            }
        }
        return answers.map { $0! }
    }

    /// `Bearer <token>`, or the answer for the hub's pushes when there is no token: the token
    /// endpoint refused the credentials (PushHub's set-up, not retried), or could not be
    /// reached (retried).
    static func authorization(_ tokens: CachedAccessToken) async -> Result<String, NotSent> {
        do {
            return .success("Bearer \(try await tokens.token())")
        } catch let refused as OAuthTokenAnswer.Refused where refused.isPermanent {
            return .failure(NotSent(.notSent(.credentialsRefused("OAuth: \(refused)"))))
        } catch {
            return .failure(NotSent(PNSAnswer(.retry(retryAfter: nil), reason: "OAuth: \(error)")))
        }
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
        let quoted = JSONText.quoted(marker)
        guard let offset = ByteSearch.firstOffset(of: quoted, in: whole) else {
            return .failure(Failure(message: "the message could not be encoded"))
        }
        let found = whole.startIndex + offset
        return .success(SplicedJSON(prefix: whole[..<found], suffix: whole[(found + quoted.count)...]))
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

    /// ASCII letters and digits, `-`, `_` and `~`: a path segment's, so `.` and `..` stay a segment.
    private static let segment = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_~")

    /// `text` with everything but RFC 3986's unreserved characters percent-encoded.
    public static func escape(_ text: String) -> String { text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? "" }

    /// `text` as one URL path segment: as `escape`, and dots escaped too.
    public static func pathSegment(_ text: String) -> String { text.addingPercentEncoding(withAllowedCharacters: segment) ?? "" }

    /// The fields as a form body, in the order given.
    public static func encode(_ fields: [(String, String)]) -> String { fields.map { "\($0.0)=\(escape($0.1))" }.joined(separator: "&") }
}
