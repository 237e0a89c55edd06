/// The names of PushHub's Kafka topics under a configurable prefix (default `pushhub.`).
public struct PushTopics: Sendable, Hashable {
    public static let defaultPrefix = "pushhub."

    public var prefix: String

    public init(prefix: String = PushTopics.defaultPrefix) {
        self.prefix = prefix
    }

    /// SendRequests, keyed by notificationId.
    public var requests: String { prefix + "requests" }
    /// ResultBatches, keyed by notificationId.
    public var results: String { prefix + "results" }
    /// Records no consumer could process, with `pushhub-error` and `pushhub-source-topic` headers.
    public var deadLetter: String { prefix + "deadletter" }

    /// DeliveryBatches for one platform's worker.
    public func deliveries(_ platform: Platform) -> String { prefix + "deliveries." + platform.rawValue }

    /// Every topic PushHub uses.
    public var all: [String] { [requests] + Platform.allCases.map(deliveries) + [results, deadLetter] }
}

/// Header names on dead-letter records.
public enum DeadLetterHeader {
    public static let error = "pushhub-error"
    public static let sourceTopic = "pushhub-source-topic"
}
