import Foundation
import NIOCore
import NIOEmbedded
import NIOHPACK
import Testing

@testable import PushProviders

/// What a PNS answers, fuzzed frame by frame: the workers' HTTP/2 client reads bytes from a
/// server it does not control. Each case opens a connection on an embedded channel, writes a few
/// requests, and feeds it a run of frames made from a seeded generator: well-formed answers
/// beside every kind of bad one (lengths, flags, padding, stream ids, settings, windows, header
/// blocks cut or garbled, bytes flipped), in reads of any size, with time passing, more requests
/// and the channel's writability changing between them. Some cases' requests carry a header
/// block larger than a frame, some share a `SendingStop` that stops between reads, and some
/// flood the client with PINGs while it cannot write. Whatever came, past every deadline every
/// request has been answered, and once only; an answer is a status from 200 to 599 with at
/// most 64 KiB of body and of fields; a request answered as not sent was never written; and
/// what the client wrote was well-formed and stayed in proportion: its requests' header blocks,
/// each in frames that follow each other, no more of their bodies than they hold, and for each
/// frame it read at most an acknowledgement or a reset.
///
/// `PUSHHUB_FUZZ_CASES` sets how many cases (1,000 by default, a few seconds);
/// `PUSHHUB_FUZZ_FIRST_CASE` where they start; `PUSHHUB_FUZZ_REPORT=1` prints how they ended. A failure names its case, which runs alone with
/// `PUSHHUB_FUZZ_FIRST_CASE=N PUSHHUB_FUZZ_CASES=1`.
@Suite("HTTP/2 client: hostile answers, fuzzed", .timeLimit(.minutes(FuzzCases.minutes)))
struct HTTP2AnswerFuzzTests {
    typealias C = HTTP2ClientConnection
    typealias Harness = HTTP2ClientConnectionTests.Harness

    static let environment = FuzzCases.environment
    static let cases = FuzzCases.count
    static let firstCase = environment["PUSHHUB_FUZZ_FIRST_CASE"].flatMap(UInt64.init) ?? 1

    @Test(
        "every request is answered once, by its deadline at the latest; answers are bounded; what the client writes back stays in proportion"
    )
    func hostileAnswers() async throws {
        var outcomes: [String: Int] = [:]
        for number in Self.firstCase..<(Self.firstCase + UInt64(Self.cases)) {
            if Self.environment["PUSHHUB_FUZZ_TRACE"] != nil { FileHandle.standardError.write(Data("case \(number)\n".utf8)) }
            let failures = try await Self.run(case: number, outcomes: &outcomes)
            for failure in failures { Issue.record("case \(number): \(failure)") }
            if !failures.isEmpty { return }
        }
        if Self.environment["PUSHHUB_FUZZ_REPORT"] != nil {
            print("HTTP/2 answers fuzzed: cases \(Self.firstCase) to \(Self.firstCase + UInt64(Self.cases) - 1), \(outcomes)")
        }
        // The generator reaches both ends: cases with answers read as answers, and cases whose
        // connection the client ended for what the server did (a run of a few cases proves
        // nothing either way).
        guard Self.cases >= 100 else { return }
        #expect((outcomes["cases answered"] ?? 0) > Self.cases / 4, "\(outcomes)")
        #expect((outcomes["cases ended"] ?? 0) > Self.cases / 10, "\(outcomes)")
    }

