import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOTLS
import Synchronization

/// HTTP/2 over TLS to one origin (APNs, FCM, WNS, a Web Push service): a few connections,
/// each request a stream on its connection (`HTTP2ClientConnection`), and the frames of requests
/// sent in the same event-loop tick flushed together (one TLS write for many pushes).
final class HTTP2Client: Sendable {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// The server finished the TLS handshake without choosing HTTP/2 (ALPN `h2`).
    struct NotHTTP2: Error, CustomStringConvertible {
        var origin: String
        var description: String { "\(origin) does not speak HTTP/2" }
    }

    /// No connection could be made (refused, timed out, TLS failed).
    struct ConnectFailed: Error, CustomStringConvertible {
        var origin: String
        var reason: String
        var description: String { reason }
    }

    let origin: String
    private let host: String
    private let port: Int
    private let authority: String
    private let context: NIOSSLContext
    private let connections: [Connection]
    private let next = Atomic<Int>(0)
    private let timeout: TimeAmount
    /// Where a connection goes, when a check pinned the origin's addresses (`PinnedAddresses`):
    /// the first of them that takes it, the name never looked up again; nil when none is
    /// pinned any more. Without it, the name is looked up.
    private let addresses: (@Sendable () -> [String]?)?

    /// The TLS context of HTTP/2 clients made with `tls`, shared by them: making one reads the
    /// trust roots.
    static func context(_ tls: TLSConfiguration) throws -> NIOSSLContext {
        var tls = tls
        // http/1.1 offered too, so that a server without HTTP/2 says so rather than failing the handshake.
        tls.applicationProtocols = ["h2", "http/1.1"]
        return try NIOSSLContext(configuration: tls)
    }

    /// `context` is `HTTP2Client.context(_:)`'s.
    init(
        origin: String, host: String, port: Int, context: NIOSSLContext, connections: Int, timeout: TimeAmount,
        addresses: (@Sendable () -> [String]?)? = nil
    ) {
        self.addresses = addresses
        self.origin = origin
        self.context = context
        self.host = host
        self.port = port
        // An IPv6 literal is bracketed in the authority, as in a URL.
        let hostPart = host.contains(":") ? "[\(host)]" : host
        authority = port == 443 ? hostPart : "\(hostPart):\(port)"
        self.connections = (0..<max(1, connections)).map { _ in Connection() }
        self.timeout = timeout
    }

    func send(path: String, headers: [(String, String)], body: Data) async throws -> PNSResponse {
        let sink = ResponseSink(count: 1)
        submit([StreamRequest(path: path, headers: PNSHeaderFields(headers), body: ByteBuffer(bytes: body), sink: sink, index: 0)])
        return try await sink.answers()[0].result.get()
    }

    /// Writes `requests` as streams, spread over the connections in runs, each run one write
    /// and one flush. Their answers go to their sinks; a run that cannot be written fails there.
    /// Returns once the runs whose connections are up are written: a run whose connection is
    /// still to be made is written by a task of its own once it is, so that an origin slow to
    /// connect or to finish TLS (a Web Push endpoint is anyone's server) holds up its own
    /// requests only, not the origins after it in a batch.
    func submit(_ requests: [StreamRequest]) {
        guard !requests.isEmpty else { return }
        let runs = min(connections.count, requests.count)
        let first = next.add(runs, ordering: .relaxed).oldValue
        // Runs whose connection is up (nearly always) are written by this task, without a task
        // of their own: a child task a run had been four tasks and hops a batch's every write.
        for run in 0..<runs {
            // A slice of the batch's array: its requests are not copied.
            let slice = requests[(requests.count * run / runs)..<(requests.count * (run + 1) / runs)]
            let connection = connections[(first + run) % connections.count]
            if let channel = connection.ready {
                write(slice, to: channel)
            } else {
                Task { await self.write(slice, on: connection) }
            }
        }
    }

    private func write(_ slice: ArraySlice<StreamRequest>, on connection: Connection) async {
        let channel: any Channel
        do { channel = try await connection.channel { try await self.connect() } } catch {
            let failure: any Error = error is NotHTTP2 ? error : ConnectFailed(origin: origin, reason: "\(error)")
            for request in slice { request.sink.complete(request.index, .failure(failure)) }
            return
        }
        write(slice, to: channel)
    }

    private func write(_ slice: ArraySlice<StreamRequest>, to channel: any Channel) {
        // A write that never reaches the handler (the connection closed meanwhile) fails its requests.
        let written = channel.eventLoop.makePromise(of: Void.self)
        written.futureResult.whenFailure { error in
            for request in slice { request.sink.complete(request.index, .failure(error)) }
        }
        channel.writeAndFlush(StreamRequests(requests: slice), promise: written)
    }

    func shutdown() async {
        for connection in connections { await connection.close() }
    }

