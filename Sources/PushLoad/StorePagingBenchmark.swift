import Foundation
import Logging
import PushModel
import PushStore
import Synchronization

/// Seeds a store with registrations carrying tags from a fixed distribution, then pages
/// through tag expressions the way the dispatcher will, and measures targets per second.
public struct StorePagingBenchmark: Sendable {
    public struct Options: Sendable {
        public var registrations = 1_000_000
        public var pageSize = 1_000
        public var location: StoreLocation
        public var expressions = ["Sports", "Sports && !Politics", "Sports || Music || Weather", "(Sports || Music) && !Politics && lang:en"]
        /// Seconds of each upsert phase (new installations, then the same ones again); 0 skips them.
        public var upsertSeconds = 10.0
        /// The store holds `registrations` from an earlier run already: nothing is seeded.
        public var seeded = false
        /// Upserts in flight at once, as an ingress's requests would be.
        public var upsertConcurrency = 32
        /// Installations seeded (after the upsert phases, through the same upserts) and then
        /// listed page by page with the installation queries; 0 skips them.
        public var installations = 0
        public var installationFilters = ["(all)", "Sports", "platform=apns", "Sports && !Politics"]

        public init(location: StoreLocation) {
            self.location = location
        }
    }

    /// One expression paged twice: as delivery candidates, the columns a delivery needs (what
    /// the dispatcher reads), and as whole registrations (what the hub API lists).
    public struct Figure: Sendable {
        public var expression: String
        public var targets: Int
        public var seconds: Double
        public var registrationSeconds: Double
        public var targetsPerSecond: Double { Double(targets) / seconds }
        public var registrationsPerSecond: Double { Double(targets) / registrationSeconds }
    }

    /// Installation upserts into the seeded store, as the hub API makes them.
    public struct UpsertFigure: Sendable {
        public var phase: String
        public var upserts: Int
        public var seconds: Double
        public var p50: Double
        public var p99: Double
        public var upsertsPerSecond: Double { Double(upserts) / seconds }
    }

    public let options: Options
    let logger: Logger

    public init(options: Options, logger: Logger) {
        self.options = options
        self.logger = logger
    }

    /// The tags of registration `index`: Sports on half, Politics on a third, Music on a
    /// quarter, Weather on a tenth, and one of five languages.
    static func tags(_ index: Int) -> [String] {
        var tags = ["lang:\(["en", "de", "fr", "ja", "es"][index % 5])", "username:user\(index)"]
        if index % 2 == 0 { tags.append("Sports") }
        if index % 3 == 0 { tags.append("Politics") }
        if index % 4 == 1 { tags.append("Music") }
        if index % 10 == 7 { tags.append("Weather") }
        return tags
    }

    /// Listing installations by a filter.
    public struct ListingFigure: Sendable {
        public var filter: String
        public var installations: Int
        public var seconds: Double
        public var installationsPerSecond: Double { Double(installations) / seconds }
    }

