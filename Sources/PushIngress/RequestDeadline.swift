import NIOCore
import NIOHTTPTypes

/// Closes a connection whose request does not arrive whole in time: from its head, the idle
/// time-out, plus the time its body's bytes so far would take at `minimumRate`. The idle
/// time-out alone is reset by every part of a body, so a client sending a byte of body every
/// few seconds held its connection (and the request's buffer) for ever: a thousand such
/// connections, at about 40 bytes a second, took every place the ingress has. A large upload
/// at any real speed earns its time; the rest of a body drained after an early answer is
/// bounded alike. Only requests are timed: a handler may take as long as it takes to answer.
final class RequestDeadline: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart

    /// The slowest body allowed past the first `allowance`, in bytes a second (Apache's
    /// `mod_reqtimeout` takes 500): holding the ingress's 1,000 connections costs a client 4 MB
    /// a second, and a server slowed by load still earns the time it takes to read.
    static let minimumRate: Int64 = 4 * 1024

    let allowance: TimeAmount
    private var started: NIODeadline?
    private var received: Int64 = 0
    private var timer: Scheduled<Void>?

    init(allowance: TimeAmount) {
        self.allowance = allowance
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            started = .now()
            received = 0
            schedule(context, at: started! + allowance)
        case .body(let part):
            received += Int64(part.readableBytes)
        case .end:
            started = nil
            timer?.cancel()
            timer = nil
        }
        context.fireChannelRead(data)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        context.fireChannelInactive()
    }

    /// The time the request has, with `received` bytes of body so far.
    private func deadline(from started: NIODeadline) -> NIODeadline {
        // In whole seconds and the rest, at most a year's: nanoseconds of gigabytes overflow.
        let (seconds, rest) = received.quotientAndRemainder(dividingBy: Self.minimumRate)
        return started + allowance + .seconds(min(seconds, 365 * 86_400)) + .nanoseconds(rest * 1_000_000_000 / Self.minimumRate)
    }

    private func schedule(_ context: ChannelHandlerContext, at deadline: NIODeadline) {
        timer?.cancel()
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(deadline: deadline) {
            let (handler, context) = loopBound.value
            handler.check(context)
        }
    }

    private func check(_ context: ChannelHandlerContext) {
        timer = nil
        guard let started else { return }
        let due = deadline(from: started)
        if due <= .now() {
            context.close(promise: nil)
        } else {
            schedule(context, at: due)
        }
    }
}
