import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL

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

    private let client: HTTPClient
    private let requestTimeout: TimeAmount

    /// `trustRootsFile` adds a PEM CA (e.g. `pushhub sim`'s) to the system's roots.
    public init(trustRootsFile: String? = nil, connectionsPerHost: Int = 16, requestTimeout: Duration = .seconds(15)) {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let trustRootsFile { tls.additionalTrustRoots = [.file(trustRootsFile)] }
        var configuration = HTTPClient.Configuration(
            tlsConfiguration: tls, redirectConfiguration: .disallow,
            timeout: .init(connect: .seconds(5), read: .seconds(Int64(requestTimeout.components.seconds))))
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: connectionsPerHost)
        configuration.httpVersion = .automatic
        configuration.decompression = .disabled
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        self.requestTimeout = .nanoseconds(Int64(requestTimeout.components.seconds) * 1_000_000_000 + requestTimeout.components.attoseconds / 1_000_000_000)
    }

    /// Sends one request. Throws on transport failures and time-outs, which callers retry.
    public func send(_ method: HTTPMethod, _ url: String, headers: [(String, String)], body: Data?) async throws -> Response {
        var request = HTTPClientRequest(url: url)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
        let response = try await client.execute(request, timeout: requestTimeout)
        let bytes = try await response.body.collect(upTo: 64 * 1024)
        return Response(status: Int(response.status.code), headers: response.headers, body: Data(bytes.readableBytesView))
    }

    /// Posts `application/x-www-form-urlencoded` fields and decodes the JSON answer (OAuth token endpoints).
    public func postForm(_ url: String, _ fields: [(String, String)]) async throws -> Response {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let form = fields.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")" }.joined(separator: "&")
        return try await send(.POST, url, headers: [("content-type", "application/x-www-form-urlencoded")], body: Data(form.utf8))
    }

    public func shutdown() async {
        try? await client.shutdown()
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
