import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL
import Synchronization

/// The HTTP client every provider sends through: HTTP/2 over TLS where the server offers it
/// (APNs, FCM), pooled HTTP/1.1 connections otherwise; a bounded time per request.
public final class PNSHTTPClient: Sendable {
    /// A PNS's answer, the body read whole (PNS answers are small).
    public struct Response: Sendable {
        public var status: Int
        public var headers: HTTPHeaders
        public var body: Data
    }

    public struct Failure: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// Several clients, so HTTP/2 hosts get a few connections (one per client), each with its streams.
    private let clients: [HTTPClient]
    private let next = Atomic<Int>(0)
    /// Requests in flight at most; the rest wait here rather than in the pool, where waiting
    /// counts against the connect time-out.
    private let slots: RequestSlots
    private let requestTimeout: TimeAmount

    /// `trustRootsFile` adds a PEM CA (e.g. `pushhub sim`'s) to the system's roots. HTTP/2
    /// hosts get `connections` connections; HTTP/1.1 hosts up to `connectionsPerHost`.
    public init(
        trustRootsFile: String? = nil, connections: Int = 4, connectionsPerHost: Int = 16, maximumInFlight: Int = 400,
        requestTimeout: Duration = .seconds(15)
    ) {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let trustRootsFile { tls.additionalTrustRoots = [.file(trustRootsFile)] }
        var configuration = HTTPClient.Configuration(
            tlsConfiguration: tls, redirectConfiguration: .disallow,
            timeout: .init(connect: .seconds(5), read: .seconds(Int64(requestTimeout.components.seconds))))
        let connections = max(1, connections)
        configuration.connectionPool = .init(
            idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: max(1, connectionsPerHost / connections))
        configuration.httpVersion = .automatic
        configuration.decompression = .disabled
        clients = (0..<connections).map { _ in HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration) }
        slots = RequestSlots(maximumInFlight)
        self.requestTimeout = .nanoseconds(Int64(requestTimeout.components.seconds) * 1_000_000_000 + requestTimeout.components.attoseconds / 1_000_000_000)
    }

    /// Sends one request. Throws on transport failures and time-outs, which callers retry.
    public func send(_ method: HTTPMethod, _ url: String, headers: [(String, String)], body: Data?) async throws -> Response {
        var request = HTTPClientRequest(url: url)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
        await slots.acquire()
        let client = clients[next.add(1, ordering: .relaxed).oldValue % clients.count]
        do {
            let response = try await client.execute(request, timeout: requestTimeout)
            let bytes = try await response.body.collect(upTo: 64 * 1024)
            await slots.release()
            return Response(status: Int(response.status.code), headers: response.headers, body: Data(bytes.readableBytesView))
        } catch {
            await slots.release()
            throw error
        }
    }

    /// Posts `application/x-www-form-urlencoded` fields and decodes the JSON answer (OAuth token endpoints).
    public func postForm(_ url: String, _ fields: [(String, String)]) async throws -> Response {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let form = fields.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")" }.joined(separator: "&")
        return try await send(.POST, url, headers: [("content-type", "application/x-www-form-urlencoded")], body: Data(form.utf8))
    }

    public func shutdown() async {
        for client in clients { try? await client.shutdown() }
    }
}

/// A counting semaphore for requests; waiters are served in order.
actor RequestSlots {
    private var available: Int
    private var waiters: [CheckedContinuation<Void, Never>] = []
    private var head = 0

    init(_ count: Int) { available = max(1, count) }

    func acquire() async {
        if available > 0 {
            available -= 1
            return
        }
        await withCheckedContinuation { waiters.append($0) }
    }

    func release() {
        if head < waiters.count {
            let waiter = waiters[head]
            head += 1
            if head > 1024, head * 2 > waiters.count {
                waiters.removeFirst(head)
                head = 0
            }
            waiter.resume()
        } else {
            available += 1
        }
    }
}

extension PNSHTTPClient.Response {
    /// The body as a JSON object, when it is one.
    var json: [String: Any]? { (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] }
}

/// An OAuth 2.0 token endpoint answer: `access_token` and `expires_in`.
enum OAuthTokenAnswer {
    static func parse(_ response: PNSHTTPClient.Response, endpoint: String) throws -> (accessToken: String, expiresIn: TimeInterval) {
        guard response.status == 200, let object = response.json, let token = object["access_token"] as? String, !token.isEmpty else {
            let error = (response.json?["error"] as? String) ?? "HTTP \(response.status)"
            throw PNSHTTPClient.Failure(description: "the token endpoint \(endpoint) refused the credentials: \(error)")
        }
        let expiresIn = (object["expires_in"] as? NSNumber)?.doubleValue ?? 3600
        return (token, expiresIn)
    }
}
