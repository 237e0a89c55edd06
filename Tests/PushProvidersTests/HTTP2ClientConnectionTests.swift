import Foundation
import NIOCore
import NIOEmbedded
import NIOHPACK
import PushTestSupport
import Synchronization
import Testing

@testable import PushProviders

/// The client side of HTTP/2 driven byte by byte: what it writes is read as a server reads it
/// (frames, and header blocks through NIOHPACK's decoder), and what a server would answer,
/// well-formed or hostile, is written to it.
@Suite("HTTP/2 client connection: frames written and read, windows, limits, hostile answers", .timeLimit(.minutes(2)))
struct HTTP2ClientConnectionTests {
    typealias C = HTTP2ClientConnection

    /// The requests whose answers are in, by index.
    final class Answered: Sendable {
        let indexes = Mutex<Set<Int>>([])
        var all: Set<Int> { indexes.withLock { $0 } }
    }

    struct Frame {
        var type: UInt8
        var flags: UInt8
        var stream: UInt32
        var payload: ByteBuffer
    }

    /// A connection on an embedded channel, what it wrote as a server reads it, and requests.
    final class Harness {
        let channel: EmbeddedChannel
        let draining = HTTP2Client.Draining()
        let answered = Answered()
        var sinks: [Int: ResponseSink] = [:]
        private var written = ByteBuffer()
        private var decoder = HPACKDecoder(allocator: ByteBufferAllocator(), maxDynamicTableSize: 4096, maxHeaderListSize: 1 << 20)
        private var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var prefaceRead = false

        init(timeout: TimeAmount = .seconds(10)) throws {
            channel = EmbeddedChannel(handler: C(authority: "pns.example", timeout: timeout, draining: draining))
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        }

        /// Requests `indexes`, each with its own sink, written together.
        func request(
            _ indexes: [Int], body: String = #"{"aps":{}}"#, headers: PNSHeaderFields = [("apns-topic", "app")], stop: SendingStop? = nil
        ) {
            var requests: [StreamRequest] = []
            for index in indexes {
                let sink = ResponseSink(count: 1, stop: stop) { [answered] _ in answered.indexes.withLock { _ = $0.insert(index) } }
                sinks[index] = sink
                requests.append(StreamRequest(path: "/3/device/\(index)", headers: headers, body: ByteBuffer(string: body), sink: sink, index: 0))
            }
            channel.write(StreamRequests(requests: requests), promise: nil)
            channel.embeddedEventLoop.run()
        }

        /// The frames written since the last call (the preface's magic checked and skipped).
        func frames() throws -> [Frame] {
            while var buffer = try channel.readOutbound(as: ByteBuffer.self) { written.writeBuffer(&buffer) }
            if !prefaceRead {
                guard written.readString(length: 24) == "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" else { throw Failure("no preface") }
                prefaceRead = true
            }
            var frames: [Frame] = []
            while written.readableBytes >= 9 {
                let length =
                    Int(written.getInteger(at: written.readerIndex, as: UInt8.self)!) << 16
                    | Int(written.getInteger(at: written.readerIndex + 1, as: UInt16.self)!)
                guard written.readableBytes >= 9 + length else { break }
                written.moveReaderIndex(forwardBy: 3)
                let type = written.readInteger(as: UInt8.self)!
                let flags = written.readInteger(as: UInt8.self)!
                let stream = written.readInteger(as: UInt32.self)!
                frames.append(Frame(type: type, flags: flags, stream: stream, payload: written.readSlice(length: length)!))
            }
            written.discardReadBytes()
            return frames
        }

        /// A request's header block as the server reads it.
        func fields(_ frame: Frame) throws -> [(String, String)] {
            var block = frame.payload
            return try decoder.decodeHeaders(from: &block).map { ($0.name, $0.value) }
        }

        /// What the server writes.
        func receive(_ bytes: ByteBuffer) throws {
            try channel.writeInbound(bytes)
            channel.pipeline.fireChannelReadComplete()
            channel.embeddedEventLoop.run()
        }

        func frame(_ type: UInt8, flags: UInt8 = 0, stream: UInt32, _ payload: ByteBuffer = ByteBuffer()) -> ByteBuffer {
            var out = ByteBuffer()
            C.frameHeader(length: payload.readableBytes, type: type, flags: flags, stream: stream, into: &out)
            var payload = payload
            out.writeBuffer(&payload)
            return out
        }

        /// A header block, encoded with indexing (the server's table grows as a PNS's would).
        func block(_ fields: [(String, String)]) throws -> ByteBuffer {
            var out = ByteBuffer()
            try encoder.encode(headers: HPACKHeaders(fields), to: &out)
            return out
        }

        func answer(_ stream: UInt32, status: Int = 200, body: String? = nil) throws -> ByteBuffer {
            var out = frame(
                C.Frame.headers, flags: C.Frame.endHeaders | (body == nil ? C.Frame.endStream : 0), stream: stream,
                try block([(":status", String(status)), ("apns-id", "id-\(stream)")]))
            if let body {
                var data = frame(C.Frame.data, flags: C.Frame.endStream, stream: stream, ByteBuffer(string: body))
                out.writeBuffer(&data)
            }
            return out
        }

        func settings(_ pairs: [(UInt16, UInt32)]) -> ByteBuffer {
            var payload = ByteBuffer()
            for (parameter, value) in pairs {
                payload.writeInteger(parameter)
                payload.writeInteger(value)
                // The server's decoder keeps no more than it says (a client that announced
                // more would fail its blocks).
                if parameter == 0x1 { decoder.maxDynamicTableLength = Int(value) }
            }
            return frame(C.Frame.settings, stream: 0, payload)
        }

        func result(_ index: Int) async -> Result<PNSResponse, any Error> { await sinks[index]!.answers()[0].result }
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    static func integer(_ value: UInt32) -> ByteBuffer {
        var out = ByteBuffer()
        out.writeInteger(value)
        return out
    }

