import Synchronization

/// A graceful shutdown as the PNS client sees it. A worker binds its own to `current` while
/// it delivers, and `PNSHTTPClient.sendAll` keeps it with the batch. Once stopped, the batch's
/// requests not yet written are not sent and answer `PNSAnswer.stopped`, to be handed back:
/// those waiting for a place in flight (`maximumInFlight`), read each time the batch takes
/// places, and those waiting in a connection for the server's streams; FCM's pushes not yet
/// admitted under its rate limit and Web Push's not yet encrypted never become requests. Those
/// already written are answered as usual. So a worker's shutdown waits for what is on the
/// wire, not for a whole window of targets to go out.
public final class SendingStop: Sendable {
    private let stopped = Atomic(false)

    public init() {}

    public var isStopped: Bool { stopped.load(ordering: .relaxed) }

    public func stop() { stopped.store(true, ordering: .relaxed) }

    /// The stop of the deliveries this task makes; nil where nobody binds one.
    @TaskLocal public static var current: SendingStop?

    /// The transport's answer to a request that was not sent because its sender stopped.
    struct NotSent: Error, CustomStringConvertible {
        var description: String { "not sent: stopping" }
    }
}
