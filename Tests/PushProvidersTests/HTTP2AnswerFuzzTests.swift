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
/// and the channel's writability changing between them. Whatever came, once the connection is
/// closed every request has been answered, an answer is a status from 200 to 599 with at most
/// 64 KiB of body, and what the client wrote back stayed in proportion to what it read.
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

    @Test("every request is answered once the connection ends; answers are bounded; what the client writes back stays in proportion")
    func hostileAnswers() async throws {
        var outcomes: [String: Int] = [:]
        for number in Self.firstCase..<(Self.firstCase + UInt64(Self.cases)) {
            let failures = try await Self.run(case: number, outcomes: &outcomes)
            for failure in failures { Issue.record("case \(number): \(failure)") }
            if !failures.isEmpty { return }
        }
        if Self.environment["PUSHHUB_FUZZ_REPORT"] != nil { print("HTTP/2 answers fuzzed: \(Self.cases) cases, \(outcomes)") }
        // The generator reaches both ends: answers read as answers, and connections ended for
        // what the server did.
        #expect((outcomes["answered"] ?? 0) > Self.cases / 4, "\(outcomes)")
        #expect((outcomes["connection error"] ?? 0) > Self.cases / 10, "\(outcomes)")
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
        var written = Self.drain(harness.channel)
        var requested = 0
        // What the requests write, at once or as the server's windows let their bodies go.
        var requestBytes = 0
        func request(_ count: Int) {
            let body = server.random.below(40) == 0 ? 70_000 : 10
            harness.request(Array(requested..<(requested + count)), body: String(repeating: "x", count: body))
            requested += count
            requestBytes += count * (body + 9 * (body / 16_384 + 1) + 300)
            written += Self.drain(harness.channel)
        }
        request(server.random.below(4) + 1)
        server.streams = (0..<requested).map { UInt32(2 * $0 + 1) }

        var read = 0
        var reads = 0
        for _ in 0..<(server.random.below(6) + 1) {
            var bytes = server.frames(count: server.random.below(10) + 1)
            read += bytes.readableBytes
            // In reads of any size.
            while bytes.readableBytes > 0, harness.channel.isActive {
                let size = server.random.below(3) == 0 ? bytes.readableBytes : min(bytes.readableBytes, server.random.below(64) + 1)
                try harness.receive(bytes.readSlice(length: size)!)
                reads += 1
                written += Self.drain(harness.channel)
            }
            guard harness.channel.isActive else { break }
            switch server.random.below(8) {
            case 0:
                harness.channel.embeddedEventLoop.advanceTime(
                    by: .milliseconds(Int64(server.random.below(Int(timeout.nanoseconds / 1_000_000) * 3 / 2))))
            case 1:
                let first = requested
                request(server.random.below(3) + 1)
                server.streams += (first..<requested).map { UInt32(2 * $0 + 1) }
            case 2:
                harness.channel.isWritable.toggle()
                harness.channel.pipeline.fireChannelWritabilityChanged()
            default: break
            }
            written += Self.drain(harness.channel)
        }
        // Whatever is left ends: past every deadline, then closed.
        harness.channel.isWritable = true
        harness.channel.pipeline.fireChannelWritabilityChanged()
        let endedByServer = !harness.channel.isActive
        harness.channel.embeddedEventLoop.advanceTime(by: timeout * 3)
        written += Self.drain(harness.channel)
        _ = try? harness.channel.finish(acceptAlreadyClosed: true)

        var failures: [String] = []
        let all = Set(0..<requested)
        if harness.answered.all != all { failures.append("answered \(harness.answered.all.sorted()) of \(requested)") }
        for index in harness.answered.all.intersection(all) {
            switch await harness.result(index) {
            case .success(let response):
                outcomes["answered", default: 0] += 1
                if !(200...599).contains(response.status) { failures.append("request \(index) answered with status \(response.status)") }
                if response.body.count > C.maximumBody { failures.append("request \(index)'s body of \(response.body.count) bytes") }
                let fieldBytes = response.headers.fields.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 32 }
                if fieldBytes > C.maximumHeaderBlock { failures.append("request \(index)'s fields of \(fieldBytes) bytes") }
            case .failure: outcomes["failed", default: 0] += 1
            }
        }
        if endedByServer { outcomes["connection error", default: 0] += 1 }
        // An acknowledgement (17 bytes for a PING's 17), a reset or a window update (13) for
        // each frame read, a window update after each read, a body's frames held back by windows.
        let bound = 2 * read + 13 * reads + 13 * requested + requestBytes + 1_000
        if written > bound { failures.append("wrote \(written) bytes back for \(read) read in \(reads) reads") }
        return failures
    }

    /// The bytes the client wrote since the last call.
    static func drain(_ channel: EmbeddedChannel) -> Int {
        var total = 0
        while let buffer = try? channel.readOutbound(as: ByteBuffer.self) { total += buffer.readableBytes }
        return total
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
                    payload.writeInteger(UInt32(random.below(1 << 20) + 1))
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
