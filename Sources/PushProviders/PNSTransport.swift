import Foundation
import PushModel

/// Header fields of a PNS request or answer, in order; names compare without case.
public struct PNSHeaderFields: Sendable, Equatable, ExpressibleByArrayLiteral {
    public var fields: [Field]

    public struct Field: Sendable, Equatable {
        public var name: String
        public var value: String
    }

    public init(_ fields: [(String, String)] = []) {
        self.fields = fields.map { Field(name: $0.0, value: $0.1) }
    }

    public init(arrayLiteral elements: (String, String)...) { self.init(elements) }

    /// The first value of `name`, whatever its case.
    public func first(name: String) -> String? {
        fields.first { CaseFolding.equal($0.name, name) }?.value
    }

    public mutating func add(_ name: String, _ value: String) { fields.append(Field(name: name, value: value)) }

    /// `content-type: application/json`, the headers of most JSON requests (built once).
    public static let json: PNSHeaderFields = [("content-type", "application/json")]

    /// The names and values as pairs, for a client that takes them so.
    public var pairs: [(String, String)] { fields.map { ($0.name, $0.value) } }
}

/// One request to a PNS as a provider builds it: pure data, sent by a `PNSTransport`.
public struct PNSRequest: Sendable, Equatable {
    /// Where the request goes.
    public enum Target: Sendable, Equatable {
        /// A whole URL (FCM, WNS, Web Push, token endpoints).
        case url(String)
        /// A path on an HTTP/2 origin, `https://host[:port]` (APNs), sent on shared connections.
        case http2(origin: String, path: String)
    }

    public var target: Target
    public var headers: PNSHeaderFields
    public var body: Data
    /// Sent only to the addresses `PNSTransport.pin` set for its host and port, never to a
    /// lookup of the name: a device chose its URL (Web Push). Without a pin it is not sent.
    public var pinned = false

    public init(_ target: Target, headers: PNSHeaderFields, body: Data) {
        self.target = target
        self.headers = headers
        self.body = body
    }

    /// An `application/x-www-form-urlencoded` POST (OAuth token endpoints).
    public static func form(_ url: String, _ fields: [(String, String)]) -> PNSRequest {
        PNSRequest(.url(url), headers: [("content-type", "application/x-www-form-urlencoded")], body: Data(FormEncoding.encode(fields).utf8))
    }
}

/// A PNS's answer, the body read whole (PNS answers are small).
public struct PNSResponse: Sendable {
    public var status: Int
    public var headers: PNSHeaderFields
    public var body: Data

    public init(status: Int, headers: PNSHeaderFields = [], body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The body as a JSON object, when it is one.
    var json: [String: Any]? { JSONLimits.dictionary(body) }

    /// `Retry-After`, when the PNS sent one PushHub can read.
    var retryAfter: Duration? { RetryAfter.parse(headers.first(name: "retry-after")) }
}

/// One request's answer, or why there was none, with the time it took.
public typealias PNSExchange = (result: Result<PNSResponse, any Error>, latency: Duration)

/// How providers reach a PNS. `PNSHTTPClient` sends over the network; tests answer in memory.
/// Every request is a POST. Transport failures and time-outs are errors, which are retried.
public protocol PNSTransport: Sendable {
    func send(_ request: PNSRequest) async throws -> PNSResponse
    /// Sends a batch's requests together; the answers are in the same order.
    func sendAll(_ requests: [PNSRequest]) async -> [PNSExchange]
    /// The addresses a check of `host` approved (a Web Push endpoint's, `EndpointPolicy`): a
    /// connection to `host`:`port` goes to one of them, not to a second lookup of the name,
    /// whose answer may have changed since (DNS rebinding).
    func pin(host: String, port: Int, addresses: [String])
}

extension PNSTransport {
    public func sendAll(_ requests: [PNSRequest]) async -> [PNSExchange] { await sendEach(requests) }

    /// A transport that makes no connections of its own (a test's) has nothing to pin.
    public func pin(host: String, port: Int, addresses: [String]) {}

    /// Each request on its own task: for a transport without a batch path.
    func sendEach(_ requests: [PNSRequest]) async -> [PNSExchange] {
        await withTaskGroup(of: (Int, PNSExchange).self) { group in
            for (index, request) in requests.enumerated() {
                group.addTask {
                    let started = ContinuousClock.now
                    do {
                        let response = try await send(request)
                        return (index, (.success(response), ContinuousClock.now - started))
                    } catch {
                        return (index, (.failure(error), ContinuousClock.now - started))
                    }
                }
            }
            var exchanges = [PNSExchange?](repeating: nil, count: requests.count)
            for await (index, exchange) in group { exchanges[index] = exchange }
            return exchanges.map { $0! }
        }
    }
}

/// An OAuth 2.0 token endpoint answer: `access_token` and `expires_in`.
enum OAuthTokenAnswer {
    struct Refused: Error, CustomStringConvertible {
        var description: String
        /// The endpoint refused the credentials themselves (4xx: `invalid_client`, …), which
        /// asking again will not change; otherwise it failed for now (5xx, an unreadable answer).
        var isPermanent: Bool
    }

    static func parse(_ response: PNSResponse, endpoint: String) throws -> (accessToken: String, expiresIn: TimeInterval) {
        guard response.status == 200, let object = response.json, let token = object["access_token"] as? String, !token.isEmpty else {
            let error = (response.json?["error"] as? String) ?? "HTTP \(response.status)"
            let permanent = (400..<500).contains(response.status) && response.status != 429
            throw Refused(
                description: "the token endpoint \(endpoint) \(permanent ? "refused the credentials" : "failed"): \(error)", isPermanent: permanent)
        }
        let expiresIn = (object["expires_in"] as? NSNumber)?.doubleValue ?? 3600
        return (token, expiresIn)
    }

    /// Posts `fields` to `endpoint` through `transport` and reads the token.
    static func fetch(_ endpoint: String, _ fields: [(String, String)], through transport: any PNSTransport) async throws -> (
        accessToken: String, expiresIn: TimeInterval
    ) {
        try parse(await transport.send(.form(endpoint, fields)), endpoint: endpoint)
    }
}
