import NIOCore

/// The receive window of an HTTP/2 connection read frame by frame (the workers' own
/// connection, and the simulator's on NIOHTTP2, which manages windows only for stream
/// channels): opened wide at the start, topped up as DATA is consumed.
public struct HTTP2ConnectionWindow {
    public static let size = 1 << 24
    private var consumed = 0

    public init() {}

    /// Adds a DATA frame's bytes to a stream's body and counts them against the window. The
    /// bytes are copied: a slice would keep the whole buffer of the read alive with the body.
    public mutating func receive(_ bytes: inout ByteBuffer, into body: inout ByteBuffer?) {
        consumed += bytes.readableBytes
        if body == nil { body = ByteBufferAllocator().buffer(capacity: bytes.readableBytes) }
        body!.writeBuffer(&bytes)
    }

    /// Counts the bytes of a DATA frame that is dropped (its stream is gone) against the window.
    public mutating func discard(_ bytes: Int) { consumed += bytes }

    /// The increment of the WINDOW_UPDATE to send after a read, once a sixteenth of the window
    /// was consumed.
    public mutating func increment() -> Int? {
        guard consumed > Self.size / 16 else { return nil }
        defer { consumed = 0 }
        return consumed
    }
}
