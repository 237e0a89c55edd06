import Foundation
import PushProviders
import Testing

@Suite("Resolving Web Push hosts")
struct HostResolverTests {
    @Test("a resolver that never answers costs its time-out once, then fails at once from the cache; answers are cached")
    func hangingResolver() async throws {
        let resolver = HostResolver(failureLifetime: .seconds(30), timeout: .milliseconds(300), threads: 1) { host in
            if host == "tarpit.example" { Thread.sleep(forTimeInterval: 60) }
            return ["203.0.113.7"]
        }
        let clock = ContinuousClock()
        let first = clock.now
        await #expect(throws: (any Error).self) { try await resolver.addresses(of: "tarpit.example") }
        #expect(clock.now - first < .seconds(20), "the caller waited \(clock.now - first), not the lookup's 60 s (margins for a loaded machine)")
        let second = clock.now
        await #expect(throws: (any Error).self) { try await resolver.addresses(of: "tarpit.example") }
        #expect(clock.now - second < .seconds(5), "the failure was remembered, not looked up again for 60 s")
        // The one lookup thread is still blocked in the tarpit: other names time out too, but
        // the callers are never held longer than the time-out.
        let third = clock.now
        _ = try? await resolver.addresses(of: "other.example")
        #expect(clock.now - third < .seconds(20))
    }

    @Test("real names resolve through getaddrinfo; address literals are their own answer")
    func literals() async throws {
        let resolver = HostResolver()
        #expect(try await resolver.addresses(of: "127.0.0.1") == ["127.0.0.1"])
        #expect(try await resolver.addresses(of: "[::1]") == ["::1"])
    }
}
