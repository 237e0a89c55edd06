import Foundation
import NIOCore
import NIOHPACK

/// The client side of one HTTP/2 connection, on the bytes TLS gives and takes: a request is a
/// stream, written as its HEADERS and DATA frames into the buffer of its batch, and an answer
/// is read from the frames as they come. It takes the place of NIOHTTP2's connection handler,
/// whose state machines per stream and per frame were three fifths of the APNs worker's CPU
/// (docs/benchmarks.md, eighteenth round of issue 13).
///
/// What a PNS client needs of HTTP/2 and no more: no server push (`SETTINGS_ENABLE_PUSH` 0),
/// no priorities, no dynamic table for what it sends (each header is a literal, never indexed:
/// a request's fields are mostly the same as the one before, and a literal costs a copy).
/// What the server says is read as hostile: every frame's length, every window and every
/// setting is checked, a header block is bounded (`maximumHeaderBlock`), an answer's body too
/// (64 KiB), and a connection error is answered with GOAWAY and the connection closed, its
/// streams failed. The server's `SETTINGS_MAX_CONCURRENT_STREAMS` is kept: requests past it
/// wait for a stream to end. Its flow-control windows too: a body the windows do not take waits
/// for WINDOW_UPDATE.
final class HTTP2ClientConnection: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = StreamRequests
    typealias OutboundOut = ByteBuffer

    /// A connection error: the code GOAWAY gives (RFC 9113, section 7) and what was wrong.
    struct ConnectionError: Error, CustomStringConvertible {
        var code: UInt32
        var reason: String
        var description: String { "HTTP/2 connection error \(code): \(reason)" }

        static func protocolError(_ reason: String) -> Self { Self(code: 0x1, reason: reason) }
        static func flowControl(_ reason: String) -> Self { Self(code: 0x3, reason: reason) }
        static func frameSize(_ reason: String) -> Self { Self(code: 0x6, reason: reason) }
    }

    /// The frame types and flags read or written here.
    enum Frame {
        static let data: UInt8 = 0x0
        static let headers: UInt8 = 0x1
        static let priority: UInt8 = 0x2
        static let rstStream: UInt8 = 0x3
        static let settings: UInt8 = 0x4
        static let pushPromise: UInt8 = 0x5
        static let ping: UInt8 = 0x6
        static let goAway: UInt8 = 0x7
        static let windowUpdate: UInt8 = 0x8
        static let continuation: UInt8 = 0x9

        static let endStream: UInt8 = 0x1
        static let ack: UInt8 = 0x1
        static let endHeaders: UInt8 = 0x4
        static let padded: UInt8 = 0x8
        static let priorityFlag: UInt8 = 0x20
    }

    /// The largest frame payload this client takes (`SETTINGS_MAX_FRAME_SIZE`, left at its
    /// default), and the largest header block, over its frames, before decoding.
    static let maximumFrame = 16_384
    static let maximumHeaderBlock = 64 * 1024
    /// Most frames of one header block (HEADERS and its CONTINUATIONs): 64 KiB takes four.
    static let maximumHeaderFrames = 64
    /// Most SETTINGS frames that change the streams' window in a minute: each moves every open
    /// stream's window, and a server that keeps changing it would keep the client busy for
    /// nothing. One that tunes it now and then is left alone.
    static let maximumWindowSettings = 100
    /// The settings this client sends: no push, 1 MiB a stream to answer in, header lists of
    /// at most 16 KiB (PNS answers are a status and a few fields).
    static let streamWindow = 1 << 20
    static let maximumHeaderList = 16 * 1024
    /// Most bytes of an answer's body (over HTTP/1.1 too).
    static let maximumBody = 64 * 1024

    private struct Stream {
        var sink: ResponseSink
        var index: Int
        var deadline: NIODeadline
        var status: Int?
        var headers = PNSHeaderFields()
        var body: ByteBuffer?
        /// What the server's window for this stream still takes.
        var sendWindow: Int
        /// The part of the request's body the windows did not take yet.
        var unsent: ByteBuffer?
        /// Whether the stream is in `blocked`: its body waits for the connection's window. One
        /// whose own window holds it (`unsent` and no window) waits out of the queue, for its
        /// WINDOW_UPDATE or a SETTINGS that opens every stream's.
        var isBlocked = false
    }

    private let authority: String
    private let timeout: TimeAmount
    private let draining: HTTP2Client.Draining
    /// The server's HPACK table as this side fills it.
    private var table = HPACKEncoderTable()
    /// `:method`, `:scheme` and `:authority` as written at a generation of the table that
    /// added nothing.
    private var commonFields: (generation: Int, bytes: [UInt8])?
    /// The last request's fields as HPACK wrote them without adding to the table, with the
    /// table's generation then, kept with the fields (so their storage is not freed and used
    /// again): a batch's requests share one array of fields.
    private var encodedFields: (fields: PNSHeaderFields, generation: Int, bytes: ByteBuffer)?
    /// The last request's fields: an array seen again is a batch's, whose fields go into the
    /// table; a request's own fields stay literals, so they do not push the batch's out.
    private var lastFields: PNSHeaderFields?

    private var nextStreamID: UInt32 = 1
    /// Streams answered in the current read, given to their sinks together at its end.
    private var answered: [(sink: ResponseSink, index: Int, result: Result<PNSResponse, any Error>)] = []
    private var streams: [UInt32: Stream] = [:]
    /// Requests past the server's concurrent streams, in order.
    private var waiting = CircularBuffer<(request: StreamRequest, deadline: NIODeadline)>()
    /// Streams with body bytes that a window held back, in order; an id whose stream ended
    /// stays until the next pass drops it (`blockedCount` counts those that did not end).
    private var blocked = CircularBuffer<UInt32>()
    private var blockedCount = 0
    /// Control frames (acknowledgements) answered while the channel could not write: a server
    /// that does not read and keeps asking is cut off past `maximumUnwritten`.
    private var unwrittenControlFrames = 0
    static let maximumUnwritten = 10_000
    /// Since when the channel could not write, if it cannot.
    private var unwritableSince: NIODeadline?
    /// The table size the next header block starts with (RFC 7541, 4.2), after emptying the
    /// table: 0 in the first, until the server's SETTINGS say what its decoder keeps (at most
    /// `HPACKEncoderTable.largest`), and again after its `SETTINGS_HEADER_TABLE_SIZE`.
    private var tableSizeUpdate: Int? = 0
    /// Whether the server's first SETTINGS came.
    private var settingsReceived = false
    /// The server's `SETTINGS_HEADER_TABLE_SIZE` (4,096 until it says).
    private var serverTableSize = 4_096
    private var closed = false
    /// The connection failed: its streams are failed, and what it reads is dropped.
    private var failed = false
    private var flushScheduled = false
    /// Bytes to write with the next flush (frames made while reading: acknowledgements,
    /// window updates, bodies a window update let go).
    private var pendingOutput: ByteBuffer?

    // What the server allows.
    private var sendWindow = 65_535
    private var peerInitialWindow = 65_535
    /// SETTINGS frames that changed `peerInitialWindow` in the minute from
    /// `windowSettingsSince` (`maximumWindowSettings`).
    private var windowSettings = 0
    private var windowSettingsSince = NIODeadline.uptimeNanoseconds(0)
    /// The channel's event loop, whose clock times the window's changes: read only when one
    /// comes, not at every read of answers.
    private var eventLoop: (any EventLoop)?
    private var peerMaximumFrame = 16_384
    /// 100 until the server's SETTINGS say otherwise (unlimited by RFC 9113, but a server that
    /// enforces its own limit before its settings arrive refuses the streams past it).
    private var peerMaximumStreams = 100

    // What is read.
    private var input: ByteBuffer?
    /// A header block that goes on in CONTINUATION frames: its stream, whether it ends the
    /// stream, and its bytes so far.
    private var headerBlock: (stream: UInt32, endStream: Bool, bytes: ByteBuffer, frames: Int)?
    private var decoder: HPACKDecoder
    private var window = HTTP2ConnectionWindow()
    /// Fails streams past their deadline: one sweep for the connection, not a timer per stream.
    private var sweep: Scheduled<Void>?
    private let allocator = ByteBufferAllocator()

    init(authority: String, timeout: TimeAmount, draining: HTTP2Client.Draining) {
        self.authority = authority
        self.timeout = timeout
        self.draining = draining
        decoder = HPACKDecoder(allocator: ByteBufferAllocator(), maxDynamicTableSize: 4096, maxHeaderListSize: Self.maximumHeaderList)
    }

    // MARK: Writing

    func channelActive(context: ChannelHandlerContext) {
        eventLoop = context.eventLoop
        // The preface, the settings and the connection's receive window opened wide; TLS holds
        // them until its handshake is done.
        var out = context.channel.allocator.buffer(capacity: 64)
        out.writeString("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        Self.frameHeader(length: 18, type: Frame.settings, flags: 0, stream: 0, into: &out)
        for (parameter, value) in [(UInt16(0x2), UInt32(0)), (0x4, UInt32(Self.streamWindow)), (0x6, UInt32(Self.maximumHeaderList))] {
            out.writeInteger(parameter)
            out.writeInteger(value)
        }
        Self.windowUpdate(stream: 0, increment: HTTP2ConnectionWindow.size - 65_535, into: &out)
        context.writeAndFlush(wrapOutboundOut(out), promise: nil)
        scheduleSweep(context: context)
        context.fireChannelActive()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let batch = unwrapOutboundIn(data)
        promise?.succeed(())
        let deadline = context.eventLoop.now + timeout
        var out = output(capacity: batch.requests.reduce(0) { $0 + Self.estimatedSize($1) })
        for request in batch.requests { open(request, deadline: deadline, into: &out) }
        pendingOutput = out
        scheduleFlush(context: context)
    }

    /// The buffer frames are gathered in until the next flush.
    private func output(capacity: Int) -> ByteBuffer {
        if var pending = pendingOutput {
            pendingOutput = nil
            pending.reserveCapacity(minimumWritableBytes: capacity)
            return pending
        }
        return allocator.buffer(capacity: max(capacity, 256))
    }

    /// Writes and flushes what was gathered after the current tick of the event loop, so that
    /// the requests written in it leave together.
    private func scheduleFlush(context: ChannelHandlerContext) {
        guard !flushScheduled else { return }
        flushScheduled = true
        context.eventLoop.assumeIsolated().execute { [self] in
            flushScheduled = false
            flushOutput(context: context)
        }
    }

    private func flushOutput(context: ChannelHandlerContext) {
        guard let out = pendingOutput else { return }
        pendingOutput = nil
        guard out.readableBytes > 0 else { return }
        context.writeAndFlush(wrapOutboundOut(out), promise: nil)
    }

    private static func estimatedSize(_ request: StreamRequest) -> Int {
        64 + request.path.utf8.count + request.body.readableBytes
            + request.headers.fields.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 8 }
    }

    /// Opens `request`'s stream, or keeps it waiting while the server's concurrent streams are
    /// all taken.
    private func open(_ request: StreamRequest, deadline: NIODeadline, into out: inout ByteBuffer) {
        guard !closed, nextStreamID < UInt32(Int32.max) - 2 else {
            // Out of stream ids: the connection takes no more, and closes once its streams end.
            closed = true
            draining.set()
            request.sink.complete(request.index, .failure(HTTP2Client.Failure(description: "the HTTP/2 connection is closing")))
            return
        }
        // Past the server's streams, or while the channel cannot write (the server does not
        // read), a request waits.
        guard streams.count < peerMaximumStreams, unwritableSince == nil else {
            waiting.append((request, deadline))
            return
        }
        let id = nextStreamID
        nextStreamID += 2
        let hasBody = request.body.readableBytes > 0
        // The header block is written in place after room for its frame's header, which is
        // filled in once the block's length is known.
        let start = out.writerIndex
        out.writeRepeatingByte(0, count: 9)
        if let size = tableSizeUpdate {
            // Emptied, then its size: at most two updates, the smaller first (RFC 7541, 4.2).
            out.writeInteger(UInt8(0x20))
            if size > 0 { HPACKLiteral.integer(size, prefixBits: 5, first: 0x20, into: &out) }
            table.reset(maximumSize: size)
            tableSizeUpdate = nil
        }
        // :method POST, :scheme https (static table 3 and 7) and :authority, whose encoding
        // holds while the table does not change.
        if let common = commonFields, common.generation == table.generation {
            out.writeBytes(common.bytes)
        } else {
            let start = out.writerIndex
            out.writeBytes([0x83, 0x87])
            let generation = table.generation
            table.encode(name: ":authority", nameIndex: 1, value: authority, indexing: true, into: &out)
            commonFields = table.generation == generation ? (generation, out.getBytes(at: start, length: out.writerIndex - start)!) : nil
        }
        HPACKLiteral.field(nameIndex: 4, value: request.path, into: &out)  // :path, never the same twice
        encode(request.headers, into: &out)
        let blockLength = out.writerIndex - start - 9
        let endStream = hasBody ? 0 : Frame.endStream
        if blockLength <= peerMaximumFrame {
            out.setInteger(UInt8(truncatingIfNeeded: blockLength >> 16), at: start)
            out.setInteger(UInt16(truncatingIfNeeded: blockLength), at: start + 1)
            out.setInteger(Frame.headers, at: start + 3)
            out.setInteger(Frame.endHeaders | endStream, at: start + 4)
            out.setInteger(id, at: start + 5)
        } else {
            // A header block larger than a frame goes on in CONTINUATION frames.
            var block = out.getSlice(at: start + 9, length: blockLength)!
            out.moveWriterIndex(to: start)
            var first = true
            while block.readableBytes > 0 {
                var part = block.readSlice(length: min(block.readableBytes, peerMaximumFrame))!
                let flags = (block.readableBytes == 0 ? Frame.endHeaders : 0) | (first ? endStream : 0)
                Self.frameHeader(length: part.readableBytes, type: first ? Frame.headers : Frame.continuation, flags: flags, stream: id, into: &out)
                out.writeBuffer(&part)
                first = false
            }
        }
        if hasBody, request.body.readableBytes <= min(peerInitialWindow, sendWindow, peerMaximumFrame) {
            // The whole body in one DATA frame, as nearly every push's is: no stream lookup.
            var body = request.body
            let length = data(&body, stream: id, into: &out)
            streams[id] = Stream(sink: request.sink, index: request.index, deadline: deadline, sendWindow: peerInitialWindow - length)
            return
        }
        streams[id] = Stream(
            sink: request.sink, index: request.index, deadline: deadline, sendWindow: peerInitialWindow, unsent: hasBody ? request.body : nil)
        if hasBody { sendBody(of: id, into: &out) }
    }

    /// Writes `fields`: a batch's (the array of the request before) through the table, so from
    /// its third request on each field is an index of a byte or two; a request's own as
    /// literals. What the table did not change since is not encoded again.
    private func encode(_ fields: PNSHeaderFields, into out: inout ByteBuffer) {
        let shared = lastFields.map { Self.sameStorage($0.fields, fields.fields) } ?? false
        if shared, let last = encodedFields, last.generation == table.generation, Self.sameStorage(last.fields.fields, fields.fields) {
            var bytes = last.bytes
            out.writeBuffer(&bytes)
            return
        }
        lastFields = fields
        let generation = table.generation
        var bytes = ByteBuffer()
        bytes.reserveCapacity(fields.fields.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 8 })
        for field in fields.fields {
            // Names are lowercase on HTTP/2; providers already write them so, which saves a copy.
            let name = field.name
            let lowercase = name.utf8.contains(where: { $0 >= 65 && $0 <= 90 }) ? name.lowercased() : name
            table.encode(name: lowercase, value: field.value, indexing: shared, into: &bytes)
        }
        // Bytes that added to the table must not be sent again: the server would add twice.
        // Nor literals of a batch's first request: its second adds its fields.
        encodedFields = shared && table.generation == generation ? (fields, generation, bytes) : nil
        out.writeBuffer(&bytes)
    }

    /// Whether two arrays are one storage (so one content): compared by address and count,
    /// which is sound while one of them is kept.
    private static func sameStorage(_ first: [PNSHeaderFields.Field], _ second: [PNSHeaderFields.Field]) -> Bool {
        first.count == second.count
            && first.withUnsafeBufferPointer { a in second.withUnsafeBufferPointer { b in a.baseAddress == b.baseAddress } }
    }

    /// Writes as much of a stream's body as the windows take; what the connection's window
    /// held back waits in `blocked`.
    @discardableResult
    private func sendBody(of id: UInt32, into out: inout ByteBuffer) -> Bool {
        guard let index = streams.index(forKey: id), var unsent = streams.values[index].unsent else { return true }
        var streamWindow = streams.values[index].sendWindow
        while unsent.readableBytes > 0, min(streamWindow, sendWindow) > 0 {
            streamWindow -= data(&unsent, stream: id, upTo: streamWindow, into: &out)
        }
        let done = unsent.readableBytes == 0
        streams.values[index].sendWindow = streamWindow
        streams.values[index].unsent = done ? nil : unsent
        if done, streams.values[index].isBlocked {
            streams.values[index].isBlocked = false
            unblocked()
        } else if !done, !streams.values[index].isBlocked, streamWindow > 0 {
            enqueue(id, at: index)
        }
        return done
    }

    /// A body the connection's window holds back, into `blocked`.
    private func enqueue(_ id: UInt32, at index: [UInt32: Stream].Index) {
        streams.values[index].isBlocked = true
        blockedCount += 1
        blocked.append(id)
    }

    /// One DATA frame of `body`'s next bytes, as many as `limit`, the connection's window and
    /// the server's frame size take (at least one; the caller checks the windows), ending the
    /// stream with the last byte; the connection's window is charged. Returns the bytes sent.
    private func data(_ body: inout ByteBuffer, stream id: UInt32, upTo limit: Int = .max, into out: inout ByteBuffer) -> Int {
        let length = min(body.readableBytes, limit, sendWindow, peerMaximumFrame)
        let last = length == body.readableBytes
        Self.frameHeader(length: length, type: Frame.data, flags: last ? Frame.endStream : 0, stream: id, into: &out)
        var chunk = body.readSlice(length: length)!
        out.writeBuffer(&chunk)
        sendWindow -= length
        return length
    }

    /// Sends what the connection's window now takes of the held-back bodies, in order, from
    /// the front of the queue while the window lasts: a server that opens it a byte at a time
    /// has the client look at one stream for it, not at every stream held back (those their
    /// own windows hold are not in the queue). The ids of streams that ended, or whose body
    /// went meanwhile, are dropped as they come.
    private func sendBlocked() {
        guard blockedCount > 0, sendWindow > 0 else { return }
        var out = output(capacity: 1024)
        // An id is in the queue once while its stream is held back (added as `isBlocked` is
        // set, taken out before it is cleared); at most the queue's length a pass.
        var left = blocked.count
        while left > 0, sendWindow > 0, let id = blocked.popFirst() {
            left -= 1
            guard let index = streams.index(forKey: id), streams.values[index].isBlocked else { continue }
            streams.values[index].isBlocked = false
            blockedCount -= 1
            // Held back again by the connection's window, it stays first: its body goes on
            // before the others' start.
            if !sendBody(of: id, into: &out), sendWindow <= 0, blocked.last == id {
                blocked.removeLast()
                blocked.prepend(id)
            }
        }
        pendingOutput = out
    }

    /// Drops the ids of streams that ended from `blocked` once they are most of it.
    private func compactBlocked() {
        guard blocked.count > 2 * blockedCount + 64 else { return }
        blocked = CircularBuffer(blocked.filter { streams[$0]?.isBlocked == true })
    }

    /// A stream left `blocked` (its body went, or it ended): its id stays in the queue until a
    /// pass or a compaction drops it, so the queue holds at most about twice the streams
    /// still held back.
    private func unblocked() {
        blockedCount -= 1
        if blockedCount == 0 {
            blocked.removeAll(keepingCapacity: true)
        } else {
            compactBlocked()
        }
    }

    /// A stream's own window opened: its body goes on, if it waits, or waits in the queue
    /// for the connection's.
    private func sendBlocked(stream id: UInt32) {
        guard let index = streams.index(forKey: id), streams.values[index].unsent != nil, streams.values[index].sendWindow > 0 else { return }
        guard sendWindow > 0 else {
            if !streams.values[index].isBlocked { enqueue(id, at: index) }
            return
        }
        var out = output(capacity: 1024)
        sendBody(of: id, into: &out)
        pendingOutput = out
    }

    /// Opens waiting requests while the server takes more streams.
    private func openWaiting() {
        guard !waiting.isEmpty, streams.count < peerMaximumStreams, !closed, unwritableSince == nil else { return }
        var out = output(capacity: 1024)
        while streams.count < peerMaximumStreams, !closed, let next = waiting.popFirst() {
            // Its sender stopped while it waited: it stays unsent, to be handed back.
            if next.request.sink.isStopped {
                next.request.sink.notSent(holding: next.request.index)
                continue
            }
            open(next.request, deadline: next.deadline, into: &out)
        }
        pendingOutput = out
    }

    static func frameHeader(length: Int, type: UInt8, flags: UInt8, stream: UInt32, into out: inout ByteBuffer) {
        out.writeInteger(UInt8(truncatingIfNeeded: length >> 16))
        out.writeInteger(UInt16(truncatingIfNeeded: length))
        out.writeInteger(type)
        out.writeInteger(flags)
        out.writeInteger(stream & 0x7FFF_FFFF)
    }

    static func rstStream(_ stream: UInt32, code: UInt32, into out: inout ByteBuffer) {
        frameHeader(length: 4, type: Frame.rstStream, flags: 0, stream: stream, into: &out)
        out.writeInteger(code)
    }

    static func windowUpdate(stream: UInt32, increment: Int, into out: inout ByteBuffer) {
        frameHeader(length: 4, type: Frame.windowUpdate, flags: 0, stream: stream, into: &out)
        out.writeInteger(UInt32(increment))
    }

    // MARK: Deadlines and closing

    /// The next sweep, in a quarter of the time-out (so a stream fails at most a quarter late),
    /// at most a second.
    private func scheduleSweep(context: ChannelHandlerContext) {
        let every = TimeAmount.nanoseconds(min(max(timeout.nanoseconds / 4, 10_000_000), 1_000_000_000))
        sweep = context.eventLoop.assumeIsolated().scheduleTask(in: every) { [self] in
            expire(context: context)
            // After GOAWAY the streams the server kept still get their deadline.
            if !closed || !streams.isEmpty { scheduleSweep(context: context) }
        }
    }

    /// Fails and resets the streams whose deadline passed, and fails the waiting requests whose
    /// deadline passed.
    private func expire(context: ChannelHandlerContext) {
        let now = context.eventLoop.now
        let failure = HTTP2Client.Failure(description: "no answer within \(timeout)")
        while let first = waiting.first, first.deadline <= now {
            waiting.removeFirst()
            // Never written: once its sender stopped, it is unsent, not a call that failed.
            if first.request.sink.isStopped {
                first.request.sink.notSent(holding: first.request.index)
            } else {
                first.request.sink.complete(first.request.index, .failure(failure))
            }
        }
        // A server that reads nothing for as long as a request may take, or leaves a header
        // block unfinished while streams wait past their deadline, holds every stream here:
        // the connection ends, and its requests go elsewhere.
        if let since = unwritableSince, now - since > timeout {
            failAll(HTTP2Client.Failure(description: "the server read nothing for \(timeout)"))
            context.close(promise: nil)
            return
        }
        let late = streams.filter { $0.value.deadline <= now }.map(\.key)
        if !late.isEmpty, headerBlock != nil {
            connectionError(.protocolError("a header block left unfinished past the streams' deadline"), context: context)
            return
        }
        if !late.isEmpty {
            var out = output(capacity: late.count * 13)
            for id in late {
                fail(id, failure)
                Self.rstStream(id, code: 0x8, into: &out)  // CANCEL
            }
            pendingOutput = out
            openWaiting()
            flushOutput(context: context)
        }
        closeIfDrained(context: context)
    }

    /// Closes a connection whose server said GOAWAY once it has no stream left.
    private func closeIfDrained(context: ChannelHandlerContext) {
        if closed, streams.isEmpty, context.channel.isActive {
            flushOutput(context: context)
            context.close(promise: nil)
        }
    }

    /// Ends the connection for an error of the server's: GOAWAY with its code, then close.
    private func connectionError(_ error: ConnectionError, context: ChannelHandlerContext) {
        failAll(error)
        guard context.channel.isActive else { return }
        var out = output(capacity: 17)
        Self.frameHeader(length: 8, type: Frame.goAway, flags: 0, stream: 0, into: &out)
        out.writeInteger(UInt32(0))  // this client takes no streams of the server's
        out.writeInteger(error.code)
        pendingOutput = out
        flushOutput(context: context)
        context.close(promise: nil)
    }

    private func failAll(_ error: any Error) {
        failed = true
        closed = true
        draining.set()
        input = nil
        headerBlock = nil
        for id in Array(streams.keys) { fail(id, error) }
        while let next = waiting.popFirst() { next.request.sink.complete(next.request.index, .failure(error)) }
        blocked.removeAll()
        // Answers read before the failure are answers.
        deliverAnswered()
    }

    func channelInactive(context: ChannelHandlerContext) {
        sweep?.cancel()
        failAll(HTTP2Client.Failure(description: "the connection closed"))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        failAll(HTTP2Client.Failure(description: "\(error)"))
        context.close(promise: nil)
    }

    private func complete(_ id: UInt32) {
        guard let stream = streams.removeValue(forKey: id) else { return }
        if stream.isBlocked { unblocked() }
        if stream.unsent != nil {
            // Answered before the whole body went: the stream is closed on this side too.
            var out = output(capacity: 13)
            Self.rstStream(id, code: 0x0, into: &out)  // NO_ERROR
            pendingOutput = out
        }
        guard let status = stream.status else {
            stream.sink.complete(stream.index, .failure(HTTP2Client.Failure(description: "an answer without :status")))
            return
        }
        let response = PNSResponse(status: status, headers: stream.headers, body: stream.body.map { Data($0.readableBytesView) } ?? Data())
        answered.append((stream.sink, stream.index, .success(response)))
    }

    /// Gives the answers of this read to their sinks, each sink's run of them in one call.
    /// `complete` runs only inside a read, whose end (or `failAll`) gives them out.
    private func deliverAnswered() {
        guard !answered.isEmpty else { return }
        // Taken out first: a sink that called back in would find none to give twice.
        var given: [(sink: ResponseSink, index: Int, result: Result<PNSResponse, any Error>)] = []
        swap(&given, &answered)
        var start = 0
        while start < given.count {
            let sink = given[start].sink
            var end = start + 1
            while end < given.count, given[end].sink === sink { end += 1 }
            sink.complete(given[start..<end].lazy.map { (index: $0.index, result: $0.result) })
            start = end
        }
        // The buffer's room serves the next read.
        given.removeAll(keepingCapacity: true)
        if answered.isEmpty { answered = given }
    }

    private func fail(_ id: UInt32, _ error: any Error) {
        guard let stream = streams.removeValue(forKey: id) else { return }
        if stream.isBlocked { unblocked() }
        stream.sink.complete(stream.index, .failure(error))
    }

    // MARK: Reading

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        // After a connection error, nothing more is read.
        guard !failed else { return }
        defer { deliverAnswered() }
        if input == nil {
            input = bytes
        } else {
            input!.writeBuffer(&bytes)
        }
        do {
            while !failed, let frame = try nextFrame() {
                try handle(type: frame.type, flags: frame.flags, stream: frame.stream, payload: frame.payload)
            }
        } catch let error as ConnectionError {
            connectionError(error, context: context)
            return
        } catch {
            connectionError(.protocolError("\(error)"), context: context)
            return
        }
        // What is left is part of a frame; it moves to the front of its buffer, so the buffer
        // stays within a frame and a read.
        if input?.readableBytes == 0 { input = nil } else { input?.discardReadBytes() }
        openWaiting()
        closeIfDrained(context: context)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if let increment = window.increment() {
            var out = output(capacity: 13)
            Self.windowUpdate(stream: 0, increment: increment, into: &out)
            pendingOutput = out
        }
        flushOutput(context: context)
        context.fireChannelReadComplete()
    }

    /// The next whole frame of the input, nil until one is there.
    private func nextFrame() throws(ConnectionError) -> (type: UInt8, flags: UInt8, stream: UInt32, payload: ByteBuffer)? {
        guard var buffer = input, buffer.readableBytes >= 9 else { return nil }
        let start = buffer.readerIndex
        let high = Int(buffer.getInteger(at: start, as: UInt8.self)!)
        let length = high << 16 | Int(buffer.getInteger(at: start + 1, as: UInt16.self)!)
        guard length <= Self.maximumFrame else { throw .frameSize("a frame of \(length) bytes, past \(Self.maximumFrame)") }
        guard buffer.readableBytes >= 9 + length else { return nil }
        let type = buffer.getInteger(at: start + 3, as: UInt8.self)!
        let flags = buffer.getInteger(at: start + 4, as: UInt8.self)!
        let stream = buffer.getInteger(at: start + 5, as: UInt32.self)! & 0x7FFF_FFFF
        buffer.moveReaderIndex(forwardBy: 9)
        let payload = buffer.readSlice(length: length)!
        input = buffer
        return (type, flags, stream, payload)
    }

    private func handle(type: UInt8, flags: UInt8, stream id: UInt32, payload: ByteBuffer) throws {
        var payload = payload
        if var block = headerBlock {
            // A header block that goes on takes CONTINUATION frames of its stream and nothing else.
            guard type == Frame.continuation, id == block.stream else {
                throw ConnectionError.protocolError("a header block cut off by another frame")
            }
            // Taken out, so that its bytes grow in place rather than copied at every frame.
            headerBlock = nil
            guard block.bytes.readableBytes + payload.readableBytes <= Self.maximumHeaderBlock else {
                throw ConnectionError.protocolError("a header block past \(Self.maximumHeaderBlock) bytes")
            }
            // Empty frames would keep a block open, and the connection busy, for ever.
            block.frames += 1
            guard block.frames <= Self.maximumHeaderFrames else {
                throw ConnectionError(code: 0xB, reason: "a header block in more than \(Self.maximumHeaderFrames) frames")  // ENHANCE_YOUR_CALM
            }
            block.bytes.writeBuffer(&payload)
            if flags & Frame.endHeaders != 0 {
                try headers(block.bytes, stream: id, endStream: block.endStream)
            } else {
                headerBlock = block
            }
            return
        }
        switch type {
        case Frame.data:
            guard id != 0 else { throw ConnectionError.protocolError("DATA on stream 0") }
            let total = payload.readableBytes
            try Self.unpad(&payload, flags: flags)
            // Padding counts against the window too, with its length byte.
            window.discard(total - payload.readableBytes)
            guard let index = streams.index(forKey: id) else {
                window.discard(payload.readableBytes)
                return
            }
            window.receive(&payload, into: &streams.values[index].body)
            // PNS answers are small: a body past 64 KiB fails its stream.
            guard (streams.values[index].body?.readableBytes ?? 0) <= Self.maximumBody else {
                fail(id, HTTP2Client.Failure(description: "an answer over 64 KiB"))
                reset(id)
                return
            }
            if flags & Frame.endStream != 0 { complete(id) }
        case Frame.headers:
            guard id != 0 else { throw ConnectionError.protocolError("HEADERS on stream 0") }
            try Self.unpad(&payload, flags: flags)
            if flags & Frame.priorityFlag != 0 {
                guard payload.readableBytes >= 5 else { throw ConnectionError.frameSize("HEADERS too short for its priority") }
                payload.moveReaderIndex(forwardBy: 5)
            }
            let endStream = flags & Frame.endStream != 0
            if flags & Frame.endHeaders != 0 {
                try headers(payload, stream: id, endStream: endStream)
            } else {
                guard payload.readableBytes <= Self.maximumHeaderBlock else {
                    throw ConnectionError.protocolError("a header block past \(Self.maximumHeaderBlock) bytes")
                }
                headerBlock = (id, endStream, payload, 1)
            }
        case Frame.priority:
            guard id != 0 else { throw ConnectionError.protocolError("PRIORITY on stream 0") }
        case Frame.rstStream:
            guard id != 0 else { throw ConnectionError.protocolError("RST_STREAM on stream 0") }
            guard let code = payload.readInteger(as: UInt32.self), payload.readableBytes == 0 else {
                throw ConnectionError.frameSize("RST_STREAM of other than 4 bytes")
            }
            fail(id, HTTP2Client.Failure(description: "stream reset: \(Self.errorName(code))"))
        case Frame.settings:
            guard id == 0 else { throw ConnectionError.protocolError("SETTINGS on a stream") }
            if flags & Frame.ack != 0 {
                guard payload.readableBytes == 0 else { throw ConnectionError.frameSize("a SETTINGS acknowledgement with a payload") }
                return
            }
            guard payload.readableBytes % 6 == 0 else { throw ConnectionError.frameSize("SETTINGS of \(payload.readableBytes) bytes") }
            // The streams' window is set once a frame, to its last value.
            var initialWindow: UInt32?
            while let parameter = payload.readInteger(as: UInt16.self), let value = payload.readInteger(as: UInt32.self) {
                if parameter == 0x4 { initialWindow = value } else { try apply(parameter, value) }
            }
            try control(Frame.settings, flags: Frame.ack)
            if !settingsReceived {
                // Until now, the table stayed empty: the server had not said what it keeps.
                settingsReceived = true
                tableSizeUpdate = min(serverTableSize, HPACKEncoderTable.largest)
            }
            if let initialWindow, try setInitialWindow(initialWindow) { sendBlocked() }
        case Frame.pushPromise:
            throw ConnectionError.protocolError("PUSH_PROMISE, though push is off")
        case Frame.ping:
            guard id == 0 else { throw ConnectionError.protocolError("PING on a stream") }
            guard payload.readableBytes == 8 else { throw ConnectionError.frameSize("PING of other than 8 bytes") }
            guard flags & Frame.ack == 0 else { return }
            try control(Frame.ping, flags: Frame.ack, payload: payload)
        case Frame.goAway:
            guard id == 0 else { throw ConnectionError.protocolError("GOAWAY on a stream") }
            guard payload.readableBytes >= 8, let last = payload.readInteger(as: UInt32.self), let code = payload.readInteger(as: UInt32.self) else {
                throw ConnectionError.frameSize("GOAWAY shorter than 8 bytes")
            }
            let lastStream = last & 0x7FFF_FFFF
            closed = true
            draining.set()
            let failure = HTTP2Client.Failure(description: "GOAWAY \(Self.errorName(code))")
            for stream in streams.keys where stream > lastStream { fail(stream, failure) }
            while let next = waiting.popFirst() { next.request.sink.complete(next.request.index, .failure(failure)) }
        case Frame.windowUpdate:
            guard let raw = payload.readInteger(as: UInt32.self), payload.readableBytes == 0 else {
                throw ConnectionError.frameSize("WINDOW_UPDATE of other than 4 bytes")
            }
            let increment = Int(raw & 0x7FFF_FFFF)
            if id == 0 {
                guard increment > 0 else { throw ConnectionError.protocolError("a WINDOW_UPDATE of 0 for the connection") }
                let wasClosed = sendWindow <= 0
                sendWindow += increment
                guard sendWindow <= Int(Int32.max) else { throw ConnectionError.flowControl("the connection's window past 2^31-1") }
                // Held-back bodies go on when the connection's window opens again, not at every update.
                if wasClosed { sendBlocked() }
            } else if let index = streams.index(forKey: id) {
                streams.values[index].sendWindow += increment
                guard increment > 0, streams.values[index].sendWindow <= Int(Int32.max) else {
                    fail(id, HTTP2Client.Failure(description: "a stream's window update of 0 or past 2^31-1"))
                    reset(id)
                    return
                }
                sendBlocked(stream: id)
            }
        case Frame.continuation:
            throw ConnectionError.protocolError("CONTINUATION without a header block")
        default:
            // Frames of unknown types are ignored (RFC 9113, section 4.1).
            break
        }
    }

    /// A stream's header block, decoded whatever the stream, so that the HPACK table stays as
    /// the server keeps it. An answer's headers: a status (after any informational answers, 1xx, which are not the
    /// answer) and its fields; then at most trailers, which end the stream and whose
    /// pseudo-fields are not the answer's. Anything else fails the stream and resets it, so a
    /// server cannot grow one stream's fields block by block.
    private func headers(_ block: ByteBuffer, stream id: UInt32, endStream: Bool) throws {
        var block = block
        let fields: HPACKHeaders
        do { fields = try decoder.decodeHeaders(from: &block) } catch {
            throw ConnectionError(code: 0x9, reason: "a header block HPACK cannot read: \(error)")  // COMPRESSION_ERROR
        }
        guard let index = streams.index(forKey: id) else { return }
        if streams.values[index].status == nil {
            guard let status = Self.status(fields) else { return refuse(id, "an answer without a valid :status") }
            if status < 200 {
                if endStream { refuse(id, "an informational answer that ends its stream") }
                return
            }
            streams.values[index].status = status
        } else if !endStream {
            return refuse(id, "a second header block that does not end its stream")
        }
        for (name, value, _) in fields where !name.hasPrefix(":") { streams.values[index].headers.add(name, value) }
        if endStream { complete(id) }
    }

    /// `:status` as HTTP/2 has it: three digits, 100 to 599.
    static func status(_ fields: HPACKHeaders) -> Int? {
        guard let text = fields.first(name: ":status"), text.utf8.count == 3, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
            let value = Int(text), (100...599).contains(value)
        else { return nil }
        return value
    }

    /// Fails a stream the server answered wrongly, and resets it.
    private func refuse(_ id: UInt32, _ reason: String) {
        fail(id, HTTP2Client.Failure(description: reason))
        reset(id)
    }

    private func reset(_ id: UInt32) {
        var out = output(capacity: 13)
        Self.rstStream(id, code: 0x8, into: &out)  // CANCEL
        pendingOutput = out
    }

    /// One setting of the server's, checked.
    private func apply(_ parameter: UInt16, _ value: UInt32) throws(ConnectionError) {
        switch parameter {
        case 0x2:
            guard value <= 1 else { throw .protocolError("SETTINGS_ENABLE_PUSH of \(value)") }
        case 0x3:
            peerMaximumStreams = Int(value)
        case 0x1:
            // The server's decoder table changed: the next block empties the table and sets it
            // to what the server keeps, up to this side's largest. The same value again (a
            // server that sends all its settings each time) changes nothing.
            guard Int(value) != serverTableSize else { break }
            serverTableSize = Int(value)
            if settingsReceived { tableSizeUpdate = min(Int(value), HPACKEncoderTable.largest) }
        case 0x5:
            guard (16_384...16_777_215).contains(value) else { throw .protocolError("SETTINGS_MAX_FRAME_SIZE of \(value)") }
            peerMaximumFrame = Int(value)
        default:
            // The header list's size (advisory) and unknown settings.
            break
        }
    }

    /// The streams' send window set to `value` (`SETTINGS_INITIAL_WINDOW_SIZE`), each open
    /// stream's moved by the difference; whether it grew.
    private func setInitialWindow(_ value: UInt32) throws(ConnectionError) -> Bool {
        guard value <= UInt32(Int32.max) else { throw .flowControl("SETTINGS_INITIAL_WINDOW_SIZE of \(value)") }
        let delta = Int(value) - peerInitialWindow
        peerInitialWindow = Int(value)
        guard delta != 0 else { return false }
        let now = eventLoop?.now ?? .now()
        if now - windowSettingsSince > .seconds(60) {
            windowSettingsSince = now
            windowSettings = 0
        }
        windowSettings += 1
        guard windowSettings <= Self.maximumWindowSettings else {
            // ENHANCE_YOUR_CALM
            throw ConnectionError(code: 0xB, reason: "the streams' window changed more than \(Self.maximumWindowSettings) times in a minute")
        }
        for index in streams.indices {
            streams.values[index].sendWindow += delta
            guard streams.values[index].sendWindow <= Int(Int32.max) else { throw .flowControl("a stream's window past 2^31-1") }
            // A body its own window held goes into the queue, for `sendBlocked`.
            if streams.values[index].unsent != nil, !streams.values[index].isBlocked, streams.values[index].sendWindow > 0 {
                enqueue(streams.keys[index], at: index)
            }
        }
        return delta > 0
    }

    /// An acknowledgement (of SETTINGS, of a PING). While the channel cannot write, the
    /// server is not reading: past `maximumUnwritten` of them, the connection ends
    /// (ENHANCE_YOUR_CALM), as NIOHTTP2 bounded its buffered control frames.
    private func control(_ type: UInt8, flags: UInt8, payload: ByteBuffer? = nil) throws(ConnectionError) {
        if unwritableSince != nil {
            unwrittenControlFrames += 1
            guard unwrittenControlFrames <= Self.maximumUnwritten else {
                throw ConnectionError(code: 0xB, reason: "more than \(Self.maximumUnwritten) control frames to answer while the server reads nothing")
            }
        }
        var payload = payload ?? ByteBuffer()
        var out = output(capacity: 9 + payload.readableBytes)
        Self.frameHeader(length: payload.readableBytes, type: type, flags: flags, stream: 0, into: &out)
        out.writeBuffer(&payload)
        pendingOutput = out
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            unwritableSince = nil
            unwrittenControlFrames = 0
            openWaiting()
            flushOutput(context: context)
        } else if unwritableSince == nil {
            unwritableSince = context.eventLoop.now
        }
        context.fireChannelWritabilityChanged()
    }

    /// Strips a padded frame's padding.
    private static func unpad(_ payload: inout ByteBuffer, flags: UInt8) throws(ConnectionError) {
        guard flags & Frame.padded != 0 else { return }
        guard let padding = payload.readInteger(as: UInt8.self), Int(padding) <= payload.readableBytes else {
            throw .protocolError("padding longer than its frame")
        }
        payload.moveWriterIndex(to: payload.writerIndex - Int(padding))
    }

    /// An error code's name (RFC 9113, section 7), or its number.
    static func errorName(_ code: UInt32) -> String {
        let names = [
            "NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR", "SETTINGS_TIMEOUT", "STREAM_CLOSED", "FRAME_SIZE_ERROR",
            "REFUSED_STREAM", "CANCEL", "COMPRESSION_ERROR", "CONNECT_ERROR", "ENHANCE_YOUR_CALM", "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED",
        ]
        return code < names.count ? names[Int(code)] : "error \(code)"
    }
}

