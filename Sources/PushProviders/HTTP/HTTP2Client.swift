import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS
import Synchronization

/// HTTP/2 over TLS to one origin (APNs, FCM, WNS, a Web Push service): a few connections,
/// each request a stream written frame by frame on its connection, and the frames of requests
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

    init(origin: String, host: String, port: Int, tls: TLSConfiguration, connections: Int, timeout: TimeAmount) throws {
        var tls = tls
        // http/1.1 offered too, so that a server without HTTP/2 says so rather than failing the handshake.
        tls.applicationProtocols = ["h2", "http/1.1"]
        self.origin = origin
        context = try NIOSSLContext(configuration: tls)
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
        await submit([StreamRequest(path: path, headers: PNSHeaderFields(headers), body: ByteBuffer(bytes: body), sink: sink, index: 0)])
        return try await sink.answers()[0].result.get()
    }

    /// Writes `requests` as streams, spread over the connections in runs, each run one write
    /// and one flush. Their answers go to their sinks; a run that cannot be written fails there.
    func submit(_ requests: [StreamRequest]) async {
        guard !requests.isEmpty else { return }
        let runs = min(connections.count, requests.count)
        let first = next.add(runs, ordering: .relaxed).oldValue
        // One run (a batch of one target, as a single-user send's is) is written by this
        // task: no group and child task for it.
        guard runs > 1 else { return await write(requests, on: connections[first % connections.count]) }
        // The runs' connections are made (when they must be) side by side: a server slow to
        // connect or to finish TLS holds up only its own run.
        await withTaskGroup(of: Void.self) { group in
            for run in 0..<runs {
                let slice = Array(requests[(requests.count * run / runs)..<(requests.count * (run + 1) / runs)])
                let connection = connections[(first + run) % connections.count]
                group.addTask { await self.write(slice, on: connection) }
            }
        }
    }

    private func write(_ slice: [StreamRequest], on connection: Connection) async {
        let channel: any Channel
        do { channel = try await connection.channel { try await self.connect() } } catch {
            let failure: any Error = error is NotHTTP2 ? error : ConnectFailed(origin: origin, reason: "\(error)")
            for request in slice { request.sink.complete(request.index, .failure(failure)) }
            return
        }
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
        do {
            channel = try await ClientBootstrap(group: loop)
                .channelOption(.socketOption(.tcp_nodelay), value: 1)
                .connectTimeout(.seconds(5))
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: context, serverHostname: isAddress ? nil : host))
                        try channel.pipeline.syncOperations.addHandler(NegotiatedProtocol(negotiated))
                        // The frames of a flush go to TLS as one write: one record, not one a frame.
                        try channel.pipeline.syncOperations.addHandler(WriteCoalescer())
                        try channel.pipeline.syncOperations.addHandler(
                            NIOHTTP2Handler(
                                mode: .client,
                                initialSettings: [
                                    HTTP2Setting(parameter: .enablePush, value: 0),
                                    HTTP2Setting(parameter: .initialWindowSize, value: 1 << 20),
                                    HTTP2Setting(parameter: .maxHeaderListSize, value: 16 * 1024),
                                ],
                                // The headers are ours and valid; the server's answers are still read with care.
                                headerBlockValidation: .disabled))
                        try channel.pipeline.syncOperations.addHandler(
                            HTTP2StreamsHandler(authority: authority, timeout: timeout, draining: draining))
                    }
                }
                .connect(host: host, port: port)
                .get()
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
        private let current = Mutex<Task<Connected, any Error>?>(nil)

        /// The connection's channel, made anew when there is none, it closed, or its server
        /// said GOAWAY (that one finishes its streams on its own and then closes).
        func channel(_ connect: @escaping @Sendable () async throws -> Connected) async throws -> any Channel {
            try await channel(connect, reconnected: false)
        }

        private func channel(_ connect: @escaping @Sendable () async throws -> Connected, reconnected: Bool) async throws -> any Channel {
            var made = false
            let task = current.withLock { current -> Task<Connected, any Error> in
                if let existing = current { return existing }
                let task = Task { try await connect() }
                current = task
                made = true
                return task
            }
            do {
                let connected = try await task.value
                if connected.channel.isActive, !connected.draining.isSet { return connected.channel }
            } catch {
                current.withLock { if $0 == task { $0 = nil } }
                throw error
            }
            current.withLock { if $0 == task { $0 = nil } }
            // A connection closed or told GOAWAY since it was made: connect again, once. One
            // that is so as soon as it is made (a server that hangs up or says GOAWAY at once)
            // fails, rather than being made again and again.
            guard !(made && reconnected) else {
                throw HTTP2Client.Failure(description: "the server closed the connection or said GOAWAY as soon as it was made")
            }
            return try await channel(connect, reconnected: made || reconnected)
        }

        func close() async {
            let task = current.withLock { current -> Task<Connected, any Error>? in
                defer { current = nil }
                return current
            }
            if let connected = try? await task?.value { try? await connected.channel.close() }
        }
    }
}