    /// Connects, and returns once TLS chose HTTP/2; throws `NotHTTP2` when it did not.
    private func connect() async throws -> Connected {
        let (context, host, authority, timeout) = (self.context, self.host, self.authority, self.timeout)
        // An address literal (IPv4, or IPv6, which has colons) is never sent as SNI.
        let isAddress = host.contains(":") || host.allSatisfy { $0.isNumber || $0 == "." }
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let draining = Draining()
        let negotiated = loop.makePromise(of: String?.self)
        let channel: any Channel
        let bootstrap = ClientBootstrap(group: loop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connectTimeout(.seconds(5))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: context, serverHostname: isAddress ? nil : host))
                    try channel.pipeline.syncOperations.addHandler(NegotiatedProtocol(negotiated))
                    // The frames of a flush go to TLS as one write (one record, not one a frame):
                    // the connection gathers them in one buffer itself.
                    try channel.pipeline.syncOperations.addHandler(
                        HTTP2ClientConnection(authority: authority, timeout: timeout, draining: draining))
                }
            }
        do {
            if let addresses {
                channel = try await Self.connect(bootstrap, to: addresses(), host: host, port: port)
            } else {
                channel = try await bootstrap.connect(host: host, port: port).get()
            }
        } catch {
            negotiated.fail(error)
            throw error
        }
        // A server that accepts the connection but never finishes the handshake fails it in
        // the time a request may take, as a request would.
        let handshakeTimeout = loop.scheduleTask(in: timeout) {
            negotiated.fail(HTTP2Client.Failure(description: "no TLS handshake within \(timeout)"))
        }
        defer { handshakeTimeout.cancel() }
        let chosen: String?
        // A connection given up is closed without waiting: TLS's close would wait on a server
        // that does not answer.
        do { chosen = try await negotiated.futureResult.get() } catch {
            channel.close(promise: nil)
            throw error
        }
        guard chosen == "h2" else {
            channel.close(promise: nil)
            throw NotHTTP2(origin: origin)
        }
        return Connected(channel: channel, draining: draining)
    }

    /// Connects to the first of `addresses` (at most three tried, in their order) that takes
    /// the connection; TLS still checks the certificate against `host`.
    private static func connect(_ bootstrap: ClientBootstrap, to addresses: [String]?, host: String, port: Int) async throws -> any Channel {
        guard let addresses, !addresses.isEmpty else { throw Failure(description: "no address of \(host) checked to connect to") }
        // `SocketAddress` traps on a port past 16 bits; the endpoint's check refuses one.
        guard (0...65535).contains(port) else { throw Failure(description: "no port \(port)") }
        var failure: any Error = Failure(description: "no address of \(host) to connect to")
        for address in addresses.prefix(3) {
            do { return try await bootstrap.connect(to: try SocketAddress(ipAddress: address, port: port)).get() } catch { failure = error }
        }
        throw failure
    }

    /// A connection made, and whether its server said GOAWAY (it takes no new streams).
    struct Connected: Sendable {
        var channel: any Channel
        var draining: Draining
    }

    final class Draining: Sendable {
        private let value = Atomic<Bool>(false)
        var isSet: Bool { value.load(ordering: .relaxed) }
        func set() { value.store(true, ordering: .relaxed) }
    }

    /// One connection, made when first needed and again after it closed.
    final class Connection: Sendable {
        /// The making of the current connection, and the connection once made.
        private struct State {
            var task: Task<Connected, any Error>?
            var made: Connected?
            /// Set by `close`: no connection is made after it (a run's task may still come to
            /// connect once its client was shut down or forgotten).
            var closed = false

            /// Forgets `task`'s connection, if it is still the current one.
            mutating func forget(_ ended: Task<Connected, any Error>) {
                guard task == ended else { return }
                task = nil
                made = nil
            }
        }

        private let state = Mutex(State())

        /// The channel, when the connection is made, open and not told GOAWAY: a write needs
        /// no wait for it.
        var ready: (any Channel)? {
            guard let connected = state.withLock({ $0.made }), connected.channel.isActive, !connected.draining.isSet else { return nil }
            return connected.channel
        }

        /// The connection's channel, made anew when there is none, it closed, or its server
        /// said GOAWAY (that one finishes its streams on its own and then closes).
        func channel(_ connect: @escaping @Sendable () async throws -> Connected) async throws -> any Channel {
            try await channel(connect, reconnected: false)
        }

        private func channel(_ connect: @escaping @Sendable () async throws -> Connected, reconnected: Bool) async throws -> any Channel {
            var made = false
            let task = state.withLock { state -> Task<Connected, any Error>? in
                if let existing = state.task { return existing }
                guard !state.closed else { return nil }
                let task = Task { try await connect() }
                state.task = task
                made = true
                return task
            }
            guard let task else { throw HTTP2Client.Failure(description: "the client was shut down") }
            do {
                let connected = try await task.value
                if connected.channel.isActive, !connected.draining.isSet {
                    state.withLock { if $0.task == task { $0.made = connected } }
                    return connected.channel
                }
            } catch {
                state.withLock { $0.forget(task) }
                throw error
            }
            state.withLock { $0.forget(task) }
            // A connection closed or told GOAWAY since it was made: connect again, once. One
            // that is so as soon as it is made (a server that hangs up or says GOAWAY at once)
            // fails, rather than being made again and again.
            guard !(made && reconnected) else {
                throw HTTP2Client.Failure(description: "the server closed the connection or said GOAWAY as soon as it was made")
            }
            return try await channel(connect, reconnected: made || reconnected)
        }

        func close() async {
            let task = state.withLock { state -> Task<Connected, any Error>? in
                defer { state = State(closed: true) }
                return state.task
            }
            if let connected = try? await task?.value { try? await connected.channel.close() }
        }
    }
}

