import Foundation
import Logging
import PushDispatcher
import PushModel
import PushStore
import Synchronization

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
    /// Sends whose audience is being read as they are accepted (at most 32 at a time).
    let resolving = InFlightLimit(32)

    /// The send could not be queued; the caller answers 503 with Retry-After. With `kept`,
    /// part of it went out and recovery finishes it: it stays accepted.
    struct NotQueued: Error {
        var kept = false
        /// The send's id.
        var notificationId: String?
    }

    /// Returns the request as published (with its `expiresAt`).
    @discardableResult
    /// `expression` is the request's tag expression as its checks parsed it.
    func enqueue(_ request: SendRequest, expression: TagExpression?) async throws -> SendRequest {
        let now = now()
        let request = recovery.stamped(request, acceptedAt: now)
        if let targets = await smallAudience(of: request, expression: expression, now: now) {
            try await publish(request, resolved: targets, now: now)
            return request
        }
        try await outcomes?.recordEnqueued(request, deadline: request.expiresAt!, keep: recovery.republish, now: now)
        do {
            try await publisher.publish(request)
        } catch {
            try? await outcomes?.forgetEnqueued(hub: request.hub, notificationId: request.notificationId)
            throw NotQueued(notificationId: request.notificationId)
        }
        return request
    }

    /// Queues a debug send's sample as a small audience is (noted Enqueued with its dispatch
    /// summary, its batches straight to the platforms' topics), but never as the request it
    /// came from, whose audience is larger: the request is not kept for recovery, and when
    /// only some batches went out, the others are not sent (their targets have no result).
    /// Returns the request as published.
    func enqueue(sample request: SendRequest, resolved targets: [Platform: [DeliveryBatch.Target]]) async throws -> SendRequest {
        let now = now()
        let request = recovery.stamped(request, acceptedAt: now)
        try await publish(request, resolved: targets, now: now, sample: true)
        return request
    }

    private func publish(_ request: SendRequest, resolved targets: [Platform: [DeliveryBatch.Target]], now: Date, sample: Bool = false) async throws {
        try await outcomes?.recordEnqueued(
            request, deadline: request.expiresAt!, keep: recovery.republish && !sample, dispatched: BatchBuilder.counts(of: targets), now: now)
        do {
            try await publisher.publish(request, resolved: targets, recorded: outcomes != nil)
        } catch let partly as PartlyPublished where sample {
            logger.warning(
                "some batches of a debug send were not queued; their devices have no result",
                metadata: ["pushhub.notification_id": "\(request.notificationId)", "pushhub.error": "\(partly.underlying)"])
        } catch let partly as PartlyPublished {
            // Some devices have it: the send is not forgotten, and the dispatcher publishes
            // it whole (a device reached twice counts once).
            logger.warning(
                "some batches of a send were not queued; the dispatcher publishes it again",
                metadata: [
                    "pushhub.notification_id": "\(request.notificationId)", "pushhub.batches": "\(partly.acknowledged)",
                    "pushhub.error": "\(partly.underlying)",
                ])
            do {
                try await publisher.publish(request)
            } catch {
                // Neither: 503, and the send stays, counting what went out, until
                // recovery publishes it again or its deadline ends it: it was accepted.
                throw NotQueued(kept: true, notificationId: request.notificationId)
            }
        } catch {
            try? await outcomes?.forgetEnqueued(hub: request.hub, notificationId: request.notificationId, resolved: true)
            throw NotQueued(notificationId: request.notificationId)
        }
    }

    /// The targets of a small audience; nil for a large one, or when the store could not say
    /// (the dispatcher then resolves it, with its retries).
    private func smallAudience(of request: SendRequest, expression: TagExpression?, now: Date) async -> [Platform: [DeliveryBatch.Target]]? {
        guard let audiences else { return nil }
        do {
            // An expression with no tag every match carries (`!a`) is a scan of the hub's
            // registrations: the dispatcher's work, behind Kafka, not a request's.
            if let expression, expression.drivingTags == nil { return nil }
            // Workers far behind: the dispatcher, which waits for them, takes the send.
            // Only the platforms it can reach: a native send to one, a template or direct
            // handles to any.
            let platforms: [Platform] =
                if case .handles(let handles) = request.audience { Array(Set(handles.map(\.platform))) } else {
                    request.format.platform.map { [$0] } ?? Platform.allCases
                }
            guard publisher.workersHaveRoom(on: platforms) else { return nil }
            // At most `resolving` sends read the store as they are accepted; the rest go to
            // the dispatcher.
            guard resolving.enter() else { return nil }
            defer { resolving.leave() }
            return try await audiences.smallAudience(
                of: request, expression: expression, hub: request.hub, limit: DeliveryBatch.maximumTargets, now: now)
        } catch {
            logger.debug(
                "audience not resolved as the send was accepted; the dispatcher resolves it",
                metadata: ["pushhub.notification_id": "\(request.notificationId)", "pushhub.error": "\(error)"])
            return nil
        }
    }
}

/// A count of work in flight with a ceiling: `enter` says no once it is reached.
final class InFlightLimit: Sendable {
    let maximum: Int
    private let count = Atomic<Int>(0)

    init(_ maximum: Int) { self.maximum = maximum }

    func enter() -> Bool {
        if count.wrappingAdd(1, ordering: .relaxed).newValue <= maximum { return true }
        count.wrappingSubtract(1, ordering: .relaxed)
        return false
    }

    func leave() { count.wrappingSubtract(1, ordering: .relaxed) }
}
