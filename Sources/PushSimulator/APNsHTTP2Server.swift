import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import PushProviders
import Synchronization

/// The simulator's APNs endpoint: HTTP/2 over TLS (ALPN `h2`), served frame by frame on each
/// connection, with no channel per stream. Answers written while reading a batch of frames
/// leave in one flush.
enum APNsHTTP2Server {
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

    static func bind(host: String, port: Int, tls: TLSConfiguration, state: SimulatorState, connections: Connections) async throws -> any Channel {
        var tls = tls
        tls.applicationProtocols = ["h2"]
        let context = try NIOSSLContext(configuration: tls)
        return try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                connections.add(channel)
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    try channel.pipeline.syncOperations.addHandler(
                        NIOHTTP2Handler(
                            mode: .server,
                            initialSettings: [
                                HTTP2Setting(parameter: .maxConcurrentStreams, value: 1000),
                                HTTP2Setting(parameter: .initialWindowSize, value: 1 << 20),
                                HTTP2Setting(parameter: .maxHeaderListSize, value: 16 * 1024),
                            ]))
                    try channel.pipeline.syncOperations.addHandler(APNsFrameHandler(state: state))
                }
            }
            .bind(host: host, port: port)
            .get()
    }
}

/// Collects each stream's HEADERS and DATA, answers it through `SimulatorState.apns`, and
/// keeps the connection's receive window open.
final class APNsFrameHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private struct Stream {
        var headers: HPACKHeaders
        var body: ByteBuffer?
    }

    private let state: SimulatorState
    private var streams: [HTTP2StreamID: Stream] = [:]
    private var window = HTTP2ConnectionWindow()
    private var needsFlush = false

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
            streams[frame.streamID] = Stream(headers: headers.headers, body: nil)
            if headers.endStream { finish(frame.streamID, context: context) }
        case .data(let data):
            guard case .byteBuffer(var bytes) = data.data, var stream = streams[frame.streamID] else { return }
            window.receive(&bytes, into: &stream.body)
            streams[frame.streamID] = stream
            if data.endStream { finish(frame.streamID, context: context) }
        case .rstStream:
            streams[frame.streamID] = nil
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
        let path = stream.headers.first(name: ":path") ?? ""
        let answer: SimulatorState.APNsAnswer
        if stream.headers.first(name: ":method") == "POST", path.hasPrefix("/3/device/") {
            let token = String(path.dropFirst("/3/device/".count))
            let body = stream.body.map { Data($0.readableBytesView) } ?? Data()
            answer = state.apns(token: token, header: { stream.headers.first(name: $0) }, payload: body, faults: state.faults)
        } else {
            answer = SimulatorState.APNsAnswer(status: 405, headers: [("content-type", "application/json")], body: #"{"reason":"MethodNotAllowed"}"#)
        }
        let latency = state.faults.latencyMs
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

    private func respond(_ id: HTTP2StreamID, _ answer: SimulatorState.APNsAnswer, context: ChannelHandlerContext) {
        var headers = HPACKHeaders([(":status", String(answer.status))])
        // apns-id is new with every answer: kept out of the HPACK table, which stays small.
        for (name, value) in answer.headers { headers.add(name: name, value: value, indexing: name == "apns-id" ? .nonIndexable : .indexable) }
        let body = answer.body.map { context.channel.allocator.buffer(string: $0) }
        context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: headers, endStream: body == nil)))), promise: nil)
        if let body {
            context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(body), endStream: true)))), promise: nil)
        }
    }
}
