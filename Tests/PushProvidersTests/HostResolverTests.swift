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
}
