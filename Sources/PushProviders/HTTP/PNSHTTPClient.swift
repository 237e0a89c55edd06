import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL
import PushModel
import Synchronization

/// The HTTP client every provider sends through: PushHub's own HTTP/2 client over TLS where
/// the server offers it (APNs, FCM, WNS, Web Push services), pooled HTTP/1.1 connections
/// otherwise; a bounded time per request.
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
    /// The TLS context every HTTP/2 client shares, made when the first is (making one reads
    /// the trust roots, which may be written after this client is made) and kept once made.
    private let http2Context = Mutex<NIOSSLContext?>(nil)
    private let connectionCount: Int
    /// Our own HTTP/2 clients by origin, and the https origins found to speak only HTTP/1.1.
    private let http2Clients = Mutex(HTTP2Clients())
    private let maximumHTTP2Origins: Int
    /// The addresses checks approved, by host and port (`pin`).
    private let pinned = PinnedAddresses()
    /// What async-http-client's clients are made with, the pinned ones too.
    private let http1Configuration: HTTPClient.Configuration
    /// async-http-client's clients of pinned requests' origins without an HTTP/2 client of
    /// their own, by host and port: each connects only to an address pinned when it was made
    /// (`dnsOverride`).
    private let pinnedHTTP1 = Mutex(PinnedHTTP1Clients())
    /// The most such clients kept; the least recently used gives way.
    static let maximumPinnedHTTP1 = 32

    private struct HTTP2Clients {
        /// By origin; a pinned request's under `pinnedKey(origin)`, apart from one the same
        /// origin may have for other requests (`pushhub dev` sends every platform through one
        /// transport).
        var clients: [String: HTTP2Client] = [:]
        var http1Origins: Set<String> = []

        /// Removes `origin`'s clients, pinned or not.
        mutating func remove(_ origin: String) -> [HTTP2Client] {
            [clients.removeValue(forKey: origin), clients.removeValue(forKey: PNSHTTPClient.pinnedKey(origin))].compactMap { $0 }
        }
    }

    private struct PinnedHTTP1Clients {
        var clients: [String: (address: String, client: HTTPClient, used: UInt64)] = [:]
        var uses: UInt64 = 0
        /// Set by `shutdown`: no client is made after it.
        var closed = false
    }

    static func pinnedKey(_ origin: String) -> String { "pinned " + origin }

    /// `trustRootsFile` adds a PEM CA (e.g. `pushhub sim`'s) to the system's roots. HTTP/2
    /// hosts get `connections` connections; HTTP/1.1 hosts up to `connectionsPerHost`.
    public init(
        trustRootsFile: String? = nil, connections: Int = 4, connectionsPerHost: Int = 16, maximumInFlight: Int = 800,
        requestTimeout: Duration = .seconds(15), connectTimeout: Duration = .seconds(5),
        maximumHTTP2Origins: Int = PNSHTTPClient.maximumHTTP2Origins
    ) {
        self.maximumHTTP2Origins = maximumHTTP2Origins
        var tls = TLSConfiguration.makeClientConfiguration()
        if let trustRootsFile { tls.additionalTrustRoots = [.file(trustRootsFile)] }
        var configuration = HTTPClient.Configuration(
            tlsConfiguration: tls, redirectConfiguration: .disallow,
            timeout: .init(connect: TimeAmount(connectTimeout), read: TimeAmount(requestTimeout)))
        let connections = max(1, connections)
        configuration.connectionPool = .init(
            idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: max(1, connectionsPerHost / connections))
        configuration.httpVersion = .automatic
        configuration.decompression = .disabled
        // No span per request from async-http-client: PushHub's own spans say what a PNS call did.
        configuration.tracing.tracer = nil
        http1Configuration = configuration
        clients = (0..<connections).map { _ in HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration) }
        self.tls = tls
        connectionCount = connections
        slots = RequestSlots(maximumInFlight)
        self.requestTimeout = TimeAmount(requestTimeout)
    }

    /// Sends one request. Throws on transport failures and time-outs, which callers retry.
    /// An answer's body past 64 KiB throws too, unless `bodyLimit` says otherwise: the answer
    /// then keeps the body's first `bodyLimit` bytes, and the rest is read and dropped.
    public func send(_ method: HTTPMethod, _ url: String, headers: [(String, String)], body: Data?, bodyLimit: Int? = nil) async throws -> Response {
        try await inSlot { try await sendHTTP1(method, url, headers: headers, body: body, bodyLimit: bodyLimit) }
    }

    /// One request through async-http-client (`client`, or one of the shared ones), without
    /// taking a slot.
    private func sendHTTP1(
        _ method: HTTPMethod, _ url: String, headers: [(String, String)], body: Data?, bodyLimit: Int? = nil, client: HTTPClient? = nil
    ) async throws -> Response {
        var request = HTTPClientRequest(url: url)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
        let client = client ?? clients[next.add(1, ordering: .relaxed).oldValue % clients.count]
        // One deadline for the whole answer: async-http-client's holds until the head, and its
        // read time-out starts again with every part, so a body sent a byte at a time (a Web
        // Push endpoint is anyone's server) held a slot, and its batch, for days. Checked as
        // each part comes, the answer takes at most the deadline and one read time-out.
        let deadline = NIODeadline.now() + requestTimeout
        let response = try await client.execute(request, deadline: deadline)
        var kept = Data()
        for try await part in response.body {
            guard NIODeadline.now() < deadline else { throw HTTPClientError.deadlineExceeded }
            if let bodyLimit {
                // The first `bodyLimit` bytes; the rest is read and dropped.
                if kept.count < bodyLimit { kept.append(contentsOf: part.readableBytesView.prefix(bodyLimit - kept.count)) }
            } else {
                guard kept.count + part.readableBytes <= HTTP2ClientConnection.maximumBody else {
                    throw NIOTooManyBytesError(maxBytes: HTTP2ClientConnection.maximumBody)
                }
                kept.append(contentsOf: part.readableBytesView)
            }
        }
        return Response(status: Int(response.status.code), headers: PNSHeaderFields(response.headers), body: kept)
    }

    public func send(_ request: PNSRequest) async throws -> PNSResponse {
        // A pinned request takes the batch path, which keeps it to its pinned addresses.
        if request.pinned { return try await sendAll([request])[0].result.get() }
        switch request.target {
        case .url(let url): return try await send(.POST, url, headers: request.headers.pairs, body: request.body)
        case .http2(let origin, let path): return try await sendHTTP2(origin: origin, path: path, headers: request.headers.pairs, body: request.body)
        }
    }

    /// POSTs `path` at `origin` (`https://host[:port]`) over HTTP/2 with PushHub's own client,
    /// which flushes the frames of many requests together: APNs's path. A plain-http origin, or
    /// one that does not speak HTTP/2, goes through `send`.
    public func sendHTTP2(origin: String, path: String, headers: [(String, String)], body: Data) async throws -> Response {
        guard let client = http2Client(origin, pinned: false) else { return try await send(.POST, origin + path, headers: headers, body: body) }
        do {
            return try await inSlot { try await client.send(path: path, headers: headers, body: body) }
        } catch let error as HTTP2Client.NotHTTP2 {
            markHTTP1(error.origin)
            return try await send(.POST, origin + path, headers: headers, body: body)
        }
    }

    /// Sends a batch. Requests to an https origin that speaks HTTP/2 (APNs, FCM, WNS and the
    /// Web Push services) go out on PushHub's own client: no task or future per request, one
    /// write and flush per connection run. The rest (plain http, HTTP/1.1-only origins) go
    /// through async-http-client, a task each.
    public func sendAll(_ requests: [PNSRequest]) async -> [PNSExchange] {
        let slots = self.slots
        let sink = ResponseSink(count: requests.count, stop: SendingStop.current) { slots.release($0) }
        var runs: [(client: HTTP2Client, requests: [StreamRequest])] = []
        var elsewhere: [Int] = []
        // A native batch's pushes share one payload: one buffer for all of them.
        var lastBody: (data: Data, buffer: ByteBuffer)?
        // A batch's requests mostly share a URL (FCM) or an origin (APNs, WNS): each is parsed
        // and looked up once for a run of equal ones, not once per request.
        var last: (url: String, route: (origin: String, path: String)?)?
        var lastClient: (origin: String, pinned: Bool, client: HTTP2Client?)?
        var lastRun: (client: HTTP2Client, index: Int)?
        // Slots taken and not yet given to a request.
        var held = 0
        for (index, request) in requests.enumerated() {
            let route: (origin: String, path: String)?
            if case .url(let url) = request.target {
                if last?.url != url { last = (url, Self.http2Route(request.target)) }
                route = last!.route
            } else {
                route = Self.http2Route(request.target)
            }
            guard let route else {
                elsewhere.append(index)
                continue
            }
            if lastClient?.origin != route.origin || lastClient?.pinned != request.pinned {
                lastClient = (route.origin, request.pinned, http2Client(route.origin, pinned: request.pinned))
            }
            guard let client = lastClient!.client else {
                elsewhere.append(index)
                continue
            }
            let path = route.path
            if held == 0 {
                // As many free slots as the batch has requests left, in one step.
                held = slots.tryAcquire(upTo: requests.count - index)
                if held == 0 {
                    for run in runs { run.client.submit(run.requests) }
                    runs.removeAll(keepingCapacity: true)
                    lastRun = nil
                    // Every slot is taken: wait for an eighth of them (or what is left of the
                    // batch), not for one. One at a time, each freed slot was a hop to wake
                    // this task and a write and flush of one stream: a worker delivered about
                    // 50,000 a second, whatever its window or requests in flight.
                    let left = requests.count - index
                    held = await slots.acquire(atLeast: min(left, slots.count / 8), upTo: left)
                }
                // Stopped before this batch came, or while it waited for places: what has not
                // gone out stays unsent, to be handed back. (Read once per places taken.)
                if sink.isStopped {
                    slots.release(held)
                    held = 0
                    sink.notSent(index..<requests.count)
                    break
                }
            }
            held -= 1
            if lastBody?.data != request.body { lastBody = (request.body, ByteBuffer(bytes: request.body)) }
            let stream = StreamRequest(path: path, headers: request.headers, body: lastBody!.buffer, sink: sink, index: index)
            // The run of the previous request's client, most often; a batch to one origin
            // (APNs, FCM, WNS) reserves room for all of it once.
            let run: Int
            if let lastRun, lastRun.client === client {
                run = lastRun.index
            } else if let found = runs.firstIndex(where: { $0.client === client }) {
                run = found
            } else {
                runs.append((client, []))
                run = runs.count - 1
                if run == 0 { runs[0].requests.reserveCapacity(requests.count - index) }
            }
            runs[run].requests.append(stream)
            lastRun = (client, run)
        }
        if held > 0 { slots.release(held) }
        for run in runs { run.client.submit(run.requests) }
        await sendHTTP1(elsewhere, of: requests, to: sink)
        var answers = await sink.answers()
        // An origin found not to speak HTTP/2 is remembered; its requests go again over HTTP/1.1.
        var refused: [Int] = []
        var unreachable: Set<String> = []
        for (index, answer) in answers.enumerated() {
            guard case .failure(let error) = answer.result else { continue }
            if let notHTTP2 = error as? HTTP2Client.NotHTTP2 {
                markHTTP1(notHTTP2.origin)
                refused.append(index)
            } else if let failed = error as? HTTP2Client.ConnectFailed {
                unreachable.insert(failed.origin)
            }
        }
        // When every place is taken, an origin that could not be reached gives up its client and
        // its place among the `maximumHTTP2Origins` (so unreachable endpoints cannot keep the
        // places from working services); the next batch for it makes a new one.
        for origin in unreachable { forgetIfFull(origin) }
        if !refused.isEmpty {
            let again = ResponseSink(count: refused.count, stop: sink.stop) { slots.release($0) }
            await sendHTTP1(Array(refused.indices), of: refused.map { requests[$0] }, to: again)
            for (index, exchange) in zip(refused, await again.answers()) { answers[index] = exchange }
        }
        return answers
    }

    /// Sends `requests[indices]` through async-http-client, a task each within the in-flight
    /// slots, their answers to `sink`.
    private func sendHTTP1(_ indices: [Int], of requests: [PNSRequest], to sink: ResponseSink) async {
        guard !indices.isEmpty else { return }
        await withTaskGroup(of: Void.self) { group in
            for (position, index) in indices.enumerated() {
                await slots.acquire()
                if sink.isStopped {
                    slots.release()
                    sink.notSent(indices[position...])
                    break
                }
                let request = requests[index]
                group.addTask {
                    do {
                        let url = Self.url(request.target)
                        let client = request.pinned ? try self.pinnedHTTP1Client(url) : nil
                        let response = try await self.sendHTTP1(.POST, url, headers: request.headers.pairs, body: request.body, client: client)
                        sink.complete(index, .success(response))
                    } catch {
                        sink.complete(index, .failure(error))
                    }
                }
            }
        }
    }

    /// The origin and path of a request that may go over HTTP/2: an https URL, or APNs's target.
    static func http2Route(_ target: PNSRequest.Target) -> (origin: String, path: String)? {
        switch target {
        case .http2(let origin, let path): return origin.hasPrefix("https://") ? (origin, path) : nil
        case .url(let url):
            // Byte by byte: every character looked for is ASCII, so its index is a character's.
            let bytes = url.utf8
            guard bytes.starts(with: "https://".utf8) else { return nil }
            let afterScheme = bytes.index(bytes.startIndex, offsetBy: 8)
            let end = bytes[afterScheme...].firstIndex(of: UInt8(ascii: "#")) ?? bytes.endIndex
            let slash = bytes[afterScheme..<end].firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") } ?? end
            guard slash > afterScheme else { return nil }
            let path = url[slash..<end]
            return (String(url[..<slash]), path.isEmpty ? "/" : path.hasPrefix("?") ? "/" + path : String(path))
        }
    }

    static func url(_ target: PNSRequest.Target) -> String {
        switch target {
        case .url(let url): url
        case .http2(let origin, let path): origin + path
        }
    }

    /// Most origins that get an HTTP/2 client of their own. Web Push endpoints come from
    /// devices, so their origins are many and chosen by others: past this many, an origin's
    /// requests go through async-http-client's pool, which closes idle connections.
    public static let maximumHTTP2Origins = 64

    /// The HTTP/2 client of `origin`, made when first needed; nil when the origin speaks only
    /// HTTP/1.1, or the clients are as many as they may be. A pinned request's connects only
    /// to the addresses pinned for its host at the time it connects. (No client gives way to a
    /// new origin: devices name origins, and a client's pushes in flight would fail with it.
    /// A pinned request without one goes through `pinnedHTTP1Client`.)
    private func http2Client(_ origin: String, pinned: Bool) -> HTTP2Client? {
        let key = pinned ? Self.pinnedKey(origin) : origin
        if let existing = http2Clients.withLock({ $0.clients[key] }) { return existing }
        guard let context = sharedContext() else { return nil }
        return http2Clients.withLock { state -> HTTP2Client? in
            if let existing = state.clients[key] { return existing }
            guard !state.http1Origins.contains(origin), state.clients.count < maximumHTTP2Origins else { return nil }
            guard let parsed = URL(string: origin), parsed.scheme == "https", let host = parsed.host else { return nil }
            let port = parsed.port ?? 443
            let made = HTTP2Client(
                origin: origin, host: host, port: port, context: context, connections: connectionCount, timeout: requestTimeout,
                addresses: pinned ? self.pinned.source(host: host, port: port) : nil)
            state.clients[key] = made
            return made
        }
    }

    /// The HTTP/2 clients' TLS context; nil while it cannot be made (its trust roots unread).
    private func sharedContext() -> NIOSSLContext? {
        if let made = http2Context.withLock({ $0 }) { return made }
        guard let made = try? HTTP2Client.context(tls) else { return nil }
        return http2Context.withLock { current in
            if current == nil { current = made }
            return current
        }
    }

    /// async-http-client's client for a pinned request to `url` without an HTTP/2 client of
    /// PushHub's (a service that speaks only HTTP/1.1, or origins past `maximumHTTP2Origins`;
    /// it speaks HTTP/2 too where offered): one that connects only to an address pinned for the
    /// URL's host and port, the first when it was made (TLS still checks the certificate
    /// against the name), kept while that address stays pinned. Throws when nothing is pinned
    /// for it, or after `shutdown`. A client that gives way (its address no longer pinned, or
    /// the least recently used past `maximumPinnedHTTP1`) is shut down once a request's time
    /// has passed, so that what it has in flight is answered.
    private func pinnedHTTP1Client(_ url: String) throws -> HTTPClient {
        guard let (host, port) = URL(string: url)?.hostAndPort else { throw Failure(description: "\(url) names no host") }
        guard let addresses = pinned.addresses(host: host, port: port), let address = addresses.first else {
            throw Failure(description: "no address of \(host) checked to connect to")
        }
        let key = PinnedAddresses.key(host: host, port: port)
        let configuration = http1Configuration
        let made = pinnedHTTP1.withLock { state -> (client: HTTPClient, dropped: [HTTPClient])? in
            guard !state.closed else { return nil }
            state.uses += 1
            if let existing = state.clients[key], addresses.contains(existing.address) {
                state.clients[key]?.used = state.uses
                return (existing.client, [])
            }
            var dropped: [HTTPClient] = []
            if let replaced = state.clients.removeValue(forKey: key) { dropped.append(replaced.client) }
            if state.clients.count >= Self.maximumPinnedHTTP1, let oldest = state.clients.min(by: { $0.value.used < $1.value.used })?.key {
                dropped.append(state.clients.removeValue(forKey: oldest)!.client)
            }
            var pinnedConfiguration = configuration
            pinnedConfiguration.dnsOverride = [host: address]
            let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: pinnedConfiguration)
            state.clients[key] = (address, client, state.uses)
            return (client, dropped)
        }
        guard let made else { throw Failure(description: "the HTTP client is shut down") }
        let grace = requestTimeout
        for client in made.dropped {
            Task {
                try? await Task.sleep(for: .nanoseconds(grace.nanoseconds))
                try? await client.shutdown()
            }
        }
        return made.client
    }

    public func pin(host: String, port: Int, addresses: [String]) {
        pinned.pin(PinnedAddresses.key(host: host, port: port), addresses)
    }

    /// Drops `origin`'s HTTP/2 clients when the clients are as many as they may be.
    private func forgetIfFull(_ origin: String) {
        let dropped = http2Clients.withLock { state -> [HTTP2Client] in
            state.clients.count >= maximumHTTP2Origins ? state.remove(origin) : []
        }
        for client in dropped { Task { await client.shutdown() } }
    }

    /// `origin` answered TLS without HTTP/2: its requests go over HTTP/1.1 from now on.
    private func markHTTP1(_ origin: String) {
        let dropped = http2Clients.withLock { state -> [HTTP2Client] in
            // Bounded: past 10,000 such origins the list starts again (each costs one more try).
            if state.http1Origins.count >= 10_000 { state.http1Origins.removeAll() }
            state.http1Origins.insert(origin)
            return state.remove(origin)
        }
        for client in dropped { Task { await client.shutdown() } }
    }

    /// Runs one request while holding one of the in-flight slots.
    private func inSlot(_ request: () async throws -> Response) async throws -> Response {
        await slots.acquire()
        defer { slots.release() }
        return try await request()
    }

    public func shutdown() async {
        for client in clients { try? await client.shutdown() }
        for client in http2Clients.withLock({ Array($0.clients.values) }) { await client.shutdown() }
        let pinnedClients = pinnedHTTP1.withLock { state in
            state.closed = true
            return state.clients.values.map(\.client)
        }
        for client in pinnedClients { try? await client.shutdown() }
    }
}

