import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import PushModel
import Synchronization

/// Plain HTTP/1.1 to one origin over keep-alive connections, one request on a connection at a
/// time: what `pushhub load` drives the ingress with. async-http-client spent about 40 µs of
/// CPU on each of its requests (a transaction, a state machine, a tracing span and two socket
/// writes); here a request is one promise and one write.
public final class HTTP1Client: Sendable {
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    private let host: String
    private let port: Int
    private let maximumConnections: Int
    private let requestTimeout: TimeAmount
    private let connectTimeout: TimeAmount
    private let group: any EventLoopGroup
    private let pool = Mutex(Pool())

    private struct Pool {
        var idle: [any Channel] = []
        /// Connections open or opening.
        var count = 0
        var waiters: [CheckedContinuation<Decision, Never>] = []
        var closed = false
    }

    /// Answers' bodies are read up to this size.
    public static let maximumBody = 1 << 20

    /// Connections are made on `group`'s event loops.
    public init(
        host: String, port: Int, connections: Int, requestTimeout: Duration = .seconds(30), connectTimeout: Duration = .seconds(5),
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) {
        self.group = group
        self.host = host
        self.port = port
        maximumConnections = max(1, connections)
        self.requestTimeout = TimeAmount(requestTimeout)
        self.connectTimeout = TimeAmount(connectTimeout)
    }

    /// Sends one request to `path` (with its query) and reads the whole answer. Throws on
    /// connection failures and time-outs; a connection that failed is closed, not reused.
    public func send(_ method: HTTPMethod, path: String, headers: [(String, String)], body: Data?) async throws -> PNSResponse {
        guard let channel = try await checkOut() else { throw Failure(description: "the client was shut down") }
        var head = HTTPRequestHead(version: .http1_1, method: method, uri: path)
        head.headers.reserveCapacity(headers.count + 2)
        head.headers.add(name: "Host", value: "\(host):\(port)")
        for (name, value) in headers { head.headers.add(name: name, value: value) }
        if let body { head.headers.add(name: "Content-Length", value: String(body.count)) }
        let promise = channel.eventLoop.makePromise(of: PNSResponse.self)
        // A connection that closed since it was handed back fails the write, not the exchange.
        let written = channel.eventLoop.makePromise(of: Void.self)
        written.futureResult.whenFailure { promise.fail($0) }
        channel.writeAndFlush(Exchange.Request(head: head, body: body.map { ByteBuffer(bytes: $0) }, answer: promise), promise: written)
        do {
            let response = try await promise.futureResult.get()
            checkIn(channel, reusable: !CaseFolding.equal(response.headers.first(name: "connection") ?? "", "close"))
            return response
        } catch {
            checkIn(channel, reusable: false)
            throw error
        }
    }

    /// What a request does for a connection.
    private enum Decision {
        case use(any Channel)
        /// Open one: a place among `maximumConnections` is taken for it.
        case open
        case closed
        case wait
    }

    /// An idle connection, a new one while fewer than `maximumConnections` are open, or the
    /// next one handed back; nil once shut down.
    private func checkOut() async throws -> (any Channel)? {
        var decision = pool.withLock { decide(&$0) }
        if case .wait = decision {
            // Decided again with the waiter signed up in one step: a connection handed back
            // (or a place freed) between the two is not missed.
            decision = await withCheckedContinuation { (continuation: CheckedContinuation<Decision, Never>) in
                let now = pool.withLock { pool -> Decision in
                    let now = decide(&pool)
                    if case .wait = now { pool.waiters.append(continuation) }
                    return now
                }
                if case .wait = now { return }
                continuation.resume(returning: now)
            }
        }
        switch decision {
        case .use(let channel): return channel
        case .closed, .wait: return nil
        case .open:
            do {
                return try await connect()
            } catch {
                release()
                throw Failure(description: "could not connect to \(host):\(port): \(error)")
            }
        }
    }

    private func decide(_ pool: inout Pool) -> Decision {
        if pool.closed { return .closed }
        while let channel = pool.idle.popLast() {
            if channel.isActive { return .use(channel) }
            pool.count -= 1
        }
        if pool.count < maximumConnections {
            pool.count += 1
            return .open
        }
        return .wait
    }

