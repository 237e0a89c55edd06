import Foundation
import PushProviders
import Synchronization
import Testing

@Suite("Resolving Web Push hosts", .timeLimit(.minutes(2)))
struct HostResolverTests {
    /// A lookup that blocks its thread until released, and counts its calls.
    final class Tarpit: Sendable {
        let calls = Mutex<[String]>([])
        let released = DispatchSemaphore(value: 0)

        func lookup(_ host: String) -> [String] {
            calls.withLock { $0.append(host) }
            if host == "tarpit.example" { released.wait() }
            return ["203.0.113.7"]
        }
    }

    @Test("a lookup that never answers fails its callers by the time-out, once looked up; the failure is remembered")
    func hangingResolver() async throws {
        let tarpit = Tarpit()
        defer { tarpit.released.signal() }
        let resolver = HostResolver(failureLifetime: .seconds(600), timeout: .milliseconds(300), threads: 1) { tarpit.lookup($0) }
        // The lookup is still blocked when these return: only the time-out can end them.
        await #expect(throws: (any Error).self) { try await resolver.addresses(of: "tarpit.example") }
        await #expect(throws: (any Error).self) { try await resolver.addresses(of: "tarpit.example") }
        #expect(tarpit.calls.withLock { $0 } == ["tarpit.example"], "the second caller got the remembered failure")
        // The one lookup thread is taken: another name times out too, rather than waiting behind it.
        await #expect(throws: (any Error).self) { try await resolver.addresses(of: "other.example") }
    }

    @Test("answers are remembered; address literals are their own answer through getaddrinfo")
    func answers() async throws {
        let tarpit = Tarpit()
        let counting = HostResolver { tarpit.lookup($0) }
        #expect(try await counting.addresses(of: "push.example") == ["203.0.113.7"])
        #expect(try await counting.addresses(of: "push.example") == ["203.0.113.7"])
        #expect(tarpit.calls.withLock { $0 } == ["push.example"])
        let resolver = HostResolver()
        #expect(try await resolver.addresses(of: "127.0.0.1") == ["127.0.0.1"])
        #expect(try await resolver.addresses(of: "[::1]") == ["::1"])
    }

    @Test("a name whose lookup times out keeps the addresses it last had: names that never answer do not fail a service that did")
    func staleAnswerKept() async throws {
        let answered = Mutex(false)
        let released = DispatchSemaphore(value: 0)
        defer { for _ in 0..<4 { released.signal() } }
        // The first lookup answers; every one after it hangs, as when the lookup threads are
        // taken by names that never answer.
        let resolver = HostResolver(lifetime: .milliseconds(100), timeout: .milliseconds(300), threads: 2) { _ in
            if answered.withLock({ $0 }) { released.wait() }
            answered.withLock { $0 = true }
            return ["203.0.113.7"]
        }
        #expect(try await resolver.addresses(of: "fcm.example") == ["203.0.113.7"])
        try await Task.sleep(for: .milliseconds(150))
        #expect(try await resolver.addresses(of: "fcm.example") == ["203.0.113.7"], "the last answer, after the lookup timed out")
        // Not looked up again meanwhile: no 300 ms wait for each push.
        let started = ContinuousClock.now
        #expect(try await resolver.addresses(of: "fcm.example") == ["203.0.113.7"])
        #expect(ContinuousClock.now - started < .milliseconds(250))
        // A name never answered has nothing to keep.
        await #expect(throws: (any Error).self) { try await resolver.addresses(of: "never.example") }
    }

    @Test("lookups that never return count until they do: past four a thread, a new name is refused at once rather than queued")
    func hangingLookupsBounded() async throws {
        let tarpit = Tarpit()
        defer { for _ in 0..<8 { tarpit.released.signal() } }
        let resolver = HostResolver(timeout: .milliseconds(200), threads: 1) { host in
            tarpit.calls.withLock { $0.append(host) }
            tarpit.released.wait()
            return ["203.0.113.7"]
        }
        for index in 0..<4 { await #expect(throws: (any Error).self) { try await resolver.addresses(of: "hang-\(index).example") } }
        let started = ContinuousClock.now
        do {
            _ = try await resolver.addresses(of: "fifth.example")
            Issue.record("a fifth name was answered")
        } catch {
            #expect("\(error)".contains("too many lookups at once"), "\(error)")
        }
        #expect(ContinuousClock.now - started < .milliseconds(150), "refused, not queued behind the four")
    }
}
