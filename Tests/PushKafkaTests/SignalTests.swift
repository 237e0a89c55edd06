import Foundation
import PushKafka
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Signals the process handles must not reach the embedded cluster's thread: librdkafka's
/// mock cluster gives up when its poll(2) is interrupted, and every client of it then waits for
/// ever (seen in a CI run). Its thread inherits the signal mask of the thread that made it, so
/// PushKafka makes it with every signal blocked.
@Suite("Signals and librdkafka's threads")
struct SignalTests {
    /// The ids of this process's threads named `name`.
    static func threads(named name: String) -> [pid_t] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.compactMap { task in
            let comm = (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
            return comm == name ? pid_t(task) : nil
        }
    }

    /// glibc's tgkill(2) wrapper (Swift's Glibc module does not import it): a signal to one thread.
    static let tgkill: @convention(c) (pid_t, pid_t, Int32) -> Int32 = {
        unsafeBitCast(dlsym(nil, "tgkill")!, to: (@convention(c) (pid_t, pid_t, Int32) -> Int32).self)
    }()

    @Test("the embedded cluster keeps serving after its thread is sent handled signals")
    func signalsDoNotStopTheCluster() async throws {
        // A handler (not SIG_IGN) is what makes a blocking call return EINTR. SIGPROF is one the
        // Swift runtime's threads do not block, and nothing else here uses it.
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in }
        sigemptyset(&action.sa_mask)
        var previous = sigaction()
        sigaction(SIGPROF, &action, &previous)
        defer { sigaction(SIGPROF, &previous, nil) }

        let fixture = try KafkaFixture(brokers: 1, partitions: 1)
        let producer = try fixture.producer(deliveryTimeout: .seconds(10))
        try await producer.send(fixture.records(1)[0])
        let mocks = Self.threads(named: "rdk:mock")
        #expect(!mocks.isEmpty, "the embedded cluster's thread is named rdk:mock")
        for _ in 0..<20 {
            for thread in mocks { _ = Self.tgkill(getpid(), thread, SIGPROF) }
            try await Task.sleep(for: .milliseconds(5))
        }
        // Still serving: sends are acknowledged.
        try await producer.sendAllAcknowledged(fixture.records(10))
        await producer.shutdown()
    }
}