    @Test("the preface, then each request a stream of HEADERS and DATA; answers, with the server's HPACK table, complete them")
    func requestsAndAnswers() async throws {
        let harness = try Harness()
        let opening = try harness.frames()
        // SETTINGS (push off, 1 MiB a stream, 16 KiB header lists), then the connection's window opened.
        #expect(opening.map(\.type) == [C.Frame.settings, C.Frame.windowUpdate])
        var settings = opening[0].payload
        var pairs: [UInt16: UInt32] = [:]
        while let parameter = settings.readInteger(as: UInt16.self), let value = settings.readInteger(as: UInt32.self) { pairs[parameter] = value }
        #expect(pairs == [0x2: 0, 0x4: 1 << 20, 0x6: 16 * 1024])
        try harness.receive(harness.settings([(0x3, 100)]))
        let acknowledged = try harness.frames()
        #expect(acknowledged.map(\.type) == [C.Frame.settings] && acknowledged.map(\.flags) == [C.Frame.ack])

        harness.request([0, 1, 2], headers: [("apns-topic", "app"), ("Apns-Push-Type", "alert"), ("authorization", "bearer x")])
        let frames = try harness.frames()
        #expect(frames.map(\.type) == [1, 0, 1, 0, 1, 0])
        #expect(frames.map(\.stream) == [1, 1, 3, 3, 5, 5])
        for (index, headers) in frames.enumerated() where headers.type == C.Frame.headers {
            #expect(headers.flags == C.Frame.endHeaders)
            let fields = try harness.fields(headers)
            #expect(fields.map(\.0) == [":method", ":scheme", ":authority", ":path", "apns-topic", "apns-push-type", "authorization"])
            #expect(fields.map(\.1) == ["POST", "https", "pns.example", "/3/device/\(index / 2)", "app", "alert", "bearer x"])
            let data = frames[index + 1]
            #expect(data.flags == C.Frame.endStream && String(buffer: data.payload) == #"{"aps":{}}"#)
        }
        // Answers out of order; the second and third through the server's table (indexed fields).
        var answers = try harness.answer(3, status: 410, body: #"{"reason":"Unregistered"}"#)
        var more = try harness.answer(1)
        answers.writeBuffer(&more)
        more = try harness.answer(5)
        answers.writeBuffer(&more)
        try harness.receive(answers)
        let first = try await harness.result(0).get()
        #expect(first.status == 200 && first.headers.first(name: "apns-id") == "id-1" && first.body.isEmpty)
        let gone = try await harness.result(1).get()
        #expect(gone.status == 410 && String(decoding: gone.body, as: UTF8.self) == #"{"reason":"Unregistered"}"#)
        #expect(try await harness.result(2).get().headers.first(name: "apns-id") == "id-5")
        #expect(harness.channel.isActive && !harness.draining.isSet)
    }

    @Test("the answers of one read reach their sink in one call, its slots freed together; a later read's in another")
    func answersTogether() async throws {
        let harness = try Harness()
        _ = try harness.frames()
        final class Calls: Sendable { let counts = Mutex<[Int]>([]) }
        let calls = Calls()
        let sink = ResponseSink(count: 4) { count in calls.counts.withLock { $0.append(count) } }
        let requests = (0..<4).map {
            StreamRequest(path: "/3/device/\($0)", headers: [("apns-topic", "app")], body: ByteBuffer(string: "{}"), sink: sink, index: $0)
        }
        harness.channel.write(StreamRequests(requests: requests), promise: nil)
        harness.channel.embeddedEventLoop.run()
        #expect(try harness.frames().filter { $0.type == C.Frame.headers }.map(\.stream) == [1, 3, 5, 7])
        // Three answers in one read, out of order; the fourth in the next. Each its own status,
        // so an answer given to another index shows.
        var answers = try harness.answer(5, status: 202)
        for (stream, status): (UInt32, Int) in [(1, 200), (7, 410)] {
            var more = try harness.answer(stream, status: status)
            answers.writeBuffer(&more)
        }
        try harness.receive(answers)
        #expect(calls.counts.withLock { $0 } == [3])
        try harness.receive(try harness.answer(3, status: 201))
        #expect(calls.counts.withLock { $0 } == [3, 1])
        let all = await sink.answers()
        #expect(try all.map { try $0.result.get().status } == [200, 201, 202, 410])
    }

    @Test("a header block larger than the server's frames goes in HEADERS and CONTINUATION frames; the next request's fields are its own")
    func longHeaderBlock() async throws {
        let harness = try Harness()
        _ = try harness.frames()
        let long = String(repeating: "t", count: 40_000)
        harness.request([0], headers: [("authorization", "bearer " + long)])
        harness.request([1], headers: [("apns-topic", "other")])
        let frames = try harness.frames()
        #expect(frames.map(\.type) == [C.Frame.headers, C.Frame.continuation, C.Frame.continuation, C.Frame.data, C.Frame.headers, C.Frame.data])
        #expect(frames.map(\.flags) == [0, 0, C.Frame.endHeaders, C.Frame.endStream, C.Frame.endHeaders, C.Frame.endStream])
        #expect(frames.prefix(3).allSatisfy { $0.payload.readableBytes <= 16_384 && $0.stream == 1 })
        var block = frames[0].payload
        var rest = frames[1].payload
        block.writeBuffer(&rest)
        rest = frames[2].payload
        block.writeBuffer(&rest)
        let fields = try harness.fields(Frame(type: C.Frame.headers, flags: C.Frame.endHeaders, stream: 1, payload: block))
        #expect(fields.last?.0 == "authorization" && fields.last?.1 == "bearer " + long)
        #expect(try harness.fields(frames[4]).last.map { [$0.0, $0.1] } == ["apns-topic", "other"])
    }

    @Test("past the server's concurrent streams, requests wait and open as streams end, in order")
    func concurrentStreams() async throws {
        let harness = try Harness()
        _ = try harness.frames()
        try harness.receive(harness.settings([(0x3, 1)]))
        _ = try harness.frames()
        harness.request([0, 1, 2])
        #expect(try harness.frames().filter { $0.type == C.Frame.headers }.map(\.stream) == [1])
        try harness.receive(try harness.answer(1))
        #expect(try harness.frames().filter { $0.type == C.Frame.headers }.map(\.stream) == [3])
        #expect(harness.answered.all == [0])
        // The server allows two now: the last request opens at once.
        try harness.receive(harness.settings([(0x3, 2)]))
        #expect(try harness.frames().filter { $0.type == C.Frame.headers }.map(\.stream) == [5])
        var both = try harness.answer(5)
        var other = try harness.answer(3)
        both.writeBuffer(&other)
        try harness.receive(both)
        #expect(harness.answered.all == [0, 1, 2])
        #expect(try await harness.result(2).get().status == 200)
    }

    @Test("requests whose sender stopped while they waited for a stream are never opened: not sent, when their turn or their deadline comes")
    func stoppedWhileWaiting() async throws {
        for byDeadline in [false, true] {
            let harness = try Harness(timeout: .seconds(4))
            _ = try harness.frames()
            try harness.receive(harness.settings([(0x3, 1)]))
            _ = try harness.frames()
            let stop = SendingStop()
            harness.request([0, 1, 2], stop: stop)
            #expect(try harness.frames().filter { $0.type == C.Frame.headers }.map(\.stream) == [1])
            stop.stop()
            if byDeadline {
                harness.channel.embeddedEventLoop.advanceTime(by: .seconds(5))
            } else {
                try harness.receive(try harness.answer(1))
                #expect(try await harness.result(0).get().status == 200, "the one on the wire is answered")
            }
            #expect(try harness.frames().filter { $0.type == C.Frame.headers }.isEmpty, "nothing more opened")
            #expect(harness.answered.all == [0, 1, 2])
            for index in [1, 2] {
                if case .failure(let error) = await harness.result(index) {
                    #expect(error is SendingStop.NotSent, "\(error)")
                } else {
                    Issue.record("request \(index) was answered")
                }
            }
        }
    }

    @Test("a body waits for the stream's window and for the connection's, and goes on as they open")
    func windows() async throws {
        let harness = try Harness()
        _ = try harness.frames()
        try harness.receive(harness.settings([(0x4, 10)]))
        _ = try harness.frames()
        harness.request([0], body: String(repeating: "a", count: 25))
        var frames = try harness.frames()
        #expect(frames.map(\.type) == [C.Frame.headers, C.Frame.data])
        #expect(frames[1].payload.readableBytes == 10 && frames[1].flags == 0)
        try harness.receive(harness.frame(C.Frame.windowUpdate, stream: 1, Self.integer(10)))
        frames = try harness.frames()
        #expect(frames.map(\.payload.readableBytes) == [10] && frames[0].flags == 0)
        // A larger window for every stream (SETTINGS) lets the rest go, and ends the stream.
        try harness.receive(harness.settings([(0x4, 100)]))
        frames = try harness.frames()
        #expect(frames.map(\.type) == [C.Frame.settings, C.Frame.data])
        #expect(frames[1].payload.readableBytes == 5 && frames[1].flags == C.Frame.endStream)

        // The connection's window: 65,535 bytes at the start, for three bodies of 30,000.
        let other = try Harness()
        _ = try other.frames()
        other.request(Array(0..<3), body: String(repeating: "b", count: 30_000))
        frames = try other.frames().filter { $0.type == C.Frame.data }
        #expect(frames.map(\.payload.readableBytes).reduce(0, +) == 65_535)
        #expect(frames.last?.flags == 0)
        try other.receive(other.frame(C.Frame.windowUpdate, stream: 0, Self.integer(100_000)))
        frames = try other.frames().filter { $0.type == C.Frame.data }
        #expect(frames.map(\.payload.readableBytes).reduce(0, +) == 90_000 - 65_535)
        #expect(frames.last?.flags == C.Frame.endStream && frames.last?.stream == 5)
    }

    @Test(
        "a connection's window opened a byte at a time goes to the first body held back until it is sent, then the next; a header block in 64 frames is read"
    )
    func windowByTheByte() async throws {
        let harness = try Harness()
        _ = try harness.frames()
        // Streams' windows of 1 MiB: the first body takes the connection's 65,535 bytes, and
        // the other two wait whole.
        try harness.receive(harness.settings([(0x4, 1 << 20)]))
        _ = try harness.frames()
        harness.request(Array(0..<3), body: String(repeating: "c", count: 65_537))
        var frames = try harness.frames().filter { $0.type == C.Frame.data }
        #expect(frames.map(\.payload.readableBytes).reduce(0, +) == 65_535 && Set(frames.map(\.stream)) == [1])
        var streams: [UInt32] = []
        for _ in 0..<4 {
            try harness.receive(harness.frame(C.Frame.windowUpdate, stream: 0, Self.integer(1)))
            frames = try harness.frames().filter { $0.type == C.Frame.data }
            #expect(frames.map(\.payload.readableBytes) == [1])
            streams += frames.map(\.stream)
        }
        // Stream 1's last two bytes, the second ending it; then stream 3's first two.
        #expect(streams == [1, 1, 3, 3])
        // Sixty-four frames of one block are within bounds.
        var block = harness.frame(C.Frame.headers, stream: 1, ByteBuffer(bytes: [0x88]))
        for index in 1..<C.maximumHeaderFrames {
            var more = harness.frame(C.Frame.continuation, flags: index == C.maximumHeaderFrames - 1 ? C.Frame.endHeaders : 0, stream: 1)
            block.writeBuffer(&more)
        }
        try harness.receive(block)
        #expect(harness.channel.isActive)
    }

    @Test("a body both windows hold goes on once both open, whichever opens first")
    func bothWindows() async throws {
        let harness = try Harness()
        _ = try harness.frames()
        // 65,535 bytes go: the stream's window and the connection's are both spent.
        harness.request([0], body: String(repeating: "d", count: 70_000))
        var sent = try harness.frames().filter { $0.type == C.Frame.data }.map(\.payload.readableBytes).reduce(0, +)
        #expect(sent == 65_535)
        func data(after bytes: ByteBuffer) throws -> [Int] {
            try harness.receive(bytes)
            return try harness.frames().filter { $0.type == C.Frame.data }.map(\.payload.readableBytes)
        }
        // The stream's own window first: it waits for the connection's, which then lets 5 go.
        #expect(try data(after: harness.frame(C.Frame.windowUpdate, stream: 1, Self.integer(10))) == [])
        #expect(try data(after: harness.frame(C.Frame.windowUpdate, stream: 0, Self.integer(5))) == [5])
        // The connection's first: the stream's last 5 go, then it waits for its own.
        #expect(try data(after: harness.frame(C.Frame.windowUpdate, stream: 0, Self.integer(100))) == [5])
        #expect(try data(after: harness.frame(C.Frame.windowUpdate, stream: 1, Self.integer(10_000))) == [95])
        sent += 105
        // Both open: the rest, ending the stream.
        try harness.receive(harness.frame(C.Frame.windowUpdate, stream: 0, Self.integer(10_000)))
        let last = try harness.frames().filter { $0.type == C.Frame.data }
        #expect(last.map(\.payload.readableBytes) == [70_000 - sent] && last.last?.flags == C.Frame.endStream)
    }

    @Test("CONTINUATION, padding, PING, informational answers and trailers are read as HTTP/2 has them")
    func framesOfAnswers() async throws {
        let harness = try Harness()
        _ = try harness.frames()
        harness.request([0, 1])
        _ = try harness.frames()
        // A PING is answered with its payload.
        try harness.receive(harness.frame(C.Frame.ping, stream: 0, ByteBuffer(string: "12345678")))
        let pong = try harness.frames()
        #expect(pong.map(\.type) == [C.Frame.ping] && pong[0].flags == C.Frame.ack && String(buffer: pong[0].payload) == "12345678")
        // 100 first; then the answer's header block in three frames; a padded body; trailers.
        var bytes = harness.frame(C.Frame.headers, flags: C.Frame.endHeaders, stream: 1, try harness.block([(":status", "100")]))
        var block = try harness.block([(":status", "200"), ("apns-id", "x"), ("long", String(repeating: "v", count: 100))])
        let head = block.readSlice(length: 10)!
        let middle = block.readSlice(length: 10)!
        var frames = [
            harness.frame(C.Frame.headers, stream: 1, head), harness.frame(C.Frame.continuation, stream: 1, middle),
            harness.frame(C.Frame.continuation, flags: C.Frame.endHeaders, stream: 1, block),
        ]
        var padded = ByteBuffer()
        padded.writeInteger(UInt8(4))
        padded.writeString("body")
        padded.writeString("\0\0\0\0")
        frames.append(harness.frame(C.Frame.data, flags: C.Frame.padded, stream: 1, padded))
        frames.append(
            harness.frame(C.Frame.headers, flags: C.Frame.endHeaders | C.Frame.endStream, stream: 1, try harness.block([("trailer", "t")])))
        for var frame in frames { bytes.writeBuffer(&frame) }
        try harness.receive(bytes)
        let answer = try await harness.result(0).get()
        #expect(answer.status == 200 && String(decoding: answer.body, as: UTF8.self) == "body")
        #expect(answer.headers.first(name: "long")?.count == 100 && answer.headers.first(name: "trailer") == "t")
        #expect(harness.answered.all == [0])
    }

    @Test("GOAWAY fails the streams past its last and those waiting; RST_STREAM fails its stream; the rest still complete")
    func goAwayAndReset() async throws {
        let harness = try Harness()
        _ = try harness.frames()
        try harness.receive(harness.settings([(0x3, 3)]))
        harness.request([0, 1, 2, 3])
        _ = try harness.frames()
        try harness.receive(harness.frame(C.Frame.rstStream, stream: 3, Self.integer(0x7)))
        await #expect(throws: HTTP2Client.Failure.self) { try await harness.result(1).get() }
        if case .failure(let error) = await harness.result(1) { #expect("\(error)".contains("REFUSED_STREAM")) }
        var goAway = ByteBuffer()
        goAway.writeInteger(UInt32(1))
        goAway.writeInteger(UInt32(0))
        try harness.receive(harness.frame(C.Frame.goAway, stream: 0, goAway))
        #expect(harness.draining.isSet)
        // Streams 5 and 7 (request 3's, opened when stream 3 ended) are past the last the server kept.
        await #expect(throws: HTTP2Client.Failure.self) { try await harness.result(2).get() }
        await #expect(throws: HTTP2Client.Failure.self) { try await harness.result(3).get() }
        #expect(harness.answered.all == [1, 2, 3] && harness.channel.isActive)
        // Stream 1 is answered, and then the connection closes.
        try harness.receive(try harness.answer(1))
        #expect(try await harness.result(0).get().status == 200)
        #expect(!harness.channel.isActive)
    }

    @Test("a stream past its deadline fails and is cancelled; a request still waiting for a stream fails too")
    func deadlines() async throws {
        let harness = try Harness(timeout: .seconds(4))
        _ = try harness.frames()
        try harness.receive(harness.settings([(0x3, 1)]))
        harness.request([0, 1])
        _ = try harness.frames()
        harness.channel.embeddedEventLoop.advanceTime(by: .seconds(5))
        let reset = try harness.frames().filter { $0.type == C.Frame.rstStream }
        #expect(reset.map(\.stream) == [1])
        #expect(harness.answered.all == [0, 1])
        for index in [0, 1] {
            if case .failure(let error) = await harness.result(index) {
                #expect("\(error)".contains("no answer within"))
            } else {
                Issue.record("request \(index) was answered")
            }
        }
        // A late answer of the cancelled stream is dropped, but its header block is read: the
        // next answer refers to a field it put in the server's table.
        try harness.receive(
            harness.frame(
                C.Frame.headers, flags: C.Frame.endHeaders | C.Frame.endStream, stream: 1,
                try harness.block([(":status", "200"), ("x-shared", "v1")])))
        #expect(harness.channel.isActive)
        harness.request([2])
        #expect(try harness.frames().first?.stream == 3)
        var indexed = try harness.block([(":status", "200"), ("x-shared", "v1")])
        #expect(indexed.readableBytes <= 3, "the field is a reference to the server's table")
        try harness.receive(harness.frame(C.Frame.headers, flags: C.Frame.endHeaders | C.Frame.endStream, stream: 3, indexed))
        #expect(try await harness.result(2).get().headers.first(name: "x-shared") == "v1")
    }

    @Test("a second header block that does not end the stream fails it; trailers end it, and their :status is not the answer's")
    func headerBlocksOfAStream() async throws {
        let harness = try Harness()
        _ = try harness.frames()
        harness.request([0, 1])
        _ = try harness.frames()
        var bytes = harness.frame(C.Frame.headers, flags: C.Frame.endHeaders, stream: 1, try harness.block([(":status", "200"), ("a", "1")]))
        var again = harness.frame(C.Frame.headers, flags: C.Frame.endHeaders, stream: 1, try harness.block([("b", "2")]))
        bytes.writeBuffer(&again)
        var other = harness.frame(C.Frame.headers, flags: C.Frame.endHeaders, stream: 3, try harness.block([(":status", "200")]))
        bytes.writeBuffer(&other)
        var trailers = harness.frame(
            C.Frame.headers, flags: C.Frame.endHeaders | C.Frame.endStream, stream: 3, try harness.block([(":status", "500"), ("t", "x")]))
        bytes.writeBuffer(&trailers)
        try harness.receive(bytes)
        if case .failure(let error) = await harness.result(0) {
            #expect("\(error)".contains("second header block"))
        } else {
            Issue.record("answered")
        }
        #expect(try harness.frames().contains { $0.type == C.Frame.rstStream && $0.stream == 1 })
        let answer = try await harness.result(1).get()
        #expect(answer.status == 200 && answer.headers.first(name: "t") == "x")
        // A status that is not three digits is no answer.
        harness.request([2])
        _ = try harness.frames()
        try harness.receive(
            harness.frame(C.Frame.headers, flags: C.Frame.endHeaders | C.Frame.endStream, stream: 5, try harness.block([(":status", "+20")])))
        await #expect(throws: HTTP2Client.Failure.self) { try await harness.result(2).get() }
    }

    @Test("answered before its body went, a stream is reset with NO_ERROR, and a held-back body of a failed stream is never sent")
    func earlyAnswers() async throws {
        let harness = try Harness()
        _ = try harness.frames()
        try harness.receive(harness.settings([(0x4, 5)]))
        _ = try harness.frames()
        harness.request([0, 1], body: String(repeating: "c", count: 20))
        #expect(try harness.frames().filter { $0.type == C.Frame.data }.map(\.payload.readableBytes) == [5, 5])
        try harness.receive(try harness.answer(1, status: 400))
        let reset = try harness.frames().filter { $0.type == C.Frame.rstStream }
        #expect(reset.map(\.stream) == [1] && reset.first.map { $0.payload.getInteger(at: $0.payload.readerIndex, as: UInt32.self) } == 0)
        #expect(try await harness.result(0).get().status == 400)
        // Stream 3 is reset by the server; a window for every stream then sends nothing of it,
        // and the rest of stream 5's body, held back beside it, goes.
        harness.request([2], body: String(repeating: "d", count: 20))
        #expect(try harness.frames().filter { $0.type == C.Frame.data }.map(\.stream) == [5])
        try harness.receive(harness.frame(C.Frame.rstStream, stream: 3, Self.integer(0x8)))
        try harness.receive(harness.settings([(0x4, 1000)]))
        let data = try harness.frames().filter { $0.type == C.Frame.data }
        #expect(data.map(\.stream) == [5] && data.map(\.payload.readableBytes) == [15] && data.first?.flags == C.Frame.endStream)
        #expect(harness.answered.all == [0, 1])
        // Stream 5's own window: its next body is held back, then let go by its WINDOW_UPDATE.
        try harness.receive(harness.settings([(0x4, 3)]))
        harness.request([3], body: "0123456789")
        #expect(try harness.frames().filter { $0.type == C.Frame.data }.map(\.payload.readableBytes) == [3])
        try harness.receive(harness.frame(C.Frame.windowUpdate, stream: 7, Self.integer(100)))
        let rest = try harness.frames().filter { $0.type == C.Frame.data }
        #expect(rest.map(\.stream) == [7] && rest.map(\.payload.readableBytes) == [7] && rest.first?.flags == C.Frame.endStream)
    }

    @Test(
        "the table: empty until the server's SETTINGS, then 4,096 (or what it says, emptied first); a batch's fields are added by its second request and indexed from its third; a request's own fields are not"
    )
    func tableSizeUpdates() async throws {
        let harness = try Harness()
        _ = try harness.frames()
        func blocks() throws -> [ByteBuffer] { try harness.frames().filter { $0.type == C.Frame.headers }.map(\.payload) }
        func fields(_ block: ByteBuffer) throws -> [(String, String)] {
            try harness.fields(Frame(type: C.Frame.headers, flags: 0, stream: 0, payload: block))
        }
        func first(_ block: ByteBuffer, _ count: Int) -> [UInt8] { block.getBytes(at: block.readerIndex, length: count)! }
        let token = "bearer " + String(repeating: "j", count: 180)
        let batch: PNSHeaderFields = [("apns-topic", "app"), ("authorization", token)]
        // Before the server's SETTINGS: the table is set to 0 and nothing is added.
        harness.request([0, 1, 2], headers: batch)
        var sent = try blocks()
        #expect(sent.map { first($0, 2) } == [[0x20, 0x83], [0x83, 0x87], [0x83, 0x87]])
        #expect(sent.allSatisfy { !$0.readableBytesView.contains(0x40) }, "nothing added")
        // SETTINGS without a table size: the next block empties the table and sets 4,096.
        try harness.receive(harness.settings([(0x3, 100)]))
        _ = try harness.frames()
        harness.request([3, 4, 5, 6], headers: batch)
        sent = try blocks()
        #expect(first(sent[0], 5) == [0x20, 0x3F, 0xE1, 0x1F, 0x83])
        for (offset, block) in sent.enumerated() {
            let fields = try fields(block)
            #expect(fields.map(\.1) == ["POST", "https", "pns.example", "/3/device/\(offset + 3)", "app", token])
        }
        // The batch's array was seen before: the first block after the SETTINGS adds its fields
        // (and :authority), the rest index them, a few bytes beside the path.
        #expect(sent[0].readableBytes > token.utf8.count, "\(sent.map(\.readableBytes))")
        #expect(sent.dropFirst().allSatisfy { $0.readableBytes < 30 }, "\(sent.map(\.readableBytes))")
        // A new batch's array: literals in its first request, added by its second.
        let other: PNSHeaderFields = [("apns-topic", "other"), ("authorization", token + "2")]
        harness.request([90, 91, 92], headers: other)
        sent = try blocks()
        #expect(sent[0].readableBytes > token.utf8.count && !sent[0].readableBytesView.contains(0x40))
        #expect(
            sent[1].readableBytes > token.utf8.count && sent[2].readableBytes < 30,
            "\(sent.map(\.readableBytes)) \(sent.map { Array($0.readableBytesView.prefix(12)) })")
        // A request's own fields (an array not seen before) stay literals, and push nothing out.
        for index in 7..<10 { harness.request([index], headers: [("apns-topic", "app"), ("apns-id", "id-\(index)")]) }
        sent = try blocks()
        #expect(sent.allSatisfy { !$0.readableBytesView.contains(0x40) })
        harness.request([10, 11], headers: batch)
        sent = try blocks()
        // The batch again: its first request after others' is literals (a request that is not
        // a batch's looks nothing up); its next finds its fields still in the table.
        #expect(sent[0].readableBytes > token.utf8.count && sent[1].readableBytes < 30, "\(sent.map(\.readableBytes))")
        // Settings sent again with the same table size change nothing.
        try harness.receive(harness.settings([(0x1, 4096), (0x3, 100)]))
        _ = try harness.frames()
        harness.request([20, 21], headers: batch)
        sent = try blocks()
        #expect(sent.map(\.readableBytes).allSatisfy { $0 < 30 } && sent.allSatisfy { first($0, 1) == [0x83] })
        // The server's SETTINGS_HEADER_TABLE_SIZE: emptied, then its size; a field larger than
        // half of it stays a literal.
        try harness.receive(harness.settings([(0x1, 200)]))
        _ = try harness.frames()
        harness.request([12, 13, 14], headers: batch)
        sent = try blocks()
        #expect(first(sent[0], 4) == [0x20, 0x3F, 0xA9, 0x01])
        #expect(sent[2].readableBytes > token.utf8.count, "the token does not fit in half of 200")
        for (offset, block) in sent.enumerated() {
            let fields = try fields(block)
            #expect(fields.map(\.1).suffix(3) == ["/3/device/\(offset + 12)", "app", token])
        }
        try harness.receive(harness.settings([(0x1, 0)]))
        _ = try harness.frames()
        harness.request([15, 16, 17], headers: batch)
        sent = try blocks()
        #expect(sent.map { first($0, 2) } == [[0x20, 0x83], [0x83, 0x87], [0x83, 0x87]])
        #expect(sent.allSatisfy { !$0.readableBytesView.contains(0x40) })
    }

    @Test(
        "batches of random fields, many more than the table holds, with its size changed now and then: the server's decoder reads every field as sent"
    )
    func tableEvictions() async throws {
        let harness = try Harness()
        _ = try harness.frames()
        try harness.receive(harness.settings([(0x3, 1000)]))
        _ = try harness.frames()
        var random = SeededGenerator(seed: 7)
        var next = 0
        // Requests whose block is shorter than their values: the table had their fields.
        var indexed = 0
        for round in 0..<300 {
            if round % 50 == 49 {
                try harness.receive(harness.settings([(0x1, [0, 300, 1000, 4096, 65536][Int.random(in: 0..<5, using: &random)])]))
                _ = try harness.frames()
            }
            let batch = PNSHeaderFields(
                (0..<Int.random(in: 1...6, using: &random)).map { _ in
                    ("x-\(Int.random(in: 0..<20, using: &random))", String(repeating: "v", count: Int.random(in: 0...400, using: &random)))
                })
            let indexes = Array(next..<next + Int.random(in: 1...5, using: &random))
            next += indexes.count
            harness.request(indexes, headers: batch)
            let sent = try harness.frames().filter { $0.type == C.Frame.headers }
            #expect(sent.count == indexes.count)
            for (index, frame) in zip(indexes, sent) {
                if frame.payload.readableBytes < batch.fields.reduce(0, { $0 + $1.value.utf8.count }) { indexed += 1 }
                let fields = try harness.fields(frame)
                #expect(fields.dropFirst(4).map { "\($0.0): \($0.1)" } == batch.fields.map { "\($0.name): \($0.value)" }, "round \(round)")
                #expect(fields[3].1 == "/3/device/\(index)")
            }
            // Answered, so the streams do not pile up past the server's limit.
            var answers = ByteBuffer()
            for frame in sent {
                var answer = try harness.answer(frame.stream)
                answers.writeBuffer(&answer)
            }
            try harness.receive(answers)
        }
        #expect(harness.channel.isActive)
        #expect(indexed > next / 4, "\(indexed) of \(next) requests used the table")
    }

    @Test("while the server reads nothing, requests wait and its PINGs are answered at most 10,000 times; then the connection ends")
    func serverThatDoesNotRead() async throws {
        let harness = try Harness(timeout: .seconds(8))
        _ = try harness.frames()
        harness.channel.isWritable = false
        harness.channel.pipeline.fireChannelWritabilityChanged()
        harness.request([0])
        #expect(try harness.frames().filter { $0.type == C.Frame.headers }.isEmpty)
        harness.channel.isWritable = true
        harness.channel.pipeline.fireChannelWritabilityChanged()
        #expect(try harness.frames().filter { $0.type == C.Frame.headers }.map(\.stream) == [1])
        harness.channel.isWritable = false
        harness.channel.pipeline.fireChannelWritabilityChanged()
        var pings = ByteBuffer()
        for _ in 0..<10_001 {
            var ping = harness.frame(C.Frame.ping, stream: 0, ByteBuffer(string: "pingpong"))
            pings.writeBuffer(&ping)
        }
        try harness.receive(pings)
        var goAway = try harness.frames().filter { $0.type == C.Frame.goAway }.first?.payload
        goAway?.moveReaderIndex(forwardBy: 4)
        #expect(goAway?.readInteger(as: UInt32.self) == 0xB)
        #expect(!harness.channel.isActive && harness.answered.all == [0])

        // One that reads nothing for as long as a request may take is closed, its requests failed.
        let still = try Harness(timeout: .seconds(8))
        _ = try still.frames()
        still.request([0])
        still.channel.isWritable = false
        still.channel.pipeline.fireChannelWritabilityChanged()
        still.request([1])
        still.channel.embeddedEventLoop.advanceTime(by: .seconds(10))
        #expect(!still.channel.isActive && still.answered.all == [0, 1])
    }

    @Test("a header block left unfinished past the streams' deadline ends the connection")
    func unfinishedHeaderBlock() async throws {
        let harness = try Harness(timeout: .seconds(4))
        _ = try harness.frames()
        harness.request([0, 1])
        _ = try harness.frames()
        var block = try harness.block([(":status", "200")])
        try harness.receive(harness.frame(C.Frame.headers, stream: 1, block.readSlice(length: 1)!))
        harness.channel.embeddedEventLoop.advanceTime(by: .seconds(5))
        #expect(try harness.frames().contains { $0.type == C.Frame.goAway })
        #expect(!harness.channel.isActive && harness.answered.all == [0, 1])
    }

    /// Hostile answers that end the connection, each with the GOAWAY code it earns.
    static let hostile: [(name: String, code: UInt32, bytes: @Sendable (Harness) throws -> ByteBuffer)] = [
        (
            "a frame past 16,384 bytes", 0x6,
            { $0.frame(C.Frame.data, stream: 1, ByteBuffer(repeating: 0, count: 16_385)) }
        ),
        ("PUSH_PROMISE", 0x1, { $0.frame(C.Frame.pushPromise, flags: C.Frame.endHeaders, stream: 1, Self.integer(2)) }),
        ("SETTINGS on a stream", 0x1, { $0.frame(C.Frame.settings, stream: 1) }),
        ("SETTINGS of 5 bytes", 0x6, { $0.frame(C.Frame.settings, stream: 0, ByteBuffer(repeating: 0, count: 5)) }),
        ("an initial window past 2^31-1", 0x3, { $0.settings([(0x4, 1 << 31)]) }),
        ("a frame size below 16,384", 0x1, { $0.settings([(0x5, 100)]) }),
        ("a WINDOW_UPDATE of 0 for the connection", 0x1, { $0.frame(C.Frame.windowUpdate, stream: 0, Self.integer(0)) }),
        ("the connection's window past 2^31-1", 0x3, { $0.frame(C.Frame.windowUpdate, stream: 0, Self.integer(0x7FFF_FFFF)) }),
        ("CONTINUATION without HEADERS", 0x1, { $0.frame(C.Frame.continuation, flags: C.Frame.endHeaders, stream: 1) }),
        (
            "a header block cut off by DATA", 0x1,
            { harness in
                var bytes = harness.frame(C.Frame.headers, stream: 1, ByteBuffer(bytes: [0x88]))
                var data = harness.frame(C.Frame.data, stream: 1, ByteBuffer(string: "x"))
                bytes.writeBuffer(&data)
                return bytes
            }
        ),
        (
            "a header block past 64 KiB", 0x1,
            { harness in
                var bytes = harness.frame(C.Frame.headers, stream: 1, ByteBuffer(repeating: 0x40, count: 16_000))
                for _ in 0..<4 {
                    var more = harness.frame(C.Frame.continuation, stream: 1, ByteBuffer(repeating: 0x40, count: 16_000))
                    bytes.writeBuffer(&more)
                }
                return bytes
            }
        ),
        (
            "padding longer than its frame", 0x1,
            { $0.frame(C.Frame.data, flags: C.Frame.padded, stream: 1, ByteBuffer(bytes: [9, 1, 2])) }
        ),
        (
            "a header block HPACK cannot read", 0x9,
            { $0.frame(C.Frame.headers, flags: C.Frame.endHeaders, stream: 1, ByteBuffer(bytes: [0xFF, 0xFF])) }
        ),
        ("PING of 4 bytes", 0x6, { $0.frame(C.Frame.ping, stream: 0, Self.integer(1)) }),
        ("GOAWAY of 4 bytes", 0x6, { $0.frame(C.Frame.goAway, stream: 0, Self.integer(1)) }),
        (
            "a header block in 65 frames, empty CONTINUATIONs keeping it open", 0xB,
            { harness in
                var bytes = harness.frame(C.Frame.headers, stream: 1, ByteBuffer(bytes: [0x88]))
                for _ in 0..<C.maximumHeaderFrames {
                    var more = harness.frame(C.Frame.continuation, stream: 1)
                    bytes.writeBuffer(&more)
                }
                return bytes
            }
        ),
        (
            "the streams' window changed 101 times", 0xB,
            { harness in
                var bytes = ByteBuffer()
                // The first sets what it was already: no change.
                for round in 0...(C.maximumWindowSettings + 1) {
                    var settings = harness.settings([(0x4, UInt32(65_535 - round % 2))])
                    bytes.writeBuffer(&settings)
                }
                return bytes
            }
        ),
    ]

    @Test("a hostile answer ends the connection with GOAWAY and its code, and fails every stream", arguments: 0..<hostile.count)
    func hostileAnswers(_ which: Int) async throws {
        let (name, code, bytes) = Self.hostile[which]
        let harness = try Harness()
        _ = try harness.frames()
        harness.request([0, 1])
        _ = try harness.frames()
        try harness.receive(try bytes(harness))
        let goAway = try harness.frames().filter { $0.type == C.Frame.goAway }
        #expect(goAway.count == 1, "\(name)")
        var payload = goAway.first?.payload ?? ByteBuffer()
        payload.moveReaderIndex(forwardBy: 4)
        #expect(payload.readInteger(as: UInt32.self) == code, "\(name)")
        #expect(!harness.channel.isActive, "\(name)")
        #expect(harness.answered.all == [0, 1], "\(name)")
        #expect(harness.draining.isSet, "\(name)")
    }

    @Test("the streams' window may change 100 times a minute, again in the next minute, but not 101 times in one")
    func windowChangesPerMinute() async throws {
        let harness = try Harness()
        _ = try harness.frames()
        // `changes` changes of the streams' window, starting from what it is now (65,535).
        func change(_ changes: Int) throws {
            var bytes = ByteBuffer()
            for round in 1...changes {
                var settings = harness.settings([(0x4, UInt32(65_535 - round % 2))])
                bytes.writeBuffer(&settings)
            }
            if changes % 2 == 1 {
                var back = harness.settings([(0x4, 65_535)])
                bytes.writeBuffer(&back)
            }
            try harness.receive(bytes)
        }
        // 100 in the first minute (an even count ends where it began).
        try change(C.maximumWindowSettings)
        #expect(try !harness.frames().contains { $0.type == C.Frame.goAway })
        harness.channel.embeddedEventLoop.advanceTime(by: .seconds(61))
        try change(C.maximumWindowSettings)
        #expect(try !harness.frames().contains { $0.type == C.Frame.goAway }, "a new minute, a new count")
        #expect(harness.channel.isActive)
        harness.request([0])
        try harness.receive(try harness.answer(1))
        #expect(harness.answered.all == [0], "the connection still answers")
        // The 101st of this minute.
        try change(1)
        let goAway = try harness.frames().filter { $0.type == C.Frame.goAway }
        var payload = try #require(goAway.first?.payload)
        payload.moveReaderIndex(forwardBy: 4)
        #expect(payload.readInteger(as: UInt32.self) == 0xB)
        #expect(!harness.channel.isActive)
    }

    @Test("an answer's body past 64 KiB fails its stream and resets it; the connection goes on")
    func largeBody() async throws {
        let harness = try Harness()
        _ = try harness.frames()
        harness.request([0, 1])
        _ = try harness.frames()
        var bytes = harness.frame(C.Frame.headers, flags: C.Frame.endHeaders, stream: 1, try harness.block([(":status", "200")]))
        for _ in 0..<5 {
            var data = harness.frame(C.Frame.data, stream: 1, ByteBuffer(repeating: 0x61, count: 16_000))
            bytes.writeBuffer(&data)
        }
        try harness.receive(bytes)
        if case .failure(let error) = await harness.result(0) { #expect("\(error)".contains("64 KiB")) } else { Issue.record("answered") }
        #expect(try harness.frames().contains { $0.type == C.Frame.rstStream && $0.stream == 1 })
        try harness.receive(try harness.answer(3))
        #expect(try await harness.result(1).get().status == 200)
    }

    @Test("mutated and random answers never crash the connection; a closed one has failed every request")
    func mutatedAnswers() async throws {
        var generator = SeededGenerator(seed: 13)
        let template = try Harness()
        var valid = template.settings([(0x3, 10), (0x4, 1000)])
        var part = try template.answer(1, body: #"{"reason":"BadDeviceToken"}"#)
        valid.writeBuffer(&part)
        part = template.frame(C.Frame.ping, stream: 0, ByteBuffer(string: "abcdefgh"))
        valid.writeBuffer(&part)
        part = try template.answer(3)
        valid.writeBuffer(&part)
        let original = Array(valid.readableBytesView)
        for round in 0..<3_000 {
            var bytes = original
            switch round % 4 {
            case 0:
                for _ in 0..<(1 + Int(generator.next() % 4)) {
                    bytes[Int(generator.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: generator.next())
                }
            case 1: bytes = Array(bytes.prefix(Int(generator.next() % UInt64(bytes.count))))
            case 2:
                bytes.insert(
                    contentsOf: (0..<Int(generator.next() % 16)).map { _ in UInt8(truncatingIfNeeded: generator.next()) },
                    at: Int(generator.next() % UInt64(bytes.count)))
            default: bytes = (0..<Int(generator.next() % 200)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            }
            let harness = try Harness()
            harness.request([0, 1])
            // In pieces, as TCP may cut them.
            var offset = 0
            while offset < bytes.count, harness.channel.isActive {
                let length = min(bytes.count - offset, 1 + Int(generator.next() % 64))
                try harness.receive(ByteBuffer(bytes: bytes[offset..<offset + length]))
                offset += length
            }
            if !harness.channel.isActive { #expect(harness.answered.all == [0, 1], "round \(round)") }
            // Whatever was said, every request has its answer or its failure by the deadline.
            harness.channel.embeddedEventLoop.advanceTime(by: .seconds(11))
            #expect(harness.answered.all == [0, 1], "round \(round)")
            _ = try? harness.frames()
        }
    }
}
