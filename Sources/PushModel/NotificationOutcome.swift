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

    public init(
        notificationId: String, hub: String, state: NotificationState, enqueuedAt: Date, startedAt: Date? = nil, endedAt: Date? = nil,
        expectedTargets: Int? = nil, counts: [Platform: [Outcome: Int]] = [:], reason: String? = nil
    ) {
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