/// HPACK's literal header fields without indexing (RFC 7541, section 6.2.2), and no Huffman
/// coding: what a client that keeps no dynamic table sends.
/// The server's HPACK decoder table as this side's encoder fills it (RFC 7541, 2.3.2 and 4):
/// the fields added, newest last, within the size the server allows.
struct HPACKEncoderTable {
    /// The most this side uses, whatever the server allows.
    static let largest = 4_096

    private var entries: [(name: String, value: String)] = []
    private(set) var size = 0
    private(set) var maximumSize = 0
    /// Moves at each addition and reset: an encoding made at another may not hold.
    private(set) var generation = 0

    static func entrySize(name: String, value: String) -> Int { name.utf8.count + value.utf8.count + 32 }

    /// The index of `name: value` in the table (62 for the newest), if it is there. Compared
    /// byte for byte: `String`'s `==` takes canonically equivalent text as equal, and the
    /// server would read the entry's bytes, not the request's.
    func index(name: String, value: String) -> Int? {
        for position in entries.indices.reversed()
        where entries[position].value.utf8.elementsEqual(value.utf8) && entries[position].name.utf8.elementsEqual(name.utf8) {
            return 62 + entries.count - 1 - position
        }
        return nil
    }

    /// Adds an entry, first evicting the oldest until it fits (section 4.4). Only entries of at
    /// most half the table are added, so one large field cannot empty it.
    private mutating func add(name: String, value: String) {
        let entrySize = Self.entrySize(name: name, value: value)
        guard entrySize * 2 <= maximumSize else { return }
        var evicted = 0
        while size + entrySize > maximumSize {
            size -= Self.entrySize(name: entries[evicted].name, value: entries[evicted].value)
            evicted += 1
        }
        if evicted > 0 { entries.removeFirst(evicted) }
        entries.append((name, value))
        size += entrySize
        generation += 1
    }

