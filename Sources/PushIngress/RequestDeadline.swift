import NIOCore
import NIOHTTPTypes

/// Closes a connection whose client does not send its request in time: from the request's
/// head, the server may wait for its bytes the idle time-out, plus the time its body's bytes so
/// far would take at `minimumRate`. The idle time-out alone is reset by every part of a body, so
/// a client sending a byte of body every few seconds held its connection (and the request's
/// buffer) for ever: a thousand such connections, at about 40 bytes a second, took every place
/// the ingress has. Only the time the server waits for the client counts (a read asked for and
/// not yet answered): while the request's handler has not taken what came (a loaded machine,
/// a request waiting behind another), nothing is read and the clock stands. A large upload at
/// any real speed earns its time; the rest of a body drained after an early answer is bounded
/// alike. The answer is not timed: a handler may take as long as it takes.
final class RequestDeadline: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// The slowest body allowed past the first `allowance`, in bytes a second (Apache's
    /// `mod_reqtimeout` takes 500): holding the ingress's 1,000 connections costs a client 4 MB
    /// a second.
    static let minimumRate: Int64 = 4 * 1024

    let allowance: TimeAmount
    /// Between a request's head and its end.
    private var inRequest = false
    private var received: Int64 = 0
    /// How long the server has waited for this request's bytes, reads answered so far.
    private var waited: TimeAmount = .zero
    /// Since when a read is asked for and not answered.
    private var waitingSince: NIODeadline?
    private var timer: Scheduled<Void>?

    init(allowance: TimeAmount) {
        self.allowance = allowance
    }

    func read(context: ChannelHandlerContext) {
        if inRequest {
            if waitingSince == nil { waitingSince = .now() }
            // Timed from the first wait: a request that came whole in one read (nearly every
            // request, a send's among them) never schedules a timer.
            if timer == nil { schedule(context, in: allowed - waited) }
        }
        context.read()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if let since = waitingSince {
            waited = waited + (.now() - since)
            waitingSince = nil
        }
        switch unwrapInboundIn(data) {
        case .head:
            inRequest = true
            received = 0
            waited = .zero
        case .body(let part):
            received += Int64(part.readableBytes)
        case .end:
            inRequest = false
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

    /// The waiting the request may cost, with `received` bytes of body so far.
    private var allowed: TimeAmount {
        // In whole seconds and the rest, at most a year's: nanoseconds of gigabytes overflow.
        let (seconds, rest) = received.quotientAndRemainder(dividingBy: Self.minimumRate)
        return allowance + .seconds(min(seconds, 365 * 86_400)) + .nanoseconds(rest * 1_000_000_000 / Self.minimumRate)
    }

    private func schedule(_ context: ChannelHandlerContext, in delay: TimeAmount) {
        timer?.cancel()
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(in: delay) {
            let (handler, context) = loopBound.value
            handler.check(context)
        }
    }

    private func check(_ context: ChannelHandlerContext) {
        timer = nil
        guard inRequest else { return }
        let total = waited + (waitingSince.map { .now() - $0 } ?? .zero)
        let left = allowed - total
        if left <= .zero {
            context.close(promise: nil)
        } else {
            schedule(context, in: left)
        }
    }
}
