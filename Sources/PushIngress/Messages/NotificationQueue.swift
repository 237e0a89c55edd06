import Foundation
import Logging
import PushDispatcher
import PushModel
import PushStore

/// Puts an accepted send on its way: notes it Enqueued (so a GET right after the answer finds
/// it, and a send that stalls is given up by its deadline), keeping the request itself in the
/// same transaction when sends are republished, then publishes it; when publishing failed, it
/// forgets both again. Shared by the hub API and the app-backend API.
///
/// A send whose audience is small (direct handles, a few installations, a tag expression that
/// matches less than a page, as a send to one user does) is resolved here, as the dispatcher
/// would: its dispatch summary is recorded with its Enqueued row and its DeliveryBatches go
/// straight to the platforms' topics, so it makes no `pushhub.requests` record and no dispatcher
/// hop. Its summary is still published to `pushhub.results` for whoever reads outcomes there;
/// a send with no target ends NoTargetFound with that summary alone.
struct NotificationQueue: Sendable {
    let publisher: any NotificationPublisher
    let outcomes: (any OutcomeStore)?
    let recovery: SendRecoverySettings
    let now: @Sendable () -> Date
    /// Where small audiences are resolved; nil sends everything through the dispatcher.
    var audiences: AudienceResolver?
    var logger = Logger(label: "pushhub.ingress.queue")

    /// The send could not be queued; the caller answers 503 with Retry-After.
    struct NotQueued: Error {}

    /// Returns the request as published (with its `expiresAt`).
    @discardableResult
    func enqueue(_ request: SendRequest) async throws -> SendRequest {
        let now = now()
        let request = recovery.stamped(request, acceptedAt: now)
        if let targets = await smallAudience(of: request, now: now) {
            let dispatched = Dictionary(uniqueKeysWithValues: Platform.allCases.map { ($0, targets[$0]?.count ?? 0) })
            try await outcomes?.recordEnqueued(request, deadline: request.expiresAt!, keep: recovery.republish, dispatched: dispatched, now: now)
            do {
                try await publisher.publish(request, resolved: targets)
            } catch {
                try? await outcomes?.forgetEnqueued(hub: request.hub, notificationId: request.notificationId)
                throw NotQueued()
            }
            return request
        }
        try await outcomes?.recordEnqueued(request, deadline: request.expiresAt!, keep: recovery.republish, now: now)
        do {
            try await publisher.publish(request)
        } catch {
            try? await outcomes?.forgetEnqueued(hub: request.hub, notificationId: request.notificationId)
            throw NotQueued()
        }
        return request
    }

    /// The targets of a small audience; nil for a large one, or when the store could not say
    /// (the dispatcher then resolves it, with its retries).
    private func smallAudience(of request: SendRequest, now: Date) async -> [Platform: [DeliveryBatch.Target]]? {
        guard let audiences else { return nil }
        do {
            return try await audiences.smallAudience(
                of: request, expression: try request.validatedExpression(), hub: request.hub, limit: DeliveryBatch.maximumTargets, now: now)
        } catch {
            logger.debug(
                "audience not resolved as the send was accepted; the dispatcher resolves it",
                metadata: ["pushhub.notification_id": "\(request.notificationId)", "pushhub.error": "\(error)"])
            return nil
        }
    }
}
