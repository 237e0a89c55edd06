import Foundation
import Logging
import PushConfiguration
import PushModel
import PushStore
import ServiceLifecycle

/// Releases scheduled sends when they are due: each ingress replica runs one; the store's
/// claims make one replica publish each send, and take over sends a dead replica had claimed.
public final class ScheduledReleaser: Service, Sendable {
    let store: any ScheduleStore
    let publisher: any NotificationPublisher
    let claimant: String
    let interval: Duration
    let staleAfter: TimeInterval
    let recovery: SendRecoverySettings
    let logger: Logger

    public init(
        store: any ScheduleStore, publisher: any NotificationPublisher, claimant: String = UUID().uuidString,
        interval: Duration = .seconds(1), staleAfter: TimeInterval = 60,
        recovery: SendRecoverySettings = SendRecoverySettings(SendRecoveryConfiguration(), embeddedKafka: false), logger: Logger
    ) {
        self.recovery = recovery
        self.store = store
        self.publisher = publisher
        self.claimant = claimant
        self.interval = interval
        self.staleAfter = staleAfter
        self.logger = logger
    }

    public func run() async throws {
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            _ = await releaseDue(now: Date())
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: self.interval) }
        }
    }

    /// Publishes every due send it can claim; returns how many it published.
    public func releaseDue(now: Date) async -> Int {
        let claimed: [SendRequest]
        do {
            claimed = try await store.claimDueScheduled(now: now, claimant: claimant, limit: 100, staleAfter: staleAfter)
        } catch {
            logger.error("scheduled sends could not be claimed", metadata: ["pushhub.error": "\(error)"])
            return 0
        }
        var published = 0
        for request in claimed {
            do {
                // From here on it is an accepted send like any other: it expires `abandonAfter` from
                // its release, not its scheduling, and is kept for publishing again when sends are
                // republished.
                let released = recovery.stamped(request, acceptedAt: now)
                try await publisher.publish(released)
                try await store.markReleased(released, deadline: released.expiresAt!, keep: recovery.republish, now: now)
                published += 1
            } catch {
                // Left claimed: this or another replica takes it over once the claim is stale.
                logger.error(
                    "scheduled send not released, will retry",
                    metadata: ["pushhub.notification_id": "\(request.notificationId)", "pushhub.error": "\(error)"])
            }
        }
        return published
    }
}
