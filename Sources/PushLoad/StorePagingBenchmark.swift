import Foundation
import Logging
import PushModel
import PushStore

/// Seeds a store with registrations carrying tags from a fixed distribution, then pages
/// through tag expressions the way the dispatcher will, and measures targets per second.
public struct StorePagingBenchmark: Sendable {
    public struct Options: Sendable {
        public var registrations = 1_000_000
        public var pageSize = 1_000
        public var location: StoreLocation
        public var expressions = ["Sports", "Sports && !Politics", "Sports || Music || Weather", "(Sports || Music) && !Politics && lang:en"]

        public init(location: StoreLocation) {
            self.location = location
        }
    }

    public struct Figure: Sendable {
        public var expression: String
        public var targets: Int
        public var seconds: Double
        public var targetsPerSecond: Double { Double(targets) / seconds }
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

    public func run(progress: (String) -> Void) async throws -> (seedSeconds: Double, figures: [Figure]) {
        let store = try await options.location.open(logger: logger)
        let hub = "bench"
        let seedStart = ContinuousClock.now
        let batch = 10_000
        let now = Date()
        for start in stride(from: 0, to: options.registrations, by: batch) {
            let registrations = (start..<min(start + batch, options.registrations)).map { index in
                Registration(
                    registrationId: "r\(index)", hub: hub, format: [.apple, .fcmv1, .windows][index % 3],
                    handle: String(format: "%064x", index), tags: Self.tags(index), updatedAt: now)
            }
            try await store.importRegistrations(registrations)
            if (start / batch) % 10 == 9 { progress("seeded \(start + batch) registrations") }
        }
        let seedSeconds = (ContinuousClock.now - seedStart).seconds
        var figures: [Figure] = []
        for text in options.expressions {
            let expression = try TagExpression.parse(text)
            let start = ContinuousClock.now
            var cursor: RegistrationCursor?
            var targets = 0
            repeat {
                let page = try await store.registrations(hub: hub, matching: .tagExpression(expression), after: cursor, limit: options.pageSize)
                targets += page.registrations.count
                cursor = page.next
            } while cursor != nil
            let figure = Figure(expression: text, targets: targets, seconds: (ContinuousClock.now - start).seconds)
            progress("\(text): \(targets) targets in \(String(format: "%.2f", figure.seconds)) s")
            figures.append(figure)
        }
        await store.close()
        return (seedSeconds, figures)
    }
}
