import Synchronization

/// A graceful shutdown as the PNS client sees it. A worker binds its own to `current` while
/// it delivers; once stopped, the requests of a batch that still wait for a place in flight
/// (`PNSHTTPClient`'s `maximumInFlight`) are not sent and answer `PNSAnswer.stopped`, to be
/// handed back. Those already sent are answered as usual. So a worker's shutdown waits for
/// what is in flight, not for a whole window of targets to go out.
public final class SendingStop: Sendable {
    private let stopped = Atomic(false)

    public init() {}

    public var isStopped: Bool { stopped.load(ordering: .relaxed) }

    public func stop() { stopped.store(true, ordering: .relaxed) }

    /// The stop of the deliveries this task makes; nil where nobody binds one.
    @TaskLocal public static var current: SendingStop?

    /// Whether the current task's deliveries are to stop. Read after a wait, not per request.
    static var now: Bool { current?.isStopped ?? false }

    /// The transport's answer to a request that was not sent because its sender stopped.
    struct NotSent: Error, CustomStringConvertible {
        var description: String { "not sent: stopping" }
    }
}
