import Foundation

/// Where a notification is, as `GET /{hub}/messages/{id}` reports it.
public enum NotificationState: String, Codable, Sendable, CaseIterable {
    case enqueued = "Enqueued"
    case processing = "Processing"
    /// Every dispatched target has a result.
    case completed = "Completed"
    case noTargetFound = "NoTargetFound"
    /// Expired before delivery, refused as a request, or given up after no progress past its
    /// expiry (with the reason).
    case abandoned = "Abandoned"
    case cancelled = "Cancelled"

    /// Completed, NoTargetFound, Abandoned or Cancelled: nothing more changes it.
    public var hasEnded: Bool { ![.enqueued, .processing].contains(self) }

    /// What a notification's tallies so far make of it. Ended states stay as they are; a
    /// rejected request is Abandoned; a summary of zero is NoTargetFound; once every dispatched
    /// target has a result it is Completed, or Abandoned when every result was `expired`;
    /// before that, Processing as soon as anything arrived.
    public func settled(by tally: Tally) -> NotificationState {
        guard !hasEnded else { return self }
        if tally.rejected > 0 { return .abandoned }
        if tally.expected == 0 { return .noTargetFound }
        if let expected = tally.expected, tally.received >= expected {
            return tally.expired == tally.received ? .abandoned : .completed
        }
        return tally.expected != nil || tally.received > 0 ? .processing : self
    }

    /// The counts a notification's state follows from.
    public struct Tally: Sendable, Equatable {
        /// Targets the dispatch summary announced; nil before it arrived.
        public var expected: Int?
        public var received: Int
        public var expired: Int
        public var rejected: Int

        public init(expected: Int?, received: Int = 0, expired: Int = 0, rejected: Int = 0) {
            self.expected = expected
            self.received = received
            self.expired = expired
            self.rejected = rejected
        }
    }
}

/// What became of one notification: its state, times, and outcome counts per platform.
public struct NotificationOutcome: Sendable, Equatable {
    public var notificationId: String
    public var hub: String
    public var state: NotificationState
    public var enqueuedAt: Date
    public var startedAt: Date?
    public var endedAt: Date?
    /// Targets dispatched, once the dispatch summary arrived.
    public var expectedTargets: Int?
    public var counts: [Platform: [Outcome: Int]]
    /// Why PushHub gave the notification up, when it did (state Abandoned).
    public var reason: String?
    /// What the send asked for, when the ingress accepted it (not for a SendRequest produced
    /// straight into Kafka): its format, tag expression and body.
    public var format: NotificationFormat?
    public var tags: String?
    public var body: String?
    /// The platforms its dispatch summary sent to.
    public var dispatched: [Platform]?
    /// Whom it was for, when the ingress accepted it.
    public var audience: AudienceKind?

    public enum AudienceKind: String, Sendable {
        case tags, broadcast, installations, handles
    }

    public init(
        notificationId: String, hub: String, state: NotificationState, enqueuedAt: Date, startedAt: Date? = nil, endedAt: Date? = nil,
        expectedTargets: Int? = nil, counts: [Platform: [Outcome: Int]] = [:], reason: String? = nil, format: NotificationFormat? = nil,
        tags: String? = nil, body: String? = nil, dispatched: [Platform]? = nil, audience: AudienceKind? = nil
    ) {
        self.audience = audience
        self.format = format
        self.tags = tags
        self.body = body
        self.dispatched = dispatched
        self.notificationId = notificationId
        self.hub = hub
        self.state = state
        self.enqueuedAt = enqueuedAt
        self.startedAt = startedAt
        self.endedAt = endedAt
        self.expectedTargets = expectedTargets
        self.counts = counts
        self.reason = reason
    }
}