    private func checkIn(_ channel: any Channel, reusable: Bool) {
        guard reusable, channel.isActive else {
            channel.close(promise: nil)
            release()
            return
        }
        let (waiter, closed) = pool.withLock { pool -> (CheckedContinuation<Decision, Never>?, Bool) in
            if pool.closed { return (nil, true) }
            if !pool.waiters.isEmpty { return (pool.waiters.removeFirst(), false) }
            pool.idle.append(channel)
            return (nil, false)
        }
        if let waiter { waiter.resume(returning: .use(channel)) }
        if closed { channel.close(promise: nil) }
    }

    /// One connection fewer: its place goes to a waiter, if any, which opens its own.
    private func release() {
        let waiter = pool.withLock { pool -> CheckedContinuation<Decision, Never>? in
            guard !pool.waiters.isEmpty else {
                pool.count -= 1
                return nil
            }
            return pool.waiters.removeFirst()
        }
        waiter?.resume(returning: .open)
    }

    private func connect() async throws -> any Channel {
        let timeout = requestTimeout
        return try await ClientBootstrap(group: group)
            .connectTimeout(connectTimeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(Exchange(timeout: timeout))
                }
            }
            .connect(host: host, port: port).get()
    }

    /// Closes every connection; requests waiting for one fail.
    public func shutdown() async {
        let (idle, waiters) = pool.withLock { pool in
            pool.closed = true
            defer {
                pool.idle = []
                pool.waiters = []
            }
            return (pool.idle, pool.waiters)
        }
        for waiter in waiters { waiter.resume(returning: .closed) }
        for channel in idle { try? await channel.close() }
    }
}

/// One connection's request and answer: writes the request, collects the answer, and fails it
/// when the connection closes or the answer takes longer than the time-out.
private final class Exchange: ChannelDuplexHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = Request
    typealias OutboundOut = HTTPClientRequestPart

    struct Request {
        var head: HTTPRequestHead
        var body: ByteBuffer?
        var answer: EventLoopPromise<PNSResponse>
    }

    private let timeout: TimeAmount
    private var answer: EventLoopPromise<PNSResponse>?
    private var deadline: Scheduled<Void>?
    private var status = 0
    private var headers = PNSHeaderFields()
    private var body = Data()

    init(timeout: TimeAmount) { self.timeout = timeout }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let request = unwrapOutboundIn(data)
        guard answer == nil else {
            let failure = HTTP1Client.Failure(description: "a request is already in flight on this connection")
            request.answer.fail(failure)
            promise?.fail(failure)
            return
        }
        answer = request.answer
        status = 0
        headers = PNSHeaderFields()
        body.removeAll(keepingCapacity: true)
        let timeout = timeout
        deadline = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) { [weak self, context] in
            self?.fail(HTTP1Client.Failure(description: "no answer within \(timeout.nanoseconds / 1_000_000_000) s"))
            context.close(promise: nil)
        }
        context.write(wrapOutboundOut(.head(request.head)), promise: nil)
        if let body = request.body { context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil) }
        context.write(wrapOutboundOut(.end(nil)), promise: promise)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            status = Int(head.status.code)
            headers = PNSHeaderFields(head.headers.map { ($0.name, $0.value) })
        case .body(var bytes):
            guard body.count + bytes.readableBytes <= HTTP1Client.maximumBody else {
                fail(HTTP1Client.Failure(description: "an answer's body is larger than \(HTTP1Client.maximumBody) bytes"))
                context.close(promise: nil)
                return
            }
            if let read = bytes.readBytes(length: bytes.readableBytes) { body.append(contentsOf: read) }
        case .end:
            deadline?.cancel()
            deadline = nil
            let promise = answer
            answer = nil
            promise?.succeed(PNSResponse(status: status, headers: headers, body: body))
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        fail(HTTP1Client.Failure(description: "the connection closed before the answer ended"))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(error)
        context.close(promise: nil)
    }

    private func fail(_ error: any Error) {
        deadline?.cancel()
        deadline = nil
        let promise = answer
        answer = nil
        promise?.fail(error)
    }
}
