import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import PushProviders
import Synchronization

/// The simulator's HTTP/2 listener: every simulated service (APNs, FCM, WNS, Web Push and the
/// token endpoints) over TLS (ALPN `h2`), served frame by frame on each connection, with no
/// channel per stream. Answers written while reading a batch of frames leave in one flush.
enum PNSHTTP2Server {
    /// The accepted connections, so that stopping the server closes them too.
    final class Connections: Sendable {
        private let open = Mutex<[ObjectIdentifier: any Channel]>([:])

        func add(_ channel: any Channel) {
            let id = ObjectIdentifier(channel)
            open.withLock { $0[id] = channel }
            channel.closeFuture.whenComplete { [self] _ in _ = open.withLock { $0.removeValue(forKey: id) } }
        }

        func closeAll() async {
            for channel in open.withLock({ Array($0.values) }) { try? await channel.close() }
        }
    }

    static func bind(
        host: String, port: Int, tls: TLSConfiguration, state: SimulatorState, connections: Connections, group: any EventLoopGroup
    ) async throws -> any Channel {
        var tls = tls
        tls.applicationProtocols = ["h2"]
        let context = try NIOSSLContext(configuration: tls)
        return try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                connections.add(channel)
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    // A flush's answers go to TLS as one write, as a push service's would.
                    try channel.pipeline.syncOperations.addHandler(WriteCoalescer())
                    try channel.pipeline.syncOperations.addHandler(
                        NIOHTTP2Handler(
                            mode: .server,
                            initialSettings: [
                                HTTP2Setting(parameter: .maxConcurrentStreams, value: 1000),
                                // Real pushes are 5 KB at most: a stream's window stays small.
                                HTTP2Setting(parameter: .initialWindowSize, value: 65_535),
                                HTTP2Setting(parameter: .maxHeaderListSize, value: 16 * 1024),
                            ]))
                    try channel.pipeline.syncOperations.addHandler(PNSFrameHandler(state: state))
                }
            }
            .bind(host: host, port: port)
            .get()
    }
}

/// Collects each stream's HEADERS and DATA, answers it through `SimulatorState.serve`, and
/// keeps the connection's receive window open.
final class PNSFrameHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private struct Stream {
        var headers: HPACKHeaders
        var body: ByteBuffer?
    }

    /// Most streams a connection may have open and unanswered, and most bytes it may have
    /// sent in bodies not yet answered: a client past either is cut off. A body past
    /// `maximumBody` is answered 413.
    static let maximumOpenStreams = 4096
    static let maximumBuffered = 8 << 20
    static let maximumBody = 64 * 1024

    private let state: SimulatorState
    private var streams: [HTTP2StreamID: Stream] = [:]
    private var window = HTTP2ConnectionWindow()
    private var needsFlush = false
    /// Bytes of the bodies of streams not yet answered.
    private var buffered = 0

    init(state: SimulatorState) { self.state = state }

    func channelActive(context: ChannelHandlerContext) {
        // Open the connection window wide; it is topped up as data arrives.
        context.write(wrapOutboundOut(HTTP2ConnectionWindow.opening), promise: nil)
        context.flush()
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.payload {
        case .headers(let headers):
            // Trailers end a stream whose body came; they replace nothing.
            if streams[frame.streamID] != nil {
                if headers.endStream { finish(frame.streamID, context: context) }
                return
            }
            guard streams.count < Self.maximumOpenStreams else {
                context.close(promise: nil)
                return
            }
            streams[frame.streamID] = Stream(headers: headers.headers, body: nil)
            if headers.endStream { finish(frame.streamID, context: context) }
        case .data(let data):
            guard case .byteBuffer(var bytes) = data.data else { return }
            guard var stream = streams[frame.streamID] else {
                window.discard(bytes.readableBytes)
                return
            }
            window.discard(data.paddingBytes.map { $0 + 1 } ?? 0)
            buffered += bytes.readableBytes
            window.receive(&bytes, into: &stream.body)
            guard buffered <= Self.maximumBuffered else {
                context.close(promise: nil)
                return
            }
            guard (stream.body?.readableBytes ?? 0) <= Self.maximumBody else {
                buffered -= stream.body?.readableBytes ?? 0
                streams[frame.streamID] = nil
                respond(frame.streamID, SimulatorState.text(413, "Request body too large"), context: context)
                needsFlush = true
                return
            }
            streams[frame.streamID] = stream
            if data.endStream { finish(frame.streamID, context: context) }
        case .rstStream:
            buffered -= streams.removeValue(forKey: frame.streamID)?.body?.readableBytes ?? 0
        default:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if let update = window.update() {
            context.write(wrapOutboundOut(update), promise: nil)
            needsFlush = true
        }
        if needsFlush {
            needsFlush = false
            context.flush()
        }
        context.fireChannelReadComplete()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    private func finish(_ id: HTTP2StreamID, context: ChannelHandlerContext) {
        guard let stream = streams.removeValue(forKey: id) else { return }
        buffered -= stream.body?.readableBytes ?? 0
        let headers = stream.headers
        let path = headers.first(name: ":path") ?? ""
        let request = SimRequest(
            header: { headers.first(name: $0) }, body: stream.body ?? ByteBuffer(), scheme: "https", authority: headers.first(name: ":authority"))
        let faults = state.faults
        let answer =
            state.serve(method: headers.first(name: ":method") ?? "", path: path, request, faults: faults)
            ?? SimulatorState.json(404, #"{"reason":"BadPath"}"#)
        let latency = SimulatorState.isTokenEndpoint(path) ? 0 : faults.latencyMs
        if latency > 0 {
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            context.eventLoop.scheduleTask(in: .milliseconds(Int64(latency))) {
                let (handler, context) = loopBound.value
                handler.respond(id, answer, context: context)
                context.flush()
            }
        } else {
            respond(id, answer, context: context)
            needsFlush = true
        }
    }

    /// Header values new with every answer, kept out of the HPACK table, which stays small.
    private static let unique: Set<String> = ["apns-id", "location", "x-wns-msg-id"]

    private func respond(_ id: HTTP2StreamID, _ answer: SimAnswer, context: ChannelHandlerContext) {
        var headers = HPACKHeaders()
        headers.reserveCapacity(answer.headers.count + 1)
        headers.add(name: ":status", value: String(answer.status))
        for (name, value) in answer.headers {
            let name = name.utf8.contains(where: { $0 >= 65 && $0 <= 90 }) ? name.lowercased() : name
            headers.add(name: name, value: value, indexing: Self.unique.contains(name) ? .nonIndexable : .indexable)
        }
        let body = answer.body.map { context.channel.allocator.buffer(string: $0) }
        context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: headers, endStream: body == nil)))), promise: nil)
        if let body {
            context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(body), endStream: true)))), promise: nil)
        }
    }
}

extension HTTP2ConnectionWindow {
    /// The WINDOW_UPDATE that opens the connection's window (65,535 bytes by default) at the start.
    static var opening: HTTP2Frame {
        HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: size - 65_535))
    }

    /// The WINDOW_UPDATE to send after a read, once a sixteenth of the window was consumed.
    mutating func update() -> HTTP2Frame? {
        increment().map { HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: $0)) }
    }
}