    /// One case; what it broke, if anything.
    static func run(case number: UInt64, outcomes: inout [String: Int]) async throws -> [String] {
        var random = SplitMix(seed: number)
        let timeout = TimeAmount.seconds(Int64(random.below(8) + 2))
        let harness = try Harness(timeout: timeout)
        var server = Server(random: random)
        // Half the cases are a server that mostly answers well, so that answers are read and
        // compared too, not only connections ended at the first bad frame.
        server.gentle = server.random.below(2) == 0
        var output = ClientOutput()
        output.read(harness.channel)
        // Bodies of one size a case, from none to past a frame and the first windows.
        let bodySize = [0, 1, 10, 10, 100, 16_385, 70_000][server.random.below(7)]
        // Sometimes the server's SETTINGS come first: small windows, few streams.
        if server.random.below(4) == 0 {
            var payload = ByteBuffer()
            payload.writeInteger(UInt16(0x4))
            payload.writeInteger(UInt32([0, 1, 100, 65_535][server.random.below(4)]))
            payload.writeInteger(UInt16(0x3))
            payload.writeInteger(UInt32([1, 2, 100][server.random.below(3)]))
            var settings = ByteBuffer()
            C.frameHeader(length: payload.readableBytes, type: C.Frame.settings, flags: 0, stream: 0, into: &settings)
            settings.writeBuffer(&payload)
            try harness.receive(settings)
            output.read(harness.channel)
        }
        var requested = 0
        // What a case adds besides, from a generator of its own, so that each case's frames are
        // those of the first version's: a header block past a frame (CONTINUATION written), a
        // stop shared by the requests, a flood of PINGs while the client cannot write.
        var extra = SplitMix(seed: number ^ 0x0E47_2A5E_ED00_F00D)
        let largeHeader = extra.below(6) == 0 ? extra.below(30_000) + 10_000 : 0
        let stop = extra.below(5) == 0 ? SendingStop() : nil
        let floodAt = extra.below(30) == 0 ? extra.below(6) : -1
        let headers: PNSHeaderFields =
            largeHeader == 0
            ? [("apns-topic", "app")]
            : [("apns-topic", "app"), ("authorization", String(decoding: (0..<largeHeader).map { _ in UInt8(33 + extra.below(90)) }, as: UTF8.self))]
        // Requests go to an open connection only, as HTTP2Client's do (one written to a closed
        // channel never reaches the connection).
        // Nor once the stop is set: `PNSHTTPClient.sendAll` hands a connection no more.
        func request(_ count: Int) {
            guard harness.channel.isActive, stop?.isStopped != true else { return }
            harness.request(Array(requested..<(requested + count)), body: String(repeating: "x", count: bodySize), headers: headers, stop: stop)
            requested += count
            output.read(harness.channel)
        }
        request(server.random.below(server.random.below(5) == 0 ? 40 : 4) + 1)
        var failures: [String] = []
        var writtenAtStop: Int?

        var read = 0
        var reads = 0
        for step in 0..<(server.random.below(6) + 1) {
            server.streams = output.streams
            var bytes = server.frames(count: server.random.below(10) + 1)
            read += bytes.readableBytes
            // In reads of any size.
            while bytes.readableBytes > 0, harness.channel.isActive {
                let size = server.random.below(3) == 0 ? bytes.readableBytes : min(bytes.readableBytes, server.random.below(64) + 1)
                try harness.receive(bytes.readSlice(length: size)!)
                reads += 1
                output.read(harness.channel)
            }
            guard harness.channel.isActive else { break }
            switch server.random.below(8) {
            case 0:
                harness.channel.embeddedEventLoop.advanceTime(
                    by: .milliseconds(Int64(server.random.below(Int(timeout.nanoseconds / 1_000_000) * 3 / 2))))
            case 1: request(server.random.below(3) + 1)
            case 2:
                harness.channel.isWritable.toggle()
                harness.channel.pipeline.fireChannelWritabilityChanged()
            default: break
            }
            output.read(harness.channel)
            if let stop, !stop.isStopped, extra.below(3) == 0 {
                stop.stop()
                writtenAtStop = output.streams.count
            }
            if step == floodAt, harness.channel.isActive {
                // PINGs, each to be acknowledged, while the server reads nothing: past
                // `maximumUnwritten` of them unanswered the client ends the connection.
                harness.channel.isWritable = false
                harness.channel.pipeline.fireChannelWritabilityChanged()
                let pings = C.maximumUnwritten - 1_000 + extra.below(3_000)
                var flood = ByteBuffer()
                let ping = harness.frame(C.Frame.ping, stream: 0, ByteBuffer(repeating: 1, count: 8))
                for _ in 0..<pings { flood.writeImmutableBuffer(ping) }
                read += flood.readableBytes
                reads += 1
                try harness.receive(flood)
                output.read(harness.channel)
                // A frame left unfinished by the bytes before (a length longer than its
                // payload) may swallow the first of them: up to a frame's worth.
                if pings > C.maximumUnwritten + (16_384 + 9) / 17 + 1, harness.channel.isActive {
                    failures.append("\(pings) PINGs unanswered while it could not write, and the connection goes on")
                }
            }
        }
        let endedByServer = !harness.channel.isActive
        // Past every deadline, every request has its answer, the connection open or not
        // (sometimes still unwritable: a server that reads nothing is cut off).
        if server.random.below(4) != 0 {
            harness.channel.isWritable = true
            harness.channel.pipeline.fireChannelWritabilityChanged()
        }
        harness.channel.embeddedEventLoop.advanceTime(by: timeout * 3)
        output.read(harness.channel)
        let all = Set(0..<requested)
        if harness.answered.all != all { failures.append("answered \(harness.answered.all.sorted()) of \(requested) past every deadline") }
        _ = try? harness.channel.finish(acceptAlreadyClosed: true)
        // Not waited for when one never came: the check above says so.
        guard harness.answered.all == all else { return failures }

        var answered = false
        var notSent = 0
        for index in all {
            if let sink = harness.sinks[index], sink.duplicateAnswers > 0 { failures.append("request \(index) answered twice") }
            switch await harness.result(index) {
            case .failure(let error) where error is SendingStop.NotSent:
                notSent += 1
                if stop?.isStopped != true { failures.append("request \(index) answered as not sent, with no stop") }
            case .success(let response):
                answered = true
                if !(200...599).contains(response.status) { failures.append("request \(index) answered with status \(response.status)") }
                if response.body.count > C.maximumBody { failures.append("request \(index)'s body of \(response.body.count) bytes") }
                let fieldBytes = response.headers.fields.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 32 }
                if fieldBytes > C.maximumHeaderBlock { failures.append("request \(index)'s fields of \(fieldBytes) bytes") }
            case .failure: break
            }
        }
        if answered { outcomes["cases answered", default: 0] += 1 }
        if endedByServer { outcomes["cases ended", default: 0] += 1 }
        // What the client wrote, by kind: its requests' header blocks; no more of their bodies
        // than they hold, in frames that each carry some; and for each frame read at most an
        // acknowledgement (a PING's 17 bytes for 17) or a reset (13), and a window update
        // after each read, besides its preface and opening frames.
        // A request is written (its HEADERS) or not sent, never both; and none is written
        // once its sender stopped (those waiting for a stream are handed back).
        if output.streams.count + notSent > requested {
            failures.append("\(output.streams.count) requests written and \(notSent) not sent, of \(requested)")
        }
        if let writtenAtStop, output.streams.count > writtenAtStop {
            failures.append("\(output.streams.count - writtenAtStop) requests written after the stop")
        }
        if let error = output.malformed { failures.append(error) }
        let blockBound = 400 + largeHeader + 9 * (largeHeader / 16_384 + 1)
        if output.headers > blockBound * requested { failures.append("wrote \(output.headers) bytes of header blocks for \(requested) requests") }
        if output.dataPayload > bodySize * requested { failures.append("wrote \(output.dataPayload) bytes of bodies of \(bodySize * requested)") }
        if output.dataFrames > max(output.dataPayload, 1) {
            failures.append("wrote \(output.dataFrames) DATA frames for \(output.dataPayload) bytes")
        }
        if output.control > 2 * read + 13 * reads + 13 * requested + 200 {
            failures.append("wrote \(output.control) bytes of control frames for \(read) read in \(reads) reads")
        }
        return failures
    }

    /// What the client wrote, read as a server reads it: frames, by kind.
    struct ClientOutput {
        private var buffer = ByteBuffer()
        private var prefaceRead = false
        /// The requests' streams, in the order their HEADERS came.
        var streams: [UInt32] = []
        var headers = 0
        var dataPayload = 0
        var dataFrames = 0
        /// Every other frame's bytes, and the preface's.
        var control = 0
        /// The stream of a header block not ended yet: only its CONTINUATION may come next.
        private var openBlock: UInt32?
        /// The first frame that broke HTTP/2's framing, if one did.
        var malformed: String?

        mutating func read(_ channel: EmbeddedChannel) {
            while var next = try? channel.readOutbound(as: ByteBuffer.self) { buffer.writeBuffer(&next) }
            if !prefaceRead, buffer.readableBytes >= 24 {
                buffer.moveReaderIndex(forwardBy: 24)
                control += 24
                prefaceRead = true
            }
            while prefaceRead, buffer.readableBytes >= 9 {
                let start = buffer.readerIndex
                let length = Int(buffer.getInteger(at: start, as: UInt8.self)!) << 16 | Int(buffer.getInteger(at: start + 1, as: UInt16.self)!)
                guard buffer.readableBytes >= 9 + length else { break }
                let type = buffer.getInteger(at: start + 3, as: UInt8.self)!
                let flags = buffer.getInteger(at: start + 4, as: UInt8.self)!
                let stream = buffer.getInteger(at: start + 5, as: UInt32.self)! & 0x7FFF_FFFF
                buffer.moveReaderIndex(forwardBy: 9 + length)
                if let open = openBlock, type != C.Frame.continuation || stream != open, malformed == nil {
                    malformed = "frame of type \(type) on stream \(stream) inside stream \(open)'s header block"
                }
                if type == C.Frame.continuation, openBlock == nil, malformed == nil { malformed = "CONTINUATION with no header block open" }
                if type == C.Frame.headers || type == C.Frame.continuation { openBlock = flags & C.Frame.endHeaders == 0 ? stream : nil }
                switch type {
                case C.Frame.data:
                    dataPayload += length
                    dataFrames += 1
                case C.Frame.headers:
                    headers += 9 + length
                    streams.append(stream)
                case C.Frame.continuation: headers += 9 + length
                default: control += 9 + length
                }
            }
            buffer.discardReadBytes()
        }
    }

    /// The server's side: frames made from the generator, through an HPACK encoder whose table
    /// the client's decoder follows as long as the blocks are read.
    struct Server {
        var random: SplitMix
        var streams: [UInt32] = []
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        /// Well-formed frames of the kinds a PNS sends, to the requests' streams.
        var gentle = false

        init(random: SplitMix) { self.random = random }

        /// A stream id: mostly one of the requests', sometimes 0, one not opened, one even, or any.
        mutating func stream() -> UInt32 {
            switch gentle ? 9 : random.below(10) {
            case 0: 0
            case 1: (streams.last ?? 1) + 2
            case 2: 2 * UInt32(random.below(4)) + 2
            case 3: UInt32(truncatingIfNeeded: random.next())
            default: streams.isEmpty ? 1 : streams[random.below(streams.count)]
            }
        }

        mutating func value() -> UInt32 {
            let interesting: [UInt32] = [
                0, 1, 2, 100, 4_096, 16_383, 16_384, 65_535, 1 << 20, 16_777_215, 16_777_216, 0x7FFF_FFFF, 0x8000_0000, .max,
            ]
            return random.below(3) == 0 ? UInt32(truncatingIfNeeded: random.next()) : interesting[random.below(interesting.count)]
        }

        mutating func bytes(_ count: Int) -> ByteBuffer {
            var out = ByteBuffer()
            for _ in 0..<count { out.writeInteger(UInt8(truncatingIfNeeded: random.next())) }
            return out
        }

        /// A header block: an answer's fields, encoded, or bytes HPACK may not read.
        mutating func block() -> ByteBuffer {
            if !gentle, random.below(8) == 0 { return bytes(random.below(40)) }
            let statuses = ["200", "200", "400", "410", "429", "500", "100", "103", "199", "600", "099", "20", "2000", "abc", ""]
            var fields: [(String, String)] = []
            if gentle || random.below(10) != 0 { fields.append((":status", statuses[random.below(gentle ? 6 : statuses.count)])) }
            for _ in 0..<random.below(4) {
                let names = ["apns-id", "retry-after", "content-type", ":path", "x-long", "apns-unique-id"]
                let name = names[random.below(names.count)]
                let value = name == "x-long" ? String(repeating: "v", count: random.below(gentle ? 2_000 : 20_000)) : String(random.next() % 100_000)
                fields.append((name, value))
            }
            var out = ByteBuffer()
            do { try encoder.encode(headers: HPACKHeaders(fields), to: &out) } catch { return bytes(8) }
            return out
        }

        mutating func frame(_ type: UInt8, flags: UInt8 = 0, stream: UInt32, _ payload: ByteBuffer = ByteBuffer()) -> ByteBuffer {
            var payload = payload
            var out = ByteBuffer()
            var length = payload.readableBytes
            // Now and then a length that does not match, or past the largest frame.
            switch gentle ? 2 : random.below(40) {
            case 0: length = random.below(20_000)
            case 1: length = max(0, length - random.below(4) - 1)
            default: break
            }
            C.frameHeader(length: length, type: type, flags: flags, stream: stream, into: &out)
            out.writeBuffer(&payload)
            return out
        }

        /// Padding (a length byte, then that many), sometimes longer than the frame.
        mutating func padded(_ payload: ByteBuffer, flags: inout UInt8) -> ByteBuffer {
            guard random.below(4) == 0 else { return payload }
            flags |= C.Frame.padded
            let padding = random.below(20)
            var out = ByteBuffer()
            out.writeInteger(UInt8(!gentle && random.below(10) == 0 ? 255 : padding))
            var payload = payload
            out.writeBuffer(&payload)
            out.writeRepeatingByte(0, count: padding)
            return out
        }

        mutating func frames(count: Int) -> ByteBuffer {
            var out = ByteBuffer()
            for _ in 0..<count {
                var next = someFrame()
                // A byte flipped.
                if !gentle, random.below(30) == 0, next.readableBytes > 0 {
                    let at = next.readerIndex + random.below(next.readableBytes)
                    next.setInteger(next.getInteger(at: at, as: UInt8.self)! ^ UInt8(1 << random.below(8)), at: at)
                }
                out.writeBuffer(&next)
            }
            return out
        }

        mutating func someFrame() -> ByteBuffer {
            let flagsAny = UInt8(truncatingIfNeeded: random.next())
            if gentle {
                switch random.below(10) {
                case 0:
                    var payload = ByteBuffer()
                    payload.writeInteger(UInt16([1, 3, 4, 5, 6][random.below(5)]))
                    payload.writeInteger(UInt32([100, 4_096, 16_384, 65_535, 1 << 20][random.below(5)]))
                    return frame(C.Frame.settings, stream: 0, payload)
                case 1: return frame(C.Frame.ping, stream: 0, bytes(8))
                case 2:
                    var payload = ByteBuffer()
                    payload.writeInteger(UInt32(random.below(2) == 0 ? random.below(100) + 1 : random.below(1 << 20) + 1))
                    return frame(C.Frame.windowUpdate, stream: random.below(2) == 0 ? 0 : stream(), payload)
                default: break
                }
            }
            switch gentle ? 0 : random.below(16) {
            case 0, 1, 2, 3:
                // An answer: HEADERS, maybe CONTINUATION, maybe DATA.
                let id = stream()
                var block = block()
                let withBody = random.below(3) == 0
                var flags: UInt8 = withBody ? 0 : C.Frame.endStream
                if !gentle, random.below(8) == 0 { flags = flagsAny }
                var out = ByteBuffer()
                if random.below(5) == 0, block.readableBytes > 1 {
                    let first = block.readSlice(length: random.below(block.readableBytes))!
                    var headers = frame(C.Frame.headers, flags: flags & ~C.Frame.endHeaders, stream: id, first)
                    out.writeBuffer(&headers)
                    while block.readableBytes > 0 {
                        let part = block.readSlice(length: min(block.readableBytes, random.below(block.readableBytes) + 1))!
                        let last = block.readableBytes == 0
                        var continuation = frame(
                            C.Frame.continuation, flags: last && (gentle || random.below(6) != 0) ? C.Frame.endHeaders : 0,
                            stream: !gentle && random.below(10) == 0 ? stream() : id, part)
                        out.writeBuffer(&continuation)
                    }
                } else {
                    if random.below(6) == 0 {
                        var priority = ByteBuffer()
                        priority.writeInteger(value())
                        priority.writeInteger(UInt8(random.below(256)))
                        priority.writeBuffer(&block)
                        block = priority
                        flags |= C.Frame.priorityFlag
                    }
                    flags |= C.Frame.endHeaders
                    block = padded(block, flags: &flags)
                    var headers = frame(C.Frame.headers, flags: flags, stream: id, block)
                    out.writeBuffer(&headers)
                }
                if withBody {
                    var data = someData(stream: id)
                    out.writeBuffer(&data)
                }
                return out
            case 4, 5: return someData(stream: stream())
            case 6:
                var payload = ByteBuffer()
                for _ in 0..<random.below(5) {
                    let parameters: [UInt16] = [1, 2, 3, 4, 5, 6, 7, 0xFFFF]
                    payload.writeInteger(parameters[random.below(parameters.count)])
                    payload.writeInteger(value())
                }
                if random.below(10) == 0 { payload.writeInteger(UInt8(1)) }
                return frame(
                    C.Frame.settings, flags: random.below(6) == 0 ? C.Frame.ack : 0, stream: random.below(10) == 0 ? stream() : 0, payload)
            case 7:
                return frame(
                    C.Frame.ping, flags: random.below(4) == 0 ? C.Frame.ack : 0, stream: random.below(10) == 0 ? stream() : 0,
                    bytes(random.below(8) == 0 ? random.below(12) : 8))
            case 8:
                var payload = ByteBuffer()
                payload.writeInteger(random.below(2) == 0 ? streams.first ?? 1 : value())
                payload.writeInteger(UInt32(random.below(14)))
                var extra = bytes(random.below(20))
                payload.writeBuffer(&extra)
                if random.below(8) == 0 { payload.moveWriterIndex(to: random.below(8)) }
                return frame(C.Frame.goAway, stream: random.below(10) == 0 ? stream() : 0, payload)
            case 9, 10:
                var payload = ByteBuffer()
                payload.writeInteger(value())
                if random.below(12) == 0 { payload.writeInteger(UInt8(0)) }
                return frame(C.Frame.windowUpdate, stream: random.below(2) == 0 ? 0 : stream(), payload)
            case 11:
                var payload = ByteBuffer()
                payload.writeInteger(UInt32(random.below(14)))
                if random.below(8) == 0 { payload.writeInteger(UInt8(0)) }
                return frame(C.Frame.rstStream, stream: stream(), payload)
            case 12:
                return frame(C.Frame.priority, stream: stream(), bytes(5))
            case 13:
                return frame(C.Frame.continuation, flags: flagsAny, stream: stream(), block())
            case 14:
                return frame(C.Frame.pushPromise, flags: C.Frame.endHeaders, stream: stream(), bytes(8))
            default:
                return frame(UInt8(10 + random.below(246)), flags: flagsAny, stream: stream(), bytes(random.below(30)))
            }
        }

        /// DATA: a body in frames of at most 16 KiB, sometimes past 64 KiB in all, sometimes padded.
        mutating func someData(stream id: UInt32) -> ByteBuffer {
            var out = ByteBuffer()
            var left = random.below(6) == 0 ? random.below(80_000) : random.below(200)
            repeat {
                let size = min(left, 16_384)
                left -= size
                var flags: UInt8 = left == 0 && (gentle || random.below(5) != 0) ? C.Frame.endStream : 0
                var payload = ByteBuffer()
                payload.writeRepeatingByte(0x7B, count: size)
                payload = padded(payload, flags: &flags)
                var data = frame(C.Frame.data, flags: flags, stream: id, payload)
                out.writeBuffer(&data)
            } while left > 0
            return out
        }
    }
}

/// How many cases, and the time they may take: a hundred cases a second in the debug build, four
/// times over, and never under five minutes.
enum FuzzCases {
    static let environment = ProcessInfo.processInfo.environment
    static let count = environment["PUSHHUB_FUZZ_CASES"].flatMap(Int.init) ?? 1_000
    static let minutes = Int64(max(5, count / 1_500))
}

/// A small seeded generator (SplitMix64): the same case makes the same frames on every machine.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64

    init(seed: UInt64) { state = seed &* 0x9E37_79B9_7F4A_7C15 }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number from 0 up to `bound`, not including it.
    mutating func below(_ bound: Int) -> Int { bound <= 1 ? 0 : Int(next() % UInt64(bound)) }
}
