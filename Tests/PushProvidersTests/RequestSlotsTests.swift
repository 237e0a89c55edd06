import Synchronization
import Testing

@testable import PushProviders

@Suite("Request slots: waiters for several slots are woken once that many are free, in order")
struct RequestSlotsTests {
    /// What each waiter was given, by name, as they are woken.
    final class Woken: Sendable {
        let given = Mutex<[String: Int]>([:])
        func note(_ name: String, _ count: Int) { given.withLock { $0[name] = count } }
        var now: [String: Int] { given.withLock { $0 } }
    }

    /// Waits (at most 5 s) until `condition` holds of what was given.
    static func until(_ woken: Woken, _ condition: ([String: Int]) -> Bool) async throws {
        for _ in 0..<500 where !condition(woken.now) { try await Task.sleep(for: .milliseconds(10)) }
    }

    @Test("a waiter for three wakes at the third free slot with three; one for up to five takes what is free")
    func severalAtOnce() async throws {
        let slots = RequestSlots(8)
        #expect(slots.tryAcquire(upTo: 6) == 6)
        #expect(slots.tryAcquire(upTo: 6) == 2, "what is free, when less than asked for")
        #expect(slots.tryAcquire(upTo: 1) == 0)
        let woken = Woken()
        let first = Task { woken.note("first", await slots.acquire(atLeast: 3, upTo: 5)) }
        try await Task.sleep(for: .milliseconds(50))
        slots.release(2)
        try await Task.sleep(for: .milliseconds(50))
        #expect(woken.now.isEmpty, "two of three free: still waiting")
        slots.release()
        try await Self.until(woken) { $0["first"] != nil }
        #expect(woken.now["first"] == 3)
        await first.value
        // Five free: a waiter for at least two and up to four takes four; the last one is
        // left for a plain acquire.
        slots.release(5)
        #expect(await slots.acquire(atLeast: 2, upTo: 4) == 4)
        await slots.acquire()
        #expect(slots.tryAcquire(upTo: 1) == 0)
    }

    @Test("waiters are served in order: one for one waits behind one for four, and a need past the count is the count")
    func inOrder() async throws {
        let slots = RequestSlots(4)
        #expect(slots.tryAcquire(upTo: 4) == 4)
        let woken = Woken()
        let large = Task { woken.note("large", await slots.acquire(atLeast: 100, upTo: 100)) }
        try await Task.sleep(for: .milliseconds(50))
        let small = Task { woken.note("small", await slots.acquire(atLeast: 1, upTo: 1)) }
        try await Task.sleep(for: .milliseconds(50))
        slots.release()
        try await Task.sleep(for: .milliseconds(50))
        #expect(woken.now.isEmpty, "the first waiter needs all four; the second waits behind it")
        #expect(slots.tryAcquire(upTo: 1) == 0, "a free slot is not taken past the waiters")
        slots.release(3)
        try await Self.until(woken) { $0["large"] != nil }
        #expect(woken.now == ["large": 4])
        slots.release()
        try await Self.until(woken) { $0["small"] != nil }
        #expect(woken.now == ["large": 4, "small": 1])
        await large.value
        await small.value
    }
}