    /// Empties the table and sets its size, as a size update of 0 and then `maximumSize` does.
    mutating func reset(maximumSize: Int) {
        entries.removeAll(keepingCapacity: true)
        size = 0
        self.maximumSize = maximumSize
        generation += 1
    }

    /// Writes one field. With `indexing`: an index when the table has it, else a literal that
    /// adds it (when it fits in half the table). Without, or when it does not fit, a literal the
    /// table does not keep; a request's own fields are not even looked up, so what one tenant
    /// sends never shows, by its length, what another's batch put in the table (RFC 7541,
    /// 7.1). `nameIndex` is its name's entry in the static table, when it has one.
    mutating func encode(name: String, nameIndex: Int = 0, value: String, indexing: Bool, into out: inout ByteBuffer) {
        if indexing, let index = index(name: name, value: value) {
            HPACKLiteral.integer(index, prefixBits: 7, first: 0x80, into: &out)
        } else if indexing, Self.entrySize(name: name, value: value) * 2 <= maximumSize {
            HPACKLiteral.integer(nameIndex, prefixBits: 6, first: 0x40, into: &out)
            if nameIndex == 0 { HPACKLiteral.string(name, into: &out) }
            HPACKLiteral.string(value, into: &out)
            add(name: name, value: value)
        } else if nameIndex > 0 {
            HPACKLiteral.field(nameIndex: nameIndex, value: value, into: &out)
        } else {
            HPACKLiteral.field(name: name, value: value, into: &out)
        }
    }
}

