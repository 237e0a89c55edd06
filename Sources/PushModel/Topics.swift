/// The names of PushHub's Kafka topics under a configurable prefix (default `pushhub.`).
public struct PushTopics: Sendable, Hashable {
    public static let defaultPrefix = "pushhub."

    /// The names are made when the prefix is set, not each time one is asked for: a
    /// single-user send asks for its deliveries topic several times, and each name made anew
    /// was two allocations.
    public var prefix: String { didSet { names = Names(prefix) } }
    private var names: Names

    public init(prefix: String = PushTopics.defaultPrefix) {
        self.prefix = prefix
        names = Names(prefix)
    }

    /// SendRequests, keyed by notificationId.
    public var requests: String { names.requests }
    /// ResultBatches, keyed by notificationId.
    public var results: String { names.results }
    /// Records no consumer could process, with `pushhub-error` and `pushhub-source-topic` headers.
    public var deadLetter: String { names.deadLetter }

    /// DeliveryBatches for one platform's worker.
    public func deliveries(_ platform: Platform) -> String { names.deliveries[platform.ordinal] }

    /// Every platform's deliveries topic, in `Platform.allCases` order.
    public var allDeliveries: [String] { names.deliveries }

    /// Every topic PushHub uses.
    public var all: [String] { [requests] + allDeliveries + [results, deadLetter] }

    private struct Names: Sendable, Hashable {
        let requests: String
        let results: String
        let deadLetter: String
        let deliveries: [String]

        init(_ prefix: String) {
            requests = prefix + "requests"
            results = prefix + "results"
            deadLetter = prefix + "deadletter"
            deliveries = Platform.allCases.map { prefix + "deliveries." + $0.rawValue }
        }
    }
}

/// Header names on dead-letter records.
public enum DeadLetterHeader {
    public static let error = "pushhub-error"
    public static let sourceTopic = "pushhub-source-topic"
}
