import Foundation
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL
import PushConfiguration
import PushModel
import PushProviders
import PushSimulator
import PushTestSupport
import PushWorker
import Synchronization
import Testing

/// Which HTTP a push goes over: PushHub's own HTTP/2 client where the service speaks it, and
/// HTTP/1.1 where it does not, or where too many origins already have an HTTP/2 client.
@Suite("HTTP versions to push services", .timeLimit(.minutes(2)))
struct HTTPVersionTests {
    /// A Web Push provider for hub `myhub` whose endpoints may be at 127.0.0.1:`port`.
    static func webPushProvider(port: Int, client: PNSHTTPClient) throws -> WebPushProvider {
        let credentials = try #require(try HubsConfiguration.Credentials.simulated(apns: "https://x", http: "http://x", hub: "myhub").webPush)
        return try WebPushProvider(
            credentials: ["myhub": credentials], endpoints: ["myhub": EndpointPolicy(webPushHosts: ["127.0.0.1:\(port)"])], transport: client)
    }

    /// A push to subscription `id` at 127.0.0.1:`port`.
    static func push(_ id: String, port: Int, body: String = "{}") -> PNSDelivery {
        PNSDelivery(
            hub: "myhub", notificationId: "n", handle: "https://127.0.0.1:\(port)/push/\(id)", webPush: SimulatedSubscription(id: id).keys,
            format: .browser, body: body)
    }

