import Foundation
import PushModel
import PushStore

/// Puts an accepted send on its way: notes it Enqueued (so a GET right after the answer finds
/// it, and a send that stalls is given up by its deadline), keeping the request itself in the
/// same transaction when sends are republished, then publishes it; when publishing failed, it
/// forgets both again. Shared by the hub API and the app-backend API.
struct NotificationQueue: Sendable {
    let publisher: any NotificationPublisher
    let outcomes: (any OutcomeStore)?
    let recovery: SendRecoverySettings
    let now: @Sendable () -> Date

    /// The send could not be queued; the caller answers 503 with Retry-After.
    struct NotQueued: Error {}

    /// Returns the request as published (with its `expiresAt`).
    @discardableResult
    func enqueue(_ request: SendRequest) async throws -> SendRequest {
        let now = now()
        let request = recovery.stamped(request, acceptedAt: now)
        try await outcomes?.recordEnqueued(request, deadline: request.expiresAt!, keep: recovery.republish, now: now)
        do {
            try await publisher.publish(request)
        } catch {
            try? await outcomes?.forgetEnqueued(hub: request.hub, notificationId: request.notificationId)
            throw NotQueued()
        }
        return request
    }
}