/// A counting semaphore for requests; waiters are served in order. Taking a free slot does
/// not suspend. A waiter may ask for several slots at once (`acquire(atLeast:upTo:)`), and is
/// woken once that many are free, not once a slot.
final class RequestSlots: Sendable {
    private struct Waiter {
        var need: Int
        var most: Int
        var continuation: CheckedContinuation<Int, Never>
    }

    private struct State {
        var available: Int
        var waiters: [Waiter] = []
        var head = 0
    }

    private let state: Mutex<State>
    /// All the slots there are.
    let count: Int

    init(_ count: Int) {
        self.count = max(1, count)
        state = Mutex(State(available: max(1, count)))
    }

    /// Takes up to `most` free slots when nobody waits ahead; how many it took (0 when none).
    func tryAcquire(upTo most: Int) -> Int {
        guard most > 0 else { return 0 }
        return state.withLock { state in Self.take(1, upTo: most, from: &state) ?? 0 }
    }

    func acquire() async {
        _ = await acquire(atLeast: 1, upTo: 1)
    }

    /// Takes at least `need` slots (at most all there are) and up to `most`, waiting, after
    /// those already waiting, until that many are free; returns how many it took.
    func acquire(atLeast need: Int, upTo most: Int) async -> Int {
        let need = min(max(1, need), count)
        let most = max(need, most)
        // Free slots, and no one waiting before: taken without suspending.
        if let taken = state.withLock({ Self.take(need, upTo: most, from: &$0) }) { return taken }
        return await withCheckedContinuation { continuation in
            let taken = state.withLock { state -> Int? in
                if let taken = Self.take(need, upTo: most, from: &state) { return taken }
                state.waiters.append(Waiter(need: need, most: most, continuation: continuation))
                return nil
            }
            if let taken { continuation.resume(returning: taken) }
        }
    }

    /// Takes at least `need` free slots and up to `most` when nobody waits ahead; nil otherwise.
    private static func take(_ need: Int, upTo most: Int, from state: inout State) -> Int? {
        guard state.head == state.waiters.count, state.available >= need else { return nil }
        let taken = min(state.available, most)
        state.available -= taken
        return taken
    }

    func release(_ released: Int = 1) {
        let woken = state.withLock { state -> [(CheckedContinuation<Int, Never>, Int)] in
            state.available += released
            var woken: [(CheckedContinuation<Int, Never>, Int)] = []
            while state.head < state.waiters.count, state.available >= state.waiters[state.head].need {
                let waiter = state.waiters[state.head]
                let taken = min(state.available, waiter.most)
                state.available -= taken
                woken.append((waiter.continuation, taken))
                state.head += 1
            }
            if state.head > 1024, state.head * 2 > state.waiters.count {
                state.waiters.removeFirst(state.head)
                state.head = 0
            }
            return woken
        }
        for (continuation, taken) in woken { continuation.resume(returning: taken) }
    }
}

extension PNSHeaderFields {
    init(_ headers: HTTPHeaders) {
        self.init(headers.map { ($0.name, $0.value) })
    }
}