enum HPACKLiteral {
    /// A field whose name is the static table's entry `nameIndex`.
    static func field(nameIndex: Int, value: String, into out: inout ByteBuffer) {
        integer(nameIndex, prefixBits: 4, first: 0x00, into: &out)
        string(value, into: &out)
    }

    /// A field with its name written out.
    static func field(name: String, value: String, into out: inout ByteBuffer) {
        out.writeInteger(UInt8(0x00))
        string(name, into: &out)
        string(value, into: &out)
    }

    static func string(_ text: String, into out: inout ByteBuffer) {
        integer(text.utf8.count, prefixBits: 7, first: 0x00, into: &out)
        out.writeString(text)
    }

    /// An integer in a prefix of `prefixBits` bits of a byte whose other bits are `first`
    /// (RFC 7541, section 5.1).
    static func integer(_ value: Int, prefixBits: Int, first: UInt8, into out: inout ByteBuffer) {
        let maximum = (1 << prefixBits) - 1
        guard value >= maximum else {
            out.writeInteger(first | UInt8(value))
            return
        }
        out.writeInteger(first | UInt8(maximum))
        var rest = value - maximum
        while rest >= 128 {
            out.writeInteger(UInt8(rest & 0x7F) | 0x80)
            rest >>= 7
        }
        out.writeInteger(UInt8(rest))
    }
}