/// A request handed to a connection's `HTTP2StreamsHandler`; its answer goes to `sink` at `index`.
struct StreamRequest: Sendable {
    var path: String
    var headers: PNSHeaderFields
    var body: ByteBuffer
    var sink: ResponseSink
    var index: Int
}

/// Requests written to one connection together.
struct StreamRequests: Sendable {
    var requests: [StreamRequest]
}

/// Collects the answers of one `send` or `sendAll`, each with the time it took, and wakes the
/// waiter once all are in: one continuation for many requests, no future per request.
final class ResponseSink: Sendable {
    typealias Answer = (result: Result<PNSResponse, any Error>, latency: Duration)

    private struct State {
        var answers: [Answer?]
        var remaining: Int
        var waiter: CheckedContinuation<[Answer], Never>?
    }

    private let state: Mutex<State>
    private let started = ContinuousClock.now
    /// Called once per answer (frees an in-flight slot).
    private let onEach: @Sendable () -> Void

    init(count: Int, onEach: @escaping @Sendable () -> Void = {}) {
        state = Mutex(State(answers: Array(repeating: nil, count: count), remaining: count))
        self.onEach = onEach
    }

    /// The answer for `index`; later ones for the same index are ignored.
    func complete(_ index: Int, _ result: Result<PNSResponse, any Error>) {
        let latency = ContinuousClock.now - started
        let (first, done) = state.withLock { state -> (Bool, (CheckedContinuation<[Answer], Never>, [Answer])?) in
            guard state.answers[index] == nil else { return (false, nil) }
            state.answers[index] = (result, latency)
            state.remaining -= 1
            guard state.remaining == 0, let waiter = state.waiter else { return (true, nil) }
            state.waiter = nil
            return (true, (waiter, state.answers.map { $0! }))
        }
        if first { onEach() }
        if let (waiter, answers) = done { waiter.resume(returning: answers) }
    }

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

/// Turns requests into streams (HEADERS and DATA frames) and frames back into responses; a
/// request's frames are flushed with the others written in the same tick of the event loop.
final class HTTP2StreamsHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundIn = StreamRequests
    typealias OutboundOut = HTTP2Frame

    private struct Pending {
        var sink: ResponseSink
        var index: Int
        var deadline: NIODeadline
        var status: Int?
        var headers = PNSHeaderFields()
        var body: ByteBuffer?
    }

    private let authority: String
    private var nextStreamID: Int32 = 1
    private var pending: [HTTP2StreamID: Pending] = [:]
    private var closed = false
    private var flushScheduled = false
    private var window = HTTP2ConnectionWindow()
    /// Fails streams past their deadline: one sweep for the connection, not a timer per stream.
    private var sweep: Scheduled<Void>?

    private let timeout: TimeAmount
    private let draining: HTTP2Client.Draining

    init(authority: String, timeout: TimeAmount, draining: HTTP2Client.Draining) {
        self.authority = authority
        self.timeout = timeout
        self.draining = draining
    }

    func channelActive(context: ChannelHandlerContext) {
        context.write(wrapOutboundOut(HTTP2ConnectionWindow.opening), promise: nil)
        context.flush()
        scheduleSweep(context: context)
        context.fireChannelActive()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let batch = unwrapOutboundIn(data)
        promise?.succeed(())
        let deadline = NIODeadline.now() + timeout
        for request in batch.requests { write(request, deadline: deadline, context: context) }
        if !flushScheduled {
            flushScheduled = true
            context.eventLoop.assumeIsolated().execute { [self] in
                flushScheduled = false
                context.flush()
            }
        }
    }

