import NIOCore
import NIOPosix

/// Runs tasks on the event loops of `group`: a job woken on one of them (a request read, an
/// answer arrived) runs on that loop's thread, after what the loop is doing, and a job woken
/// anywhere else runs on the next loop. A task that reads from and writes to channels of these
/// loops then stays on their threads instead of being handed to Swift's pool and back for
/// each step. `pushhub load` uses it, with a group of one loop for its connections (the
/// ingress's requests were tried on their loops too, and cost it more: docs/benchmarks.md). What runs here must not block: a blocking call holds up every
/// channel of its loop. A job enqueued on a loop that has shut down is dropped by NIO and its
/// task never resumes: the group must outlive every task that prefers this executor.
public final class EventLoopTaskExecutor: TaskExecutor {
    private let group: any EventLoopGroup
    private let loops: [any EventLoop]

    public init(_ group: any EventLoopGroup) {
        self.group = group
        loops = Array(group.makeIterator())
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let loop =
            MultiThreadedEventLoopGroup.currentEventLoop.flatMap { current in loops.first { $0 === current } } ?? group.next()
        loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