    /// The certificates' CA written to a file, removed when the test's `body` ends.
    static func withCAFile<T>(_ certificates: SimulatorCertificates, _ body: (String) async throws -> T) async throws -> T {
        let caFile = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-ca-\(UUID().uuidString).pem").path
        try certificates.caPEM.write(toFile: caFile, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: caFile) }
        return try await body(caFile)
    }
    @Test("a Web Push service that speaks only HTTP/1.1 over TLS still gets its pushes, and is remembered as such")
    func http1OnlyPushService() async throws {
        let certificates = try SimulatorCertificates.generate()
        let server = try await TLSTestServer.http1Only(certificates)
        defer { Task { try? await server.channel.close() } }
        try await Self.withCAFile(certificates) { caFile in
            let client = PNSHTTPClient(trustRootsFile: caFile)
            let provider = try Self.webPushProvider(port: server.port, client: client)
            func push(_ id: String) -> PNSDelivery { Self.push(id, port: server.port, body: #"{"title":"hi"}"#) }
            let first = await provider.deliverAll([push("a"), push("b")])
            #expect(first.map(\.classification) == [.delivered, .delivered], "\(first)")
            #expect(first.map(\.status) == [201, 201])
            let before = server.recorder.connections.withLock { $0 }
            let second = await provider.deliverAll([push("c")])
            #expect(second.map(\.classification) == [.delivered], "\(second)")
            #expect(
                server.recorder.paths.withLock { $0 }.sorted() == ["/push/a", "/push/b", "/push/c"],
                "every push reached the service once, over HTTP/1.1")
            // No new connection: the origin's own HTTP/1.1 client (its requests are pinned to the
            // checked address) kept its connection, and HTTP/2 is not tried again first.
            #expect(server.recorder.connections.withLock { $0 } - before == 0, "the origin is not tried over HTTP/2 again")
            await client.shutdown()
        }
    }

    /// Pushes to `name`, a name no DNS knows, which only the provider's resolver answers
    /// (loopback, which the hub's `webPushHosts` allows), at `server`: a connection that looked
    /// the name up again would find nothing. What each push was answered.
    static func pinnedPushes(
        _ ids: [String], name: String, server: TLSTestServer, certificates: SimulatorCertificates, maximumHTTP2Origins: Int = 64,
        answers: [[String]] = [["127.0.0.1"]]
    ) async throws -> [PNSAnswer] {
        // Each lookup the next of `answers`, round and round (a name served round-robin).
        let lookups = Mutex(0)
        let resolver = HostResolver(lifetime: .zero) { host in
            guard host == name else { return [] }
            return lookups.withLock { count in
                defer { count += 1 }
                return answers[count % answers.count]
            }
        }
        return try await Self.withCAFile(certificates) { caFile in
            let client = PNSHTTPClient(trustRootsFile: caFile, maximumHTTP2Origins: maximumHTTP2Origins)
            let credentials = try #require(try HubsConfiguration.Credentials.simulated(apns: "https://x", http: "http://x", hub: "myhub").webPush)
            let provider = try WebPushProvider(
                credentials: ["myhub": credentials], endpoints: ["myhub": EndpointPolicy(webPushHosts: ["\(name):\(server.port)"])],
                resolver: resolver, transport: client)
            var answers: [PNSAnswer] = []
            // One at a time, each checked again (answers kept no time here).
            for id in ids {
                answers += await provider.deliverAll([
                    PNSDelivery(
                        hub: "myhub", notificationId: "n", handle: "https://\(name):\(server.port)/push/\(id)",
                        webPush: SimulatedSubscription(id: id).keys, format: .browser, body: "{}")
                ])
            }
            await client.shutdown()
            return answers
        }
    }

    @Test("a Web Push connection goes to the addresses the endpoint's check approved: the name is not looked up again (HTTP/2)")
    func pinnedAddresses() async throws {
        let certificates = try SimulatorCertificates.generate(names: ["push.pinned.test"])
        let server = try await TLSTestServer.http2Created(certificates)
        defer { Task { try? await server.channel.close() } }
        let answers = try await Self.pinnedPushes(["a", "b"], name: "push.pinned.test", server: server, certificates: certificates)
        #expect(answers.map(\.classification) == [.delivered, .delivered], "\(answers)")
        #expect(server.recorder.paths.withLock { $0 }.sorted() == ["/push/a", "/push/b"])
    }

    @Test("a pinned Web Push origin that speaks only HTTP/1.1, or comes past the most HTTP/2 origins, is still sent to its checked address only")
    func pinnedAddressesOverHTTP1() async throws {
        let certificates = try SimulatorCertificates.generate(names: ["push.pinned.test"])
        // HTTP/1.1 only: async-http-client's client of its own for the origin, its name
        // overridden by the pinned address.
        let http1 = try await TLSTestServer.http1Only(certificates)
        defer { Task { try? await http1.channel.close() } }
        let first = try await Self.pinnedPushes(["a", "b"], name: "push.pinned.test", server: http1, certificates: certificates)
        #expect(first.map(\.classification) == [.delivered, .delivered], "\(first)")
        #expect(http1.recorder.paths.withLock { $0 }.sorted() == ["/push/a", "/push/b"])
        // No HTTP/2 client may be made (none at all here): the same, not the shared clients,
        // which look the name up.
        let http2 = try await TLSTestServer.http2Created(certificates)
        defer { Task { try? await http2.channel.close() } }
        let second = try await Self.pinnedPushes(
            ["c"], name: "push.pinned.test", server: http2, certificates: certificates, maximumHTTP2Origins: 0)
        #expect(second.map(\.classification) == [.delivered], "\(second)")
        #expect(http2.recorder.paths.withLock { $0 } == ["/push/c"])
        // A name whose answers come in turns: the origin's client stays on the address it
        // connects to while that address is among those pinned (the server listens on
        // 127.0.0.1 alone; a client made anew for 127.0.0.2 would find nothing there).
        let turns = try await Self.pinnedPushes(
            ["d", "e", "f"], name: "push.pinned.test", server: http1, certificates: certificates,
            answers: [["127.0.0.1", "127.0.0.2"], ["127.0.0.2", "127.0.0.1"]])
        #expect(turns.map(\.classification) == [.delivered, .delivered, .delivered], "\(turns)")
    }

    @Test("an endpoint's port past 16 bits is refused, not connected to")
    func portPastSixteenBits() async throws {
        let client = PNSHTTPClient()
        let credentials = try #require(try HubsConfiguration.Credentials.simulated(apns: "https://x", http: "http://x", hub: "myhub").webPush)
        let provider = try WebPushProvider(credentials: ["myhub": credentials], transport: client)
        let answers = await provider.deliverAll([
            PNSDelivery(
                hub: "myhub", notificationId: "n", handle: "https://push.example:65536/push/a", webPush: SimulatedSubscription(id: "a").keys,
                format: .browser, body: "{}")
        ])
        #expect(answers.first?.reason == "EndpointNotAllowed: the endpoint has no port 65536", "\(answers)")
        await client.shutdown()
    }

    @Test("a push service that accepts the connection but never finishes TLS fails the push in the request time, and is retried")
    func silentHandshake() async throws {
        // Accepts connections and never says a word.
        let silent = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get()
        defer { Task { try? await silent.close() } }
        let port = try #require(silent.localAddress?.port)
        let client = PNSHTTPClient(requestTimeout: .seconds(1))
        let provider = try Self.webPushProvider(port: port, client: client)
        let started = ContinuousClock.now
        let answers = await provider.deliverAll([Self.push("x", port: port)])
        #expect(answers.map(\.classification) == [.retry(retryAfter: nil)], "\(answers)")
        #expect(answers.first?.reason?.contains("TLS handshake") == true, "\(answers)")
        // Well within the test's time limit, which a hang would reach; the suite runs beside others on two cores.
        #expect(ContinuousClock.now - started < .seconds(30))
        await client.shutdown()
    }

    @Test("push services that never finish TLS are waited for side by side: a batch to eight of them takes the request time once, not eight times")
    func silentHandshakesTogether() async throws {
        var silent: [any Channel] = []
        for _ in 0..<8 {
            silent.append(try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get())
        }
        defer { for channel in silent { Task { try? await channel.close() } } }
        let ports = try silent.map { try #require($0.localAddress?.port) }
        let client = PNSHTTPClient(requestTimeout: .seconds(4))
        let credentials = try #require(try HubsConfiguration.Credentials.simulated(apns: "https://x", http: "http://x", hub: "myhub").webPush)
        let provider = try WebPushProvider(
            credentials: ["myhub": credentials], endpoints: ["myhub": EndpointPolicy(webPushHosts: ["127.0.0.1"])], transport: client)
        let started = ContinuousClock.now
        let answers = await provider.deliverAll(ports.map { Self.push("x", port: $0) })
        let took = ContinuousClock.now - started
        #expect(answers.allSatisfy { $0.classification == .retry(retryAfter: nil) }, "\(answers)")
        // One after another they took 8 × 4 s; side by side 4 s, and room for a loaded machine.
        #expect(took < .seconds(16), "\(took)")
        await client.shutdown()
    }

    @Test("a push service that answers at once and sends its body a byte at a time fails the push in the request time, and is retried")
    func tricklingAnswer() async throws {
        let certificates = try SimulatorCertificates.generate()
        // 200 bytes 0.3 s apart: 60 s in all, every wait within the read time-out.
        let server = try await TLSTestServer.trickling(certificates, bytes: 200, every: .milliseconds(300))
        defer { Task { try? await server.channel.close() } }
        try await Self.withCAFile(certificates) { caFile in
            let client = PNSHTTPClient(trustRootsFile: caFile, requestTimeout: .seconds(1))
            let provider = try Self.webPushProvider(port: server.port, client: client)
            let started = ContinuousClock.now
            let answers = await provider.deliverAll([Self.push("x", port: server.port)])
            let took = ContinuousClock.now - started
            #expect(answers.map(\.classification) == [.retry(retryAfter: nil)], "\(answers)")
            // The deadline and one read time-out, with room for a loaded machine (beside the
            // other suites, 10 to 12.5 s with both handshakes); not the 60 s the body takes.
            #expect(took < .seconds(30), "\(took)")
            await client.shutdown()
        }
    }

    @Test(
        "a push service that says GOAWAY and never answers fails the pushes in the request time; the next push gets a new connection",
        .timeLimit(.minutes(1)))
    func goAwayWithoutAnswers() async throws {
        let certificates = try SimulatorCertificates.generate()
        let server = try await TLSTestServer.goAway(certificates)
        defer { Task { try? await server.channel.close() } }
        try await Self.withCAFile(certificates) { caFile in
            let client = PNSHTTPClient(trustRootsFile: caFile, connections: 1, requestTimeout: .seconds(1))
            let provider = try Self.webPushProvider(port: server.port, client: client)
            func push(_ id: String) -> PNSDelivery { Self.push(id, port: server.port) }
            let started = ContinuousClock.now
            let first = await provider.deliverAll([push("a")])
            #expect(first.map(\.classification) == [.retry(retryAfter: nil)], "\(first)")
            // Within a few request times, not the test's time limit, which a hang would reach; the
            // suite runs beside others on two cores, where 2 s of work has taken 14 s of wall time.
            #expect(ContinuousClock.now - started < .seconds(30))
            // The connection said GOAWAY before the next push: on a loaded machine the first push's
            // request time can end before its HEADERS even reached the server.
            #expect(await eventually(timeout: .seconds(10)) { server.recorder.goAways.withLock { $0 } == 1 })
            let second = await provider.deliverAll([push("b")])
            #expect(second.map(\.classification) == [.retry(retryAfter: nil)], "\(second)")
            // The push fails at its request time whether or not the server's loop has taken the
            // new connection yet: on a loaded machine it once had not. A reused connection never
            // makes it two.
            #expect(
                await eventually(timeout: .seconds(10)) { server.recorder.connections.withLock { $0 } == 2 },
                "the connection that said GOAWAY takes no new streams")
            await client.shutdown()
        }
    }

    @Test("a push service that says GOAWAY as soon as a connection is made fails the push promptly, on a few connections", .timeLimit(.minutes(1)))
    func goAwayAtOnce() async throws {
        let certificates = try SimulatorCertificates.generate()
        let server = try await TLSTestServer.start(certificates, protocols: ["h2"]) { pipeline, _ in
            try pipeline.addHandler(NIOHTTP2Handler(mode: .server))
            try pipeline.addHandler(TLSTestServer.SayGoAway(atOnce: true))
        }
        defer { Task { try? await server.channel.close() } }
        try await Self.withCAFile(certificates) { caFile in
            let client = PNSHTTPClient(trustRootsFile: caFile, connections: 1, requestTimeout: .seconds(2))
            let provider = try Self.webPushProvider(port: server.port, client: client)
            let started = ContinuousClock.now
            let answers = await provider.deliverAll([Self.push("a", port: server.port)])
            #expect(answers.map(\.classification) == [.retry(retryAfter: nil)], "\(answers)")
            // Within a few request times, not the test's time limit, which a hang would reach; the
            // suite runs beside others on two cores, where 2 s of work has taken 14 s of wall time.
            #expect(ContinuousClock.now - started < .seconds(30))
            #expect(server.recorder.connections.withLock { $0 } <= 3, "a few connections, not one after another for ever")
            await client.shutdown()
        }
    }

    @Test("past the most origins with an HTTP/2 client of their own, pushes still go out (through async-http-client)")
    func pastTheOriginLimit() async throws {
        let sim = try await SimulatorFixture.start()
        defer { Task { await sim.stop() } }
        let client = PNSHTTPClient(trustRootsFile: sim.caFile, maximumHTTP2Origins: 0)
        let provider = try ProviderFactory.make(.wns, hubs: sim.hubs, http: client)
        let channel = SimulatedHandle.wnsChannel(base: sim.apns, id: "over-the-limit")
        let answers = await provider.deliverAll([
            PNSDelivery(hub: "myhub", notificationId: "n", handle: channel, format: .windows, body: "raw", headers: ["X-WNS-Type": "wns/raw"])
        ])
        #expect(answers.map(\.classification) == [.delivered], "\(answers)")
        #expect(try await sim.deliveries(channel).first?["payload"] as? String == "raw")
        await client.shutdown()
    }
}