    private func write(_ request: StreamRequest, deadline: NIODeadline, context: ChannelHandlerContext) {
        guard !closed, nextStreamID < Int32.max - 2 else {
            // Out of stream ids: the connection takes no more, and closes once its streams end.
            closed = true
            draining.set()
            request.sink.complete(request.index, .failure(HTTP2Client.Failure(description: "the HTTP/2 connection is closing")))
            closeIfDrained(context: context)
            return
        }
        let id = HTTP2StreamID(nextStreamID)
        nextStreamID += 2
        // One allocation for the stream's header list: sized first, then filled.
        var headers = HPACKHeaders()
        headers.reserveCapacity(request.headers.fields.count + 4)
        headers.add(name: ":method", value: "POST")
        headers.add(name: ":scheme", value: "https")
        headers.add(name: ":authority", value: authority)
        // Each device's path is new: kept out of the HPACK table, which then holds what repeats
        // (the token, the topic) and stays small to search.
        headers.add(name: ":path", value: request.path, indexing: .nonIndexable)
        for field in request.headers.fields {
            // Names are lowercase on HTTP/2; providers already write them so, which saves a copy.
            let name = field.name
            headers.add(name: name.utf8.contains(where: { $0 >= 65 && $0 <= 90 }) ? name.lowercased() : name, value: field.value)
        }
        let hasBody = request.body.readableBytes > 0
        pending[id] = Pending(sink: request.sink, index: request.index, deadline: deadline)
        // No promise per stream (a promise, a future and a callback each): a stream the server
        // will not take fails through this handler's own books, at GOAWAY (ids past the last it
        // kept), when the connection closes, or at the deadline sweep.
        context.write(
            wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: headers, endStream: !hasBody)))), promise: nil)
        if hasBody {
            context.write(
                wrapOutboundOut(HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(request.body), endStream: true)))), promise: nil)
        }
    }

    /// The next sweep, in a quarter of the time-out (so a stream fails at most a quarter late),
    /// at most a second.
    private func scheduleSweep(context: ChannelHandlerContext) {
        let every = TimeAmount.nanoseconds(min(max(timeout.nanoseconds / 4, 10_000_000), 1_000_000_000))
        sweep = context.eventLoop.assumeIsolated().scheduleTask(in: every) { [self] in
            expire(context: context)
            // After GOAWAY the streams the server kept still get their deadline.
            if !closed || !pending.isEmpty { scheduleSweep(context: context) }
        }
    }

    /// Fails and resets the streams whose deadline passed.
    private func expire(context: ChannelHandlerContext) {
        let now = NIODeadline.now()
        let late = pending.filter { $0.value.deadline <= now }.map(\.key)
        guard !late.isEmpty else {
            closeIfDrained(context: context)
            return
        }
        for id in late {
            fail(id, HTTP2Client.Failure(description: "no answer within \(timeout)"))
            context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .rstStream(.cancel))), promise: nil)
        }
        context.flush()
        closeIfDrained(context: context)
    }

    /// Closes a connection whose server said GOAWAY once it has no stream left.
    private func closeIfDrained(context: ChannelHandlerContext) {
        if closed, pending.isEmpty, context.channel.isActive { context.close(promise: nil) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.payload {
        case .headers(let headers):
            guard var stream = pending[frame.streamID] else { return }
            if let status = headers.headers.first(name: ":status").flatMap(Int.init) {
                if (100..<200).contains(status) { return }
                stream.status = status
            }
            for (name, value, _) in headers.headers where !name.hasPrefix(":") { stream.headers.add(name, value) }
            pending[frame.streamID] = stream
            if headers.endStream { complete(frame.streamID) }
        case .data(let payload):
            guard case .byteBuffer(var bytes) = payload.data else { return }
            // Padding counts against the window too, with its length byte.
            window.discard(payload.paddingBytes.map { $0 + 1 } ?? 0)
            guard var stream = pending[frame.streamID] else {
                window.discard(bytes.readableBytes)
                return
            }
            window.receive(&bytes, into: &stream.body)
            // PNS answers are small: a body past 64 KiB fails its stream.
            guard (stream.body?.readableBytes ?? 0) <= 64 * 1024 else {
                fail(frame.streamID, HTTP2Client.Failure(description: "an answer over 64 KiB"))
                context.write(wrapOutboundOut(HTTP2Frame(streamID: frame.streamID, payload: .rstStream(.cancel))), promise: nil)
                context.flush()
                return
            }
            pending[frame.streamID] = stream
            if payload.endStream { complete(frame.streamID) }
        case .rstStream(let code):
            fail(frame.streamID, HTTP2Client.Failure(description: "stream reset: \(code)"))
        case .goAway(let lastStreamID, let code, _):
            closed = true
            draining.set()
            for id in pending.keys where id > lastStreamID { fail(id, HTTP2Client.Failure(description: "GOAWAY \(code)")) }
        default:
            break
        }
        closeIfDrained(context: context)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if let update = window.update() {
            context.write(wrapOutboundOut(update), promise: nil)
            context.flush()
        }
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        closed = true
        draining.set()
        sweep?.cancel()
        for id in Array(pending.keys) { fail(id, HTTP2Client.Failure(description: "the connection closed")) }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        closed = true
        draining.set()
        for id in Array(pending.keys) { fail(id, HTTP2Client.Failure(description: "\(error)")) }
        context.close(promise: nil)
    }

    private func complete(_ id: HTTP2StreamID) {
        guard let stream = pending.removeValue(forKey: id) else { return }
        guard let status = stream.status else {
            stream.sink.complete(stream.index, .failure(HTTP2Client.Failure(description: "an answer without :status")))
            return
        }
        let response = PNSResponse(status: status, headers: stream.headers, body: stream.body.map { Data($0.readableBytesView) } ?? Data())
        stream.sink.complete(stream.index, .success(response))
    }

    private func fail(_ id: HTTP2StreamID, _ error: any Error) {
        guard let stream = pending.removeValue(forKey: id) else { return }
        stream.sink.complete(stream.index, .failure(error))
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
