import NIOCore

/// Gathers the bytes written between two flushes into one buffer, so that TLS below seals one
/// record for many HTTP/2 frames: under the simulator's NIOHTTP2Handler, which writes each
/// frame on its own (a DATA frame as its 9-byte header and its payload), where NIOSSL seals
/// each write it is given as a record of its own: a push was three records to seal and, at the
/// other end, three to open, each with its own 29 bytes of framing. (The workers' HTTP/2
/// connection, `HTTP2ClientConnection`, gathers its frames in one buffer itself.)
///
/// A lone write between flushes goes on as it is; a file region goes on in its place in the
/// order, and so does a write of `limit` bytes or more. Gathered bytes are written on at most
/// every `limit` bytes, so the buffer stays under twice the limit; a write's promise completes with the write it was gathered into.
public final class WriteCoalescer: ChannelOutboundHandler, RemovableChannelHandler {
    public typealias OutboundIn = IOData
    public typealias OutboundOut = IOData

    /// Most bytes gathered before they are written on (still unflushed).
    public static let limit = 64 * 1024

    private var first: ByteBuffer?
    private var gathered: ByteBuffer?
    private var promises: [EventLoopPromise<Void>] = []

    public init() {}

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .byteBuffer(var buffer) = unwrapOutboundIn(data), buffer.readableBytes < Self.limit else {
            // A file region, or a write as large as the limit: on as it is, after what was
            // gathered (not copied, and the buffer stays within the limit).
            writeGathered(context: context)
            context.write(data, promise: promise)
            return
        }
        if let promise { promises.append(promise) }
        if gathered != nil {
            gathered!.writeBuffer(&buffer)
        } else if var lone = first {
            // A second write: both go into a buffer of their own (the first one's storage may
            // be its writer's, to use again).
            first = nil
            var joined = context.channel.allocator.buffer(capacity: max(4096, lone.readableBytes + buffer.readableBytes))
            joined.writeBuffer(&lone)
            joined.writeBuffer(&buffer)
            gathered = joined
        } else {
            first = buffer
        }
        if (gathered?.readableBytes ?? 0) >= Self.limit { writeGathered(context: context) }
    }

    public func flush(context: ChannelHandlerContext) {
        writeGathered(context: context)
        context.flush()
    }

    public func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if mode == .all {
            // Writes not flushed fail with the close, as the channel fails its own.
            let failed = promises
            first = nil
            gathered = nil
            promises.removeAll()
            for each in failed { each.fail(ChannelError.ioOnClosedChannel) }
        } else {
            writeGathered(context: context)
        }
        context.close(mode: mode, promise: promise)
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        writeGathered(context: context)
    }

    /// Writes on what was gathered, with one promise for the writes in it.
    private func writeGathered(context: ChannelHandlerContext) {
        guard let buffer = gathered ?? first else { return }
        gathered = nil
        first = nil
        let promise: EventLoopPromise<Void>?
        switch promises.count {
        case 0: promise = nil
        case 1: promise = promises[0]
        default:
            let combined = context.eventLoop.makePromise(of: Void.self)
            for each in promises { combined.futureResult.cascade(to: each) }
            promise = combined
        }
        promises.removeAll(keepingCapacity: true)
        context.write(wrapOutboundOut(.byteBuffer(buffer)), promise: promise)
    }
}
