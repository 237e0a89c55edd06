import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL
import Synchronization

/// HTTP/2 over TLS to one origin, for APNs: a few connections, each request a stream written
/// frame by frame on its connection, and the frames of requests sent in the same event-loop
/// tick flushed together (one TLS write for many pushes).
final class HTTP2Client: Sendable {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private let host: String
    private let port: Int
    private let authority: String
    private let context: NIOSSLContext
    private let connections: [Connection]
    private let next = Atomic<Int>(0)
    private let timeout: TimeAmount

    init(host: String, port: Int, tls: TLSConfiguration, connections: Int, timeout: TimeAmount) throws {
        var tls = tls
        tls.applicationProtocols = ["h2"]
        context = try NIOSSLContext(configuration: tls)
        self.host = host
        self.port = port
        authority = port == 443 ? host : "\(host):\(port)"
        self.connections = (0..<max(1, connections)).map { _ in Connection() }
        self.timeout = timeout
    }

    func send(path: String, headers: [(String, String)], body: Data) async throws -> PNSHTTPClient.Response {
        let connection = connections[next.add(1, ordering: .relaxed).oldValue % connections.count]
        let channel = try await connection.channel { try await self.connect() }
        let promise = channel.eventLoop.makePromise(of: PNSHTTPClient.Response.self)
        let request = StreamRequest(path: path, headers: headers, body: ByteBuffer(bytes: body), timeout: timeout, promise: promise)
        // A write that never reaches the handler (the connection closed meanwhile) fails the request.
        let written = channel.eventLoop.makePromise(of: Void.self)
        written.futureResult.whenFailure { promise.fail($0) }
        channel.write(request, promise: written)
        return try await promise.futureResult.get()
    }

    func shutdown() async {
        for connection in connections { await connection.close() }
    }

    private func connect() async throws -> any Channel {
        let (context, host, authority) = (self.context, self.host, self.authority)
        let isAddress = host.allSatisfy { $0.isNumber || $0 == "." || $0 == ":" }
        return try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connectTimeout(.seconds(5))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: context, serverHostname: isAddress ? nil : host))
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
                    try channel.pipeline.syncOperations.addHandler(HTTP2StreamsHandler(authority: authority))
                }
            }
            .connect(host: host, port: port)
            .get()
    }

    /// One connection, made when first needed and again after it closed.
    final class Connection: Sendable {
        private let current = Mutex<Task<any Channel, any Error>?>(nil)

        func channel(_ connect: @escaping @Sendable () async throws -> any Channel) async throws -> any Channel {
            let task = current.withLock { current -> Task<any Channel, any Error> in
                if let existing = current { return existing }
                let made = Task { try await connect() }
                current = made
                return made
            }
            do {
                let channel = try await task.value
                if channel.isActive { return channel }
            } catch {
                current.withLock { if $0 == task { $0 = nil } }
                throw error
            }
            // Closed since: the next caller reconnects.
            current.withLock { if $0 == task { $0 = nil } }
            return try await self.channel(connect)
        }

        func close() async {
            let task = current.withLock { current -> Task<any Channel, any Error>? in
                defer { current = nil }
                return current
            }
            if let channel = try? await task?.value { try? await channel.close() }
        }
    }
}

/// A request handed to a connection's `HTTP2StreamsHandler`.
struct StreamRequest: Sendable {
    var path: String
    var headers: [(String, String)]
    var body: ByteBuffer
    var timeout: TimeAmount
    var promise: EventLoopPromise<PNSHTTPClient.Response>
}

