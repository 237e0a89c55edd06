import NIOCore
import NIOEmbedded
import Testing

@testable import PushProviders

@Suite("The write coalescer hands TLS one buffer a flush")
struct WriteCoalescerTests {
    static func buffer(_ text: String) -> IOData { .byteBuffer(ByteBuffer(string: text)) }

    /// How a promise's future ended, or nil while it is pending (never waited on: an embedded
    /// loop's future that is not complete never will be).
    static func outcome(_ promise: EventLoopPromise<Void>) -> Result<Void, any Error>? {
        var outcome: Result<Void, any Error>?
        promise.futureResult.whenComplete { outcome = $0 }
        return outcome
    }

    static func outbound(_ channel: EmbeddedChannel) throws -> [String] {
        var written: [String] = []
        while let data = try channel.readOutbound(as: IOData.self) {
            guard case .byteBuffer(let buffer) = data else {
                Issue.record("a file region came out")
                continue
            }
            written.append(String(buffer: buffer))
        }
        return written
    }

    @Test("three writes and a flush come out as one buffer, in order, and every promise completes")
    func gathers() throws {
        let channel = EmbeddedChannel(handler: WriteCoalescer())
        let promises = (0..<3).map { _ in channel.eventLoop.makePromise(of: Void.self) }
        channel.write(Self.buffer("HEADERS"), promise: promises[0])
        channel.write(Self.buffer("|DATA-HEADER"), promise: nil)
        channel.write(Self.buffer("|payload"), promise: promises[1])
        #expect(try Self.outbound(channel).isEmpty)
        channel.write(Self.buffer("!"), promise: promises[2])
        channel.flush()
        #expect(try Self.outbound(channel) == ["HEADERS|DATA-HEADER|payload!"])
        for promise in promises {
            #expect(throws: Never.self) { try Self.outcome(promise)?.get() }
            #expect(Self.outcome(promise) != nil)
        }
        // A lone write goes on as it is.
        channel.writeAndFlush(Self.buffer("alone"), promise: nil)
        #expect(try Self.outbound(channel) == ["alone"])
        #expect(try channel.finish().isClean)
    }

    @Test("gathered bytes are written on past the limit, before the flush; the whole still comes out in order")
    func bounded() throws {
        let channel = EmbeddedChannel(handler: WriteCoalescer())
        let piece = String(repeating: "x", count: 1000)
        let count = WriteCoalescer.limit / 1000 + 10
        for index in 0..<count { channel.write(Self.buffer(piece + "\(index % 10)"), promise: nil) }
        channel.flush()
        let written = try Self.outbound(channel)
        #expect(written.count == 2)
        #expect(written[0].utf8.count >= WriteCoalescer.limit && written[0].utf8.count < WriteCoalescer.limit + 1001)
        #expect(written.joined() == (0..<count).map { piece + "\($0 % 10)" }.joined())
        // A write as large as the limit goes on as it is, after what was gathered before it.
        let large = String(repeating: "y", count: WriteCoalescer.limit)
        channel.write(Self.buffer("a"), promise: nil)
        channel.write(Self.buffer("b"), promise: nil)
        channel.write(Self.buffer(large), promise: nil)
        channel.write(Self.buffer("c"), promise: nil)
        channel.flush()
        #expect(try Self.outbound(channel) == ["ab", large, "c"])
        #expect(try channel.finish().isClean)
    }

    @Test("writes gathered but not flushed fail with the channel's close, as unflushed writes do")
    func failedOnClose() throws {
        let channel = EmbeddedChannel(handler: WriteCoalescer())
        let promises = (0..<2).map { _ in channel.eventLoop.makePromise(of: Void.self) }
        channel.write(Self.buffer("a"), promise: promises[0])
        channel.write(Self.buffer("b"), promise: promises[1])
        _ = try? channel.close().wait()
        for promise in promises {
            let outcome = try #require(Self.outcome(promise))
            #expect(throws: (any Error).self) { try outcome.get() }
        }
    }
}