/// A TLS server on loopback for these tests: ALPN offers `protocols`, `finish` completes each
/// connection's pipeline after TLS, and the recorder counts connections and keeps paths.
final class TLSTestServer: Sendable {
    final class Recorder: Sendable {
        let paths = Mutex<[String]>([])
        let connections = Mutex(0)
        /// GOAWAY frames written (`SayGoAway`).
        let goAways = Mutex(0)
    }

    let channel: any Channel
    let port: Int
    let recorder: Recorder

    private init(channel: any Channel, recorder: Recorder) {
        self.channel = channel
        port = channel.localAddress?.port ?? 0
        self.recorder = recorder
    }

    static func start(
        _ certificates: SimulatorCertificates, protocols: [String],
        finish: @escaping @Sendable (ChannelPipeline.SynchronousOperations, Recorder) throws -> Void
    ) async throws -> TLSTestServer {
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(try NIOSSLCertificate(bytes: Array(certificates.serverCertificatePEM.utf8), format: .pem))],
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(certificates.serverKeyPEM.utf8), format: .pem)))
        tls.applicationProtocols = protocols
        let context = try NIOSSLContext(configuration: tls)
        let recorder = Recorder()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                recorder.connections.withLock { $0 += 1 }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    try finish(channel.pipeline.syncOperations, recorder)
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        return TLSTestServer(channel: channel, recorder: recorder)
    }

    /// HTTP/1.1 only: every request is answered 201 Created.
    static func http1Only(_ certificates: SimulatorCertificates) async throws -> TLSTestServer {
        try await start(certificates, protocols: ["http/1.1"]) { pipeline, recorder in
            try pipeline.configureHTTPServerPipeline()
            try pipeline.addHandler(Created(recorder: recorder))
        }
    }

    /// HTTP/2 that answers every request 201 Created once its stream ends, keeping its path.
    static func http2Created(_ certificates: SimulatorCertificates) async throws -> TLSTestServer {
        try await start(certificates, protocols: ["h2"]) { pipeline, recorder in
            try pipeline.addHandler(NIOHTTP2Handler(mode: .server))
            try pipeline.addHandler(Created2(recorder: recorder))
        }
    }

    /// HTTP/1.1 only: every request is answered 200 at once, and its body of `bytes` bytes one
    /// byte every `interval`.
    static func trickling(_ certificates: SimulatorCertificates, bytes: Int, every interval: TimeAmount) async throws -> TLSTestServer {
        try await start(certificates, protocols: ["http/1.1"]) { pipeline, recorder in
            try pipeline.configureHTTPServerPipeline()
            try pipeline.addHandler(Trickle(bytes: bytes, interval: interval))
        }
    }

    /// HTTP/2 that answers every request's HEADERS with GOAWAY (keeping every stream) and never
    /// answers the request.
    static func goAway(_ certificates: SimulatorCertificates) async throws -> TLSTestServer {
        try await start(certificates, protocols: ["h2"]) { pipeline, recorder in
            try pipeline.addHandler(NIOHTTP2Handler(mode: .server))
            try pipeline.addHandler(SayGoAway(recorder: recorder))
        }
    }

    final class Created: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart

        let recorder: Recorder

        init(recorder: Recorder) { self.recorder = recorder }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head): recorder.paths.withLock { $0.append(head.uri) }
            case .body: break
            case .end:
                let head = HTTPResponseHead(version: .http1_1, status: .created, headers: ["content-length": "0", "location": "/m/1"])
                context.write(wrapOutboundOut(.head(head)), promise: nil)
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            }
        }
    }

    final class Trickle: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart

        let bytes: Int
        let interval: TimeAmount

        init(bytes: Int, interval: TimeAmount) {
            self.bytes = bytes
            self.interval = interval
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .end = unwrapInboundIn(data) else { return }
            let head = HTTPResponseHead(version: .http1_1, status: .ok, headers: ["content-length": "\(bytes)"])
            context.writeAndFlush(wrapOutboundOut(.head(head)), promise: nil)
            send(left: bytes, context: context)
        }

        private func send(left: Int, context: ChannelHandlerContext) {
            guard left > 0 else { return context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil) }
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            context.eventLoop.scheduleTask(in: interval) {
                let (handler, context) = bound.value
                guard context.channel.isActive else { return }
                context.writeAndFlush(handler.wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: "x")))), promise: nil)
                handler.send(left: left - 1, context: context)
            }
        }
    }

    /// 201 Created to each stream once the client ended it, frame by frame.
    final class Created2: ChannelInboundHandler {
        typealias InboundIn = HTTP2Frame
        typealias OutboundOut = HTTP2Frame

        let recorder: Recorder

        init(recorder: Recorder) { self.recorder = recorder }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let frame = unwrapInboundIn(data)
            let ended: Bool
            switch frame.payload {
            case .headers(let headers):
                if let path = headers.headers.first(name: ":path") { recorder.paths.withLock { $0.append(path) } }
                ended = headers.endStream
            case .data(let data): ended = data.endStream
            default: ended = false
            }
            guard ended else { return }
            let answer = HTTP2Frame.FramePayload.Headers(headers: [":status": "201", "location": "/m/1"], endStream: true)
            context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: frame.streamID, payload: .headers(answer))), promise: nil)
        }
    }

    /// GOAWAY on a request's HEADERS, keeping every stream; or `atOnce`, as soon as the
    /// connection is up, keeping none.
    final class SayGoAway: ChannelInboundHandler {
        typealias InboundIn = HTTP2Frame
        typealias OutboundOut = HTTP2Frame

        let atOnce: Bool
        let recorder: Recorder?

        init(atOnce: Bool = false, recorder: Recorder? = nil) {
            self.atOnce = atOnce
            self.recorder = recorder
        }

        func channelActive(context: ChannelHandlerContext) {
            context.fireChannelActive()
            guard atOnce else { return }
            let goAway = HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: .rootStream, errorCode: .noError, opaqueData: nil))
            context.writeAndFlush(wrapOutboundOut(goAway), promise: nil)
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard !atOnce, case .headers = unwrapInboundIn(data).payload else { return }
            let goAway = HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: .maxID, errorCode: .noError, opaqueData: nil))
            context.writeAndFlush(wrapOutboundOut(goAway)).whenSuccess { [recorder] in recorder?.goAways.withLock { $0 += 1 } }
        }
    }
}