/// Turns requests into streams (HEADERS and DATA frames) and frames back into responses; a
/// request's frames are flushed with the others written in the same tick of the event loop.
final class HTTP2StreamsHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundIn = StreamRequest
    typealias OutboundOut = HTTP2Frame

    private struct Pending {
        var promise: EventLoopPromise<PNSHTTPClient.Response>
        var status: Int?
        var headers = HTTPHeaders()
        var body: ByteBuffer?
        var timer: Scheduled<Void>?
    }

    private let authority: String
    private var nextStreamID: Int32 = 1
    private var pending: [HTTP2StreamID: Pending] = [:]
    private var closed = false
    private var flushScheduled = false
    private var window = HTTP2ConnectionWindow()

    init(authority: String) { self.authority = authority }

    func channelActive(context: ChannelHandlerContext) {
        context.write(wrapOutboundOut(HTTP2ConnectionWindow.opening), promise: nil)
        context.flush()
        context.fireChannelActive()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let request = unwrapOutboundIn(data)
        promise?.succeed(())
        guard !closed, nextStreamID < Int32.max - 2 else {
            request.promise.fail(HTTP2Client.Failure(description: "the HTTP/2 connection is closing"))
            return
        }
        let id = HTTP2StreamID(nextStreamID)
        nextStreamID += 2
        var headers = HPACKHeaders([(":method", "POST"), (":scheme", "https"), (":authority", authority), (":path", request.path)])
        for (name, value) in request.headers { headers.add(name: name.lowercased(), value: value) }
        headers.add(name: "content-length", value: String(request.body.readableBytes))
        let hasBody = request.body.readableBytes > 0
        let loop = context.eventLoop.assumeIsolated()
        let timer = loop.scheduleTask(in: request.timeout) { [self] in
            guard let expired = pending.removeValue(forKey: id) else { return }
            expired.promise.fail(HTTP2Client.Failure(description: "no answer within \(request.timeout)"))
            context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .rstStream(.cancel))), promise: nil)
            context.flush()
        }
        pending[id] = Pending(promise: request.promise, timer: timer)
        // A stream the HTTP/2 handler refuses (e.g. after GOAWAY) fails at once, not at its time-out.
        let headersWritten = context.eventLoop.makePromise(of: Void.self)
        headersWritten.futureResult.assumeIsolated().whenFailure { [self] error in fail(id, error) }
        context.write(
            wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: headers, endStream: !hasBody)))), promise: headersWritten)
        if hasBody {
            context.write(
                wrapOutboundOut(HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(request.body), endStream: true)))), promise: nil)
        }
        if !flushScheduled {
            flushScheduled = true
            loop.execute { [self] in
                flushScheduled = false
                context.flush()
            }
        }
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
            for (name, value, _) in headers.headers where !name.hasPrefix(":") { stream.headers.add(name: name, value: value) }
            pending[frame.streamID] = stream
            if headers.endStream { complete(frame.streamID) }
        case .data(let payload):
            guard case .byteBuffer(var bytes) = payload.data, var stream = pending[frame.streamID] else { return }
            window.receive(&bytes, into: &stream.body)
            pending[frame.streamID] = stream
            if payload.endStream { complete(frame.streamID) }
        case .rstStream(let code):
            fail(frame.streamID, HTTP2Client.Failure(description: "stream reset: \(code)"))
        case .goAway(let lastStreamID, let code, _):
            closed = true
            for id in pending.keys where id > lastStreamID { fail(id, HTTP2Client.Failure(description: "GOAWAY \(code)")) }
        default:
            break
        }
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
        for id in Array(pending.keys) { fail(id, HTTP2Client.Failure(description: "the connection closed")) }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        closed = true
        for id in Array(pending.keys) { fail(id, HTTP2Client.Failure(description: "\(error)")) }
        context.close(promise: nil)
    }

    private func complete(_ id: HTTP2StreamID) {
        guard let stream = pending.removeValue(forKey: id) else { return }
        stream.timer?.cancel()
        guard let status = stream.status else {
            stream.promise.fail(HTTP2Client.Failure(description: "an answer without :status"))
            return
        }
        stream.promise.succeed(
            PNSHTTPClient.Response(
                status: status, headers: PNSHeaderFields(stream.headers), body: stream.body.map { Data($0.readableBytesView) } ?? Data()))
    }

    private func fail(_ id: HTTP2StreamID, _ error: any Error) {
        guard let stream = pending.removeValue(forKey: id) else { return }
        stream.timer?.cancel()
        stream.promise.fail(error)
    }
}
