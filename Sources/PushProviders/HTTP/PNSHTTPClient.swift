import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL
import PushModel
import Synchronization

/// The HTTP client every provider sends through: HTTP/2 over TLS where the server offers it
/// (APNs, FCM), pooled HTTP/1.1 connections otherwise; a bounded time per request.
public final class PNSHTTPClient: PNSTransport {
    public typealias Response = PNSResponse

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
    private let tls: TLSConfiguration
    private let connectionCount: Int
    /// Our own HTTP/2 clients by origin, for APNs (see `sendHTTP2`).
    private let http2Clients = Mutex<[String: HTTP2Client]>([:])

    /// `trustRootsFile` adds a PEM CA (e.g. `pushhub sim`'s) to the system's roots. HTTP/2
    /// hosts get `connections` connections; HTTP/1.1 hosts up to `connectionsPerHost`.
    public init(
        trustRootsFile: String? = nil, connections: Int = 4, connectionsPerHost: Int = 16, maximumInFlight: Int = 400,
        requestTimeout: Duration = .seconds(15), connectTimeout: Duration = .seconds(5)
    ) {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let trustRootsFile { tls.additionalTrustRoots = [.file(trustRootsFile)] }
        var configuration = HTTPClient.Configuration(
            tlsConfiguration: tls, redirectConfiguration: .disallow,
            timeout: .init(connect: .seconds(Int64(connectTimeout.components.seconds)), read: .seconds(Int64(requestTimeout.components.seconds))))
        let connections = max(1, connections)
        configuration.connectionPool = .init(
            idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: max(1, connectionsPerHost / connections))
        configuration.httpVersion = .automatic
        configuration.decompression = .disabled
        clients = (0..<connections).map { _ in HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration) }
        self.tls = tls
        connectionCount = connections
        slots = RequestSlots(maximumInFlight)
        self.requestTimeout = .nanoseconds(
            Int64(requestTimeout.components.seconds) * 1_000_000_000 + requestTimeout.components.attoseconds / 1_000_000_000)
    }

    /// Sends one request. Throws on transport failures and time-outs, which callers retry.
    public func send(_ method: HTTPMethod, _ url: String, headers: [(String, String)], body: Data?) async throws -> Response {
        var request = HTTPClientRequest(url: url)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
        let client = clients[next.add(1, ordering: .relaxed).oldValue % clients.count]
        return try await inSlot {
            let response = try await client.execute(request, timeout: requestTimeout)
            let bytes = try await response.body.collect(upTo: 64 * 1024)
            return Response(status: Int(response.status.code), headers: PNSHeaderFields(response.headers), body: Data(bytes.readableBytesView))
        }
    }

    public func send(_ request: PNSRequest) async throws -> PNSResponse {
        switch request.target {
        case .url(let url): try await send(.POST, url, headers: request.headers.pairs, body: request.body)
        case .http2(let origin, let path): try await sendHTTP2(origin: origin, path: path, headers: request.headers.pairs, body: request.body)
        }
    }

    /// POSTs `path` at `origin` (`https://host[:port]`) over HTTP/2 with PushHub's own client,
    /// which flushes the frames of many requests together: APNs's path. A plain-http origin
    /// goes through `send`.
    public func sendHTTP2(origin: String, path: String, headers: [(String, String)], body: Data) async throws -> Response {
        guard let client = try http2Client(origin) else { return try await send(.POST, origin + path, headers: headers, body: body) }
        return try await inSlot { try await client.send(path: path, headers: headers, body: body) }
    }

    /// Sends a batch: requests to one HTTP/2 origin go out together on PushHub's own client
    /// (no task or future per request, one flush per run); others one by one.
    public func sendAll(_ requests: [PNSRequest]) async -> [PNSExchange] {
        guard case .http2(let origin, _)? = requests.first?.target,
            requests.allSatisfy({ if case .http2(origin, _) = $0.target { true } else { false } }),
            let client = try? http2Client(origin)
        else { return await sendEach(requests) }
        let slots = self.slots
        let sink = ResponseSink(count: requests.count) { slots.release() }
        var run: [StreamRequest] = []
        run.reserveCapacity(requests.count)
        // A native batch's pushes share one payload: one buffer for all of them.
        var lastBody: (data: Data, buffer: ByteBuffer)?
        for (index, request) in requests.enumerated() {
            if !slots.tryAcquire() {
                await client.submit(run)
                run.removeAll(keepingCapacity: true)
                await slots.acquire()
            }
            guard case .http2(_, let path) = request.target else { continue }
            if lastBody?.data != request.body { lastBody = (request.body, ByteBuffer(bytes: request.body)) }
            run.append(StreamRequest(path: path, headers: request.headers, body: lastBody!.buffer, sink: sink, index: index))
        }
        await client.submit(run)
        return await sink.answers()
    }

    /// PushHub's own HTTP/2 client for `origin`, made once; nil for a plain-http origin.
    private func http2Client(_ origin: String) throws -> HTTP2Client? {
        try http2Clients.withLock { clients -> HTTP2Client? in
            if let existing = clients[origin] { return existing }
            guard let parsed = URL(string: origin), parsed.scheme == "https", let host = parsed.host else { return nil }
            let made = try HTTP2Client(host: host, port: parsed.port ?? 443, tls: tls, connections: connectionCount, timeout: requestTimeout)
            clients[origin] = made
            return made
        }
    }

    /// Runs one request while holding one of the in-flight slots.
    private func inSlot(_ request: () async throws -> Response) async throws -> Response {
        await slots.acquire()
        defer { slots.release() }
        return try await request()
    }

    public func shutdown() async {
        for client in clients { try? await client.shutdown() }
        for client in http2Clients.withLock({ Array($0.values) }) { await client.shutdown() }
    }
}

/// A counting semaphore for requests; waiters are served in order. Taking a free slot does
/// not suspend.
final class RequestSlots: Sendable {
    private struct State {
        var available: Int
        var waiters: [CheckedContinuation<Void, Never>] = []
        var head = 0
    }

    private let state: Mutex<State>

    init(_ count: Int) { state = Mutex(State(available: max(1, count))) }

    /// Takes a free slot; false when none is free.
    func tryAcquire() -> Bool {
        state.withLock { state -> Bool in
            guard state.available > 0 else { return false }
            state.available -= 1
            return true
        }
    }

    func acquire() async {
        if tryAcquire() { return }
        await withCheckedContinuation { continuation in
            let now = state.withLock { state -> Bool in
                if state.available > 0 {
                    state.available -= 1
                    return true
                }
                state.waiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    func release() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard state.head < state.waiters.count else {
                state.available += 1
                return nil
            }
            let waiter = state.waiters[state.head]
            state.head += 1
            if state.head > 1024, state.head * 2 > state.waiters.count {
                state.waiters.removeFirst(state.head)
                state.head = 0
            }
            return waiter
        }
        waiter?.resume()
    }
}

extension PNSHeaderFields {
    init(_ headers: HTTPHeaders) {
        self.init(headers.map { ($0.name, $0.value) })
    }
}
