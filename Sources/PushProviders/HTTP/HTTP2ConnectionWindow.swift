import NIOCore
import NIOHTTP2

/// The receive window of an HTTP/2 connection read frame by frame (NIOHTTP2 manages windows
/// only for stream channels): opened wide at the start, topped up as DATA is consumed.
public struct HTTP2ConnectionWindow {
    public static let size = 1 << 24
    private var consumed = 0

    public init() {}

    /// The WINDOW_UPDATE that opens the connection's window (65,535 bytes by default) at the start.
    public static var opening: HTTP2Frame {
        HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: size - 65_535))
    }

    /// Adds a DATA frame's bytes to a stream's body and counts them against the window. The
    /// bytes are copied: a slice would keep the whole buffer of the read alive with the body.
    public mutating func receive(_ bytes: inout ByteBuffer, into body: inout ByteBuffer?) {
        consumed += bytes.readableBytes
        if body == nil { body = ByteBufferAllocator().buffer(capacity: bytes.readableBytes) }
        body!.writeBuffer(&bytes)
    }

    /// Counts the bytes of a DATA frame that is dropped (its stream is gone) against the window.
    public mutating func discard(_ bytes: Int) { consumed += bytes }

    /// The WINDOW_UPDATE to send after a read, once a sixteenth of the window was consumed.
    public mutating func update() -> HTTP2Frame? {
        increment().map { HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: $0)) }
    }

    /// The increment of that WINDOW_UPDATE, for a connection that writes its own frames.
    public mutating func increment() -> Int? {
        guard consumed > Self.size / 16 else { return nil }
        defer { consumed = 0 }
        return consumed
    }
}