/// A request handed to a connection's `HTTP2ClientConnection`; its answer goes to `sink` at `index`.
struct StreamRequest: Sendable {
    var path: String
    var headers: PNSHeaderFields
    var body: ByteBuffer
    var sink: ResponseSink
    var index: Int
}

/// Requests written to one connection together.
struct StreamRequests: Sendable {
    var requests: ArraySlice<StreamRequest>

    init(requests: ArraySlice<StreamRequest>) { self.requests = requests }

    init(requests: [StreamRequest]) { self.requests = requests[...] }
}

/// Collects the answers of one `send` or `sendAll`, each with the time it took, and wakes the
/// waiter once all are in: one continuation for many requests, no future per request.
final class ResponseSink: Sendable {
    typealias Answer = (result: Result<PNSResponse, any Error>, latency: Duration)

    private struct State {
        var answers: [Answer?]
        var remaining: Int
        var waiter: CheckedContinuation<[Answer], Never>?
        /// Answers for an index already answered, ignored.
        var duplicates = 0
    }

    private let state: Mutex<State>
    private let started = ContinuousClock.now
    /// Called with how many first answers came at once (frees in-flight slots).
    private let onAnswers: @Sendable (Int) -> Void

    /// The sender's stop (`SendingStop.current` where the sink was made): a connection does
    /// not open a stream for a request that waited past it.
    let stop: SendingStop?

    init(count: Int, stop: SendingStop? = nil, onAnswers: @escaping @Sendable (Int) -> Void = { _ in }) {
        state = Mutex(State(answers: Array(repeating: nil, count: count), remaining: count))
        self.stop = stop
        self.onAnswers = onAnswers
    }

    /// Whether the sender stopped.
    var isStopped: Bool { stop?.isStopped ?? false }

    /// The answer for `index`; later ones for the same index are ignored.
    func complete(_ index: Int, _ result: Result<PNSResponse, any Error>) {
        complete(CollectionOfOne((index: index, result: result)))
    }

    /// Answers that came together (a connection's read): one lock, one clock reading and one
    /// `onAnswers` for all of them. Later answers for an index already answered are ignored.
    func complete(_ results: some Collection<(index: Int, result: Result<PNSResponse, any Error>)>) {
        complete(results, heldSlots: true)
    }

    /// Requests that never took a place in flight, answered as not sent: `onAnswers` frees
    /// nothing for them.
    func notSent(_ indices: some Sequence<Int>) {
        let error = SendingStop.NotSent()
        complete(indices.map { (index: $0, result: Result<PNSResponse, any Error>.failure(error)) }, heldSlots: false)
    }

    /// A request that took its place in flight but was never written, answered as not sent.
    func notSent(holding index: Int) {
        complete(index, .failure(SendingStop.NotSent()))
    }

    private func complete(_ results: some Collection<(index: Int, result: Result<PNSResponse, any Error>)>, heldSlots: Bool) {
        guard !results.isEmpty else { return }
        let latency = ContinuousClock.now - started
        let (firsts, done) = state.withLock { state -> (Int, (CheckedContinuation<[Answer], Never>, [Answer])?) in
            var firsts = 0
            for (index, result) in results {
                guard state.answers[index] == nil else {
                    state.duplicates += 1
                    continue
                }
                state.answers[index] = (result, latency)
                firsts += 1
            }
            state.remaining -= firsts
            guard state.remaining == 0, firsts > 0, let waiter = state.waiter else { return (firsts, nil) }
            state.waiter = nil
            return (firsts, (waiter, state.answers.map { $0! }))
        }
        if firsts > 0, heldSlots { onAnswers(firsts) }
        if let (waiter, answers) = done { waiter.resume(returning: answers) }
    }

    /// Answers that came for a request already answered, and were ignored.
    var duplicateAnswers: Int { state.withLock { $0.duplicates } }

    /// Every answer, in order, once all are in.
    func answers() async -> [Answer] {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> [Answer]? in
                if state.remaining == 0 { return state.answers.map { $0! } }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

/// Completes `promise` with the protocol TLS negotiated (ALPN), or fails it if the connection
/// ends first.
final class NegotiatedProtocol: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    private let promise: EventLoopPromise<String?>

    init(_ promise: EventLoopPromise<String?>) { self.promise = promise }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted(let negotiated) = event as? TLSUserEvent { promise.succeed(negotiated) }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise.fail(error)
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(HTTP2Client.Failure(description: "the connection closed during the TLS handshake"))
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        promise.fail(HTTP2Client.Failure(description: "the connection closed during the TLS handshake"))
    }
}
