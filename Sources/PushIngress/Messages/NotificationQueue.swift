import PushModel
import PushStore

/// Puts an accepted send on its way: notes it Enqueued (so a GET right after the answer finds
/// it), publishes it, and forgets the note again when publishing failed. Shared by the hub
/// API and the app-backend API.
struct NotificationQueue: Sendable {
    let publisher: any NotificationPublisher
    let outcomes: (any OutcomeStore)?

    /// The send could not be queued; the caller answers 503 with Retry-After.
    struct NotQueued: Error {}

    func enqueue(_ request: SendRequest) async throws -> Void {
        try await outcomes?.recordEnqueued(hub: request.hub, notificationId: request.notificationId, at: request.enqueuedAt)
        do {
            try await publisher.publish(request)
        } catch {
            try? await outcomes?.forgetEnqueued(hub: request.hub, notificationId: request.notificationId)
            throw NotQueued()
        }
    }
}
