import Logging
import PushOps
import ServiceLifecycle
import Synchronization
import Testing

@Suite("Process lifecycle", .timeLimit(.minutes(1)))
struct ProcessLifecycleTests {
    /// A service that ignores graceful shutdown, as one retrying against a Kafka that is gone
    /// would, and ends only when cancelled.
    struct Stubborn: Service {
        let cancelled: Flag
        func run() async throws {
            while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(20)) }
            cancelled.value.store(true, ordering: .relaxed)
        }
    }

    final class Flag: Sendable { let value = Atomic(false) }

    @Test("a service that ignores graceful shutdown is cancelled once the cap has passed, and the group ends")
    func shutdownCap() async throws {
        let flag = Flag()
        let logger = Logger(label: "pushhub.tests") { _ in SwiftLogNoOpLogHandler() }
        let group = ProcessLifecycle.group(
            [.init(service: Stubborn(cancelled: flag))], signals: false, maximumShutdown: .milliseconds(500), logger: logger)
        let running = Task { try await group.run() }
        try await Task.sleep(for: .milliseconds(200))
        let stopping = ContinuousClock.now
        await group.triggerGracefulShutdown()
        _ = try? await running.value
        let took = ContinuousClock.now - stopping
        let cancelled = flag.value.load(ordering: .relaxed)
        #expect(cancelled, "the stubborn service was cancelled")
        // Not before the cap; that it ends at all is the point (without the cap it never would,
        // and the suite's time limit fails the test), so no upper bound on a loaded machine.
        #expect(took >= .milliseconds(450), "ended \(took) after the shutdown began")
    }
}
