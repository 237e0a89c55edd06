import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import PushProviders
import Synchronization
import Testing

/// A plain HTTP/1.1 server on loopback that answers each request with its method, path and
/// body, and counts connections. `X-Close: 1` closes the connection with the answer;
/// `X-Silent: 1` never answers; `X-Big: N` answers N bytes.
final class EchoServer: Sendable {
    let channel: any Channel
    let port: Int
    let connections = Atomic(0)
    let inFlight = Atomic(0)
    let mostInFlight = Atomic(0)
    let children = Mutex<[any Channel]>([])

    /// Closes every connection the server has accepted.
    func closeConnections() async throws {
        for child in children.withLock({ $0 }) { try? await child.close() }
    }

    init() async throws {
        let box = Mutex<EchoServer?>(nil)
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .childChannelInitializer { child in
                child.eventLoop.makeCompletedFuture {
                    box.withLock { $0 }?.connections.add(1, ordering: .relaxed)
                    box.withLock { $0 }?.children.withLock { $0.append(child) }
                    try child.pipeline.syncOperations.configureHTTPServerPipeline()
                    try child.pipeline.syncOperations.addHandler(Echo(server: { box.withLock { $0 } }))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        port = channel.localAddress!.port!
        box.withLock { $0 = self }
    }

    private final class Echo: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let server: @Sendable () -> EchoServer?
        var head: HTTPRequestHead?
        var body = ByteBuffer()

        init(server: @escaping @Sendable () -> EchoServer?) { self.server = server }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head):
                self.head = head
                body.clear()
                if let server = server() {
                    let now = server.inFlight.add(1, ordering: .relaxed).newValue
                    server.mostInFlight.max(now, ordering: .relaxed)
                }
            case .body(var bytes): body.writeBuffer(&bytes)
            case .end:
                guard let head else { return }
                if head.headers["X-Silent"].first == "1" { return }
                let close = head.headers["X-Close"].first == "1"
                var answer = ByteBuffer(string: "\(head.method) \(head.uri) ")
                answer.writeBuffer(&body)
                if let big = head.headers["X-Big"].first.flatMap(Int.init) { answer = ByteBuffer(repeating: 0x61, count: big) }
                var headers = HTTPHeaders([("Content-Length", String(answer.readableBytes)), ("X-Echo", "yes")])
                if close { headers.add(name: "Connection", value: "close") }
                // A little later, so that requests overlap.
                context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(2)) { [server] in
                    server()?.inFlight.subtract(1, ordering: .relaxed)
                    context.write(self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .created, headers: headers))), promise: nil)
                    context.write(self.wrapOutboundOut(.body(.byteBuffer(answer))), promise: nil)
                    context.writeAndFlush(self.wrapOutboundOut(.end(nil))).whenComplete { _ in if close { context.close(promise: nil) } }
                }
            }
        }
    }
}

@Suite("PushHub's plain HTTP/1.1 client", .timeLimit(.minutes(1)))
struct HTTP1ClientTests {
    @Test("requests and answers whole, one at a time on each keep-alive connection, never more connections than allowed")
    func keepAlive() async throws {
        let server = try await EchoServer()
        let client = HTTP1Client(host: "127.0.0.1", port: server.port, connections: 4)
        let answers = try await withThrowingTaskGroup(of: PNSResponse.self) { group in
            // Enough rounds to reuse each connection many times; each answer waits for a turn on
            // the concurrency pool before the next request goes, so on two busy cores hundreds
            // of rounds took longer than the suite's limit.
            for index in 0..<60 {
                group.addTask {
                    try await client.send(
                        .PUT, path: "/hub/items/\(index)?v=1", headers: [("Content-Type", "text/plain")], body: Data("body \(index)".utf8))
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(answers.count == 60)
        #expect(answers.allSatisfy { $0.status == 201 && $0.headers.first(name: "x-echo") == "yes" })
        #expect(Set(answers.map { String(decoding: $0.body, as: UTF8.self) }) == Set((0..<60).map { "PUT /hub/items/\($0)?v=1 body \($0)" }))
        #expect(server.connections.load(ordering: .relaxed) == 4, "4 connections, each reused")
        #expect(server.mostInFlight.load(ordering: .relaxed) <= 4)
        let get = try await client.send(.GET, path: "/x", headers: [], body: nil)
        #expect(String(decoding: get.body, as: UTF8.self) == "GET /x ")
        await client.shutdown()
        try await server.channel.close()
    }

    @Test("one connection and many callers, some of whose answers close it: every caller is answered, none waits for ever")
    func manyCallersOneConnection() async throws {
        let server = try await EchoServer()
        let client = HTTP1Client(host: "127.0.0.1", port: server.port, connections: 1)
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<90 {
                group.addTask {
                    try await client.send(.GET, path: "/\(index)", headers: index % 3 == 0 ? [("X-Close", "1")] : [], body: nil).status
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(statuses.count == 90 && statuses.allSatisfy { $0 == 201 })
        #expect(server.mostInFlight.load(ordering: .relaxed) == 1)
        await client.shutdown()
        try await server.channel.close()
    }

    @Test("a connection the server closes is not used again; the next request opens another")
    func serverCloses() async throws {
        let server = try await EchoServer()
        let client = HTTP1Client(host: "127.0.0.1", port: server.port, connections: 1)
        for index in 0..<3 {
            let answer = try await client.send(.POST, path: "/\(index)", headers: [("X-Close", "1")], body: Data())
            #expect(answer.status == 201)
        }
        #expect(try await client.send(.POST, path: "/last", headers: [], body: nil).status == 201)
        #expect(server.connections.load(ordering: .relaxed) == 4)
        // A kept connection the server then closes, between requests.
        let close = try await client.send(.POST, path: "/idle", headers: [], body: nil)
        #expect(close.status == 201)
        try await server.closeConnections()
        try await Task.sleep(for: .milliseconds(50))
        #expect(try await client.send(.POST, path: "/again", headers: [], body: nil).status == 201)
        await client.shutdown()
        try await server.channel.close()
    }

    @Test("no answer within the time-out, an answer past the size limit, and nobody listening are errors, and the client goes on")
    func failures() async throws {
        let server = try await EchoServer()
        let client = HTTP1Client(host: "127.0.0.1", port: server.port, connections: 2, requestTimeout: .milliseconds(300))
        let started = ContinuousClock.now
        await #expect(throws: HTTP1Client.Failure.self) { try await client.send(.GET, path: "/", headers: [("X-Silent", "1")], body: nil) }
        // Well within the suite's time limit, which a request without a time-out would reach;
        // the suite runs beside others on two cores.
        #expect(ContinuousClock.now - started < .seconds(30))
        await #expect(throws: HTTP1Client.Failure.self) {
            try await client.send(.GET, path: "/", headers: [("X-Big", String(HTTP1Client.maximumBody + 1))], body: nil)
        }
        #expect(try await client.send(.GET, path: "/after", headers: [], body: nil).status == 201)
        await client.shutdown()
        await #expect(throws: HTTP1Client.Failure.self) { try await client.send(.GET, path: "/", headers: [], body: nil) }
        let port = server.port
        try await server.channel.close()
        let nobody = HTTP1Client(host: "127.0.0.1", port: port, connections: 1)
        await #expect(throws: HTTP1Client.Failure.self) { try await nobody.send(.GET, path: "/", headers: [], body: nil) }
        await nobody.shutdown()
    }
}