    public func run(progress: (String) -> Void) async throws -> (
        seedSeconds: Double, figures: [Figure], upserts: [UpsertFigure], listings: [ListingFigure]
    ) {
        let store = try await options.location.open(logger: logger)
        let hub = "bench"
        let seedStart = ContinuousClock.now
        let batch = 10_000
        let now = Date()
        for start in stride(from: 0, to: options.registrations, by: batch) where !options.seeded {
            let registrations = (start..<min(start + batch, options.registrations)).map { index in
                Registration(
                    registrationId: "r\(index)", hub: hub, format: [.apple, .fcmv1, .windows][index % 3],
                    handle: String(format: "%064x", index), tags: Self.tags(index), updatedAt: now)
            }
            try await store.importRegistrations(registrations)
            if (start / batch) % 10 == 9 { progress("seeded \(start + batch) registrations") }
        }
        // PostgreSQL's estimates, which pick the driving tags, as its autovacuum would bring
        // them up to date after such an import (a seeded store's are from its seeding).
        if !options.seeded { try await (store as? SQLRegistrationStore)?.refreshStatistics() }
        let seedSeconds = (ContinuousClock.now - seedStart).seconds
        var figures: [Figure] = []
        for text in options.expressions {
            let query = RegistrationQuery.tagExpression(try TagExpression.parse(text))
            var start = ContinuousClock.now
            var cursor: RegistrationCursor?
            var targets = 0
            repeat {
                let page = try await store.deliveryCandidates(hub: hub, matching: query, reaching: nil, after: cursor, limit: options.pageSize)
                targets += page.candidates.count
                cursor = page.next
            } while cursor != nil
            let seconds = (ContinuousClock.now - start).seconds
            start = ContinuousClock.now
            var registrations = 0
            repeat {
                let page = try await store.registrations(hub: hub, matching: query, after: cursor, limit: options.pageSize)
                registrations += page.registrations.count
                cursor = page.next
            } while cursor != nil
            guard registrations == targets else {
                throw BenchmarkError(message: "\(text): \(targets) delivery candidates but \(registrations) registrations")
            }
            let figure = Figure(expression: text, targets: targets, seconds: seconds, registrationSeconds: (ContinuousClock.now - start).seconds)
            progress(
                "\(text): \(targets) targets in \(String(format: "%.2f", figure.seconds)) s as candidates, "
                    + "\(String(format: "%.2f", figure.registrationSeconds)) s as registrations")
            figures.append(figure)
        }
        var upserts: [UpsertFigure] = []
        if options.upsertSeconds > 0 {
            let created = try await upsertPhase("new installations", store: store, hub: hub, startingAt: 0)
            progress("new installations: \(created.upserts) at \(Int(created.upsertsPerSecond))/s, p99 \(Int(created.p99 * 1000)) ms")
            let updated = try await upsertPhase("the same installations again", store: store, hub: hub, startingAt: 0, limit: created.upserts)
            progress("updates: \(updated.upserts) at \(Int(updated.upsertsPerSecond))/s, p99 \(Int(updated.p99 * 1000)) ms")
            upserts = [created, updated]
        }
        var listings: [ListingFigure] = []
        if options.installations > 0 {
            let seeding = ContinuousClock.now
            let next = NextIndex(0)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<options.upsertConcurrency {
                    group.addTask {
                        while case let index = next.take(), index < options.installations {
                            _ = try await store.upsertInstallation(Self.installation(index), hub: "listing")
                        }
                    }
                }
                try await group.waitForAll()
            }
            progress("seeded \(options.installations) installations in \(String(format: "%.1f", (ContinuousClock.now - seeding).seconds)) s")
            try await (store as? SQLRegistrationStore)?.refreshStatistics()
            for text in options.installationFilters {
                var filter = InstallationFilter()
                if text.hasPrefix("platform=") {
                    filter.platform = Installation.InstallationPlatform(rawValue: String(text.dropFirst("platform=".count)))
                } else if text != "(all)" {
                    filter.tags = try TagExpression.parse(text)
                }
                let start = ContinuousClock.now
                var cursor: InstallationCursor?
                var found = 0
                repeat {
                    let page = try await store.installations(hub: "listing", matching: filter, after: cursor, limit: options.pageSize)
                    found += page.documents.count
                    cursor = page.next
                } while cursor != nil
                let figure = ListingFigure(filter: text, installations: found, seconds: (ContinuousClock.now - start).seconds)
                progress("installations \(text): \(found) in \(String(format: "%.2f", figure.seconds)) s")
                listings.append(figure)
            }
        }
        await store.close()
        return (seedSeconds, figures, upserts, listings)
    }

    /// Installation `index` of the upserts and the listing: the registrations' tags but the
    /// user's own.
    static func installation(_ index: Int) -> Installation {
        Installation(
            installationId: "i\(index)", userId: "user\(index)", platform: [.apns, .fcmv1, .wns][index % 3],
            pushChannel: String(format: "%064x", index + 1 << 40), tags: tags(index).filter { !$0.hasPrefix("username:") })
    }

    /// `upsertConcurrency` writers upserting installations `i0, i1, …` (wrapping at `limit`)
    /// with three tags each, for `upsertSeconds`.
    private func upsertPhase(_ phase: String, store: any RegistrationStore, hub: String, startingAt first: Int, limit: Int = .max) async throws
        -> UpsertFigure
    {
        let deadline = ContinuousClock.now + .milliseconds(Int(options.upsertSeconds * 1000))
        let next = NextIndex(first)
        let start = ContinuousClock.now
        let latencies = try await withThrowingTaskGroup(of: [Double].self) { group in
            for _ in 0..<options.upsertConcurrency {
                group.addTask {
                    var latencies: [Double] = []
                    while ContinuousClock.now < deadline {
                        let index = next.take() % limit
                        let installation = Self.installation(index)
                        let began = ContinuousClock.now
                        _ = try await store.upsertInstallation(installation, hub: hub)
                        latencies.append((ContinuousClock.now - began).seconds)
                    }
                    return latencies
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }.sorted()
        }
        let seconds = (ContinuousClock.now - start).seconds
        func percentile(_ p: Double) -> Double { latencies.isEmpty ? 0 : latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))] }
        return UpsertFigure(phase: phase, upserts: latencies.count, seconds: seconds, p50: percentile(0.5), p99: percentile(0.99))
    }
}

/// A counter the upsert writers share.
private final class NextIndex: Sendable {
    private let value: Mutex<Int>

    init(_ first: Int) { value = Mutex(first) }

    func take() -> Int {
        value.withLock { value in
            value += 1
            return value - 1
        }
    }
}
