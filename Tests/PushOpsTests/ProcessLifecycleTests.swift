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

    final class Flag: Sendable {
        let value = Atomic(false)
        var isSet: Bool { value.load(ordering: .relaxed) }
    }

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

    /// On a graceful shutdown, waits (up to 5 s) for `other` to have seen it too, and says
    /// whether it did.
    struct Waiting: Service {
        let seen: Flag
        let other: Flag
        let met: Flag
        func run() async throws {
            try await gracefulShutdown()
            seen.value.store(true, ordering: .relaxed)
            let deadline = ContinuousClock.now + .seconds(5)
            while !other.value.load(ordering: .relaxed), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
            met.value.store(other.value.load(ordering: .relaxed), ordering: .relaxed)
        }
    }

    struct Failing: Service {
        struct Failure: Error {}
        func run() async throws {
            try await Task.sleep(for: .milliseconds(100))
            throw Failure()
        }
    }

    struct Returning: Service {
        func run() async throws { try await Task.sleep(for: .milliseconds(100)) }
    }

    @Test("services side by side: one graceful shutdown reaches them all at once, and they end together")
    func sideBySide() async throws {
        let logger = Logger(label: "pushhub.tests") { _ in SwiftLogNoOpLogHandler() }
        let (aSeen, bSeen, aMet, bMet) = (Flag(), Flag(), Flag(), Flag())
        let services: [any Service] = [Waiting(seen: aSeen, other: bSeen, met: aMet), Waiting(seen: bSeen, other: aSeen, met: bMet)]
        let group = ProcessLifecycle.group([.init(service: ConcurrentServices(services))], signals: false, logger: logger)
        let running = Task { try await group.run() }
        try await Task.sleep(for: .milliseconds(200))
        await group.triggerGracefulShutdown()
        try await running.value
        // One after the other, the second would see it only once the first had ended: the first
        // would wait its 5 s for it in vain.
        #expect(aMet.isSet, "the first saw the second stopping")
        #expect(bMet.isSet, "the second saw the first stopping")
    }

    @Test("services side by side: one that fails ends the others, and its error is thrown; one that returns ends them too")
    func sideBySideEnds() async throws {
        let logger = Logger(label: "pushhub.tests") { _ in SwiftLogNoOpLogHandler() }
        let cancelled = Flag()
        let failing = ProcessLifecycle.group(
            [.init(service: ConcurrentServices([Stubborn(cancelled: cancelled), Failing()]))], signals: false, logger: logger)
        await #expect(throws: Failing.Failure.self) { try await failing.run() }
        #expect(cancelled.isSet, "the other was cancelled")

        let cancelledToo = Flag()
        let returning = ConcurrentServices([Stubborn(cancelled: cancelledToo), Returning()])
        let ended = await #expect(throws: ConcurrentServices.Ended.self) { try await returning.run() }
        #expect(ended?.service == "Returning", "\(String(describing: ended))")
        #expect(cancelledToo.isSet, "the other was cancelled")
    }
}
