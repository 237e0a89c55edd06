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
    /// The outcome store keeps the registrations `audiences` reads (one database): some
    /// audiences are read in the transaction that notes their send (`resolve`).
    var readsWhileNoting = false
    var logger = Logger(label: "pushhub.ingress.queue")
    /// Sends whose audience is being read on a reader as they are accepted (at most 32 at a
    /// time; the rest go to the dispatcher). Those read in the transaction that notes them
    /// take their turn in the writer with every other write.
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
        if let audiences, mayResolve(request, expression: expression) {
            switch try await resolve(request, expression: expression, with: audiences, now: now) {
            case .resolved(let targets):
                try await publish(request, resolved: targets)
                return request
            case .recorded:
                try await publish(request)
                return request
            case .unresolved: break
            }
        }
        try await outcomes?.recordEnqueued(request, deadline: request.expiresAt!, keep: recovery.republish, dispatched: nil, now: now)
        try await publish(request)
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
        try await outcomes?.recordEnqueued(
            request, deadline: request.expiresAt!, keep: false, dispatched: DeliveryBatch.counts(of: targets), now: now)
        try await publish(request, resolved: targets, sample: true)
        return request
    }

    /// Publishes a send noted Enqueued for the dispatcher; when it could not be, forgets it.
    private func publish(_ request: SendRequest) async throws {
        do {
            try await publisher.publish(request)
        } catch {
            try? await outcomes?.forgetEnqueued(hub: request.hub, notificationId: request.notificationId, resolved: false)
            throw NotQueued(notificationId: request.notificationId)
        }
    }

    /// Publishes the batches of a send noted Enqueued with its dispatch summary.
    private func publish(_ request: SendRequest, resolved targets: [Platform: [DeliveryBatch.Target]], sample: Bool = false) async throws {
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

    private enum Resolution {
        /// Its targets, the send noted Enqueued with them (when there is an outcome store).
        case resolved([Platform: [DeliveryBatch.Target]])
        /// Too large to resolve here: noted Enqueued, for the dispatcher.
        case recorded
        /// Not resolved (the store could not say, or the audience is too large); nothing noted.
        case unresolved
    }

    /// Reads a send's small audience and notes the send Enqueued with it (when there is an
    /// outcome store). Throws when the send could not be noted.
    ///
    /// When the outcome store keeps the registrations too (`readsWhileNoting`), a send to one
    /// tag, to installation ids or to handles is read in the transaction that notes it: its
    /// statements are few and always the same, so the writer's statement cache keeps them,
    /// and they are short. Others (tag expressions, whose statements vary) are read first, on
    /// a reader.
    private func resolve(_ request: SendRequest, expression: TagExpression?, with audiences: AudienceResolver, now: Date) async throws
        -> Resolution
    {
        let limit = DeliveryBatch.maximumTargets
        if let outcomes, readsWhileNoting, Self.readsFixedStatements(request, expression: expression) {
            do {
                let targets = try await outcomes.recordEnqueued(request, deadline: request.expiresAt!, keep: recovery.republish, now: now) {
                    registrations in
                    do {
                        return try await AudienceResolver(store: registrations).smallAudience(
                            of: request, expression: expression, hub: request.hub, limit: limit, now: now)
                    } catch {
                        throw Unresolved(underlying: error)
                    }
                }
                return targets.map(Resolution.resolved) ?? .recorded
            } catch let unresolved as Unresolved {
                notResolved(request, unresolved.underlying)
                return .unresolved
            }
        }
        guard resolving.enter() else { return .unresolved }
        let found: [Platform: [DeliveryBatch.Target]]?
        do {
            defer { resolving.leave() }
            found = try await audiences.smallAudience(of: request, expression: expression, hub: request.hub, limit: limit, now: now)
        } catch {
            notResolved(request, error)
            return .unresolved
        }
        // nil: too large, noted and published whole by the caller.
        guard let targets = found else { return .unresolved }
        try await outcomes?.recordEnqueued(
            request, deadline: request.expiresAt!, keep: recovery.republish, dispatched: DeliveryBatch.counts(of: targets), now: now)
        return .resolved(targets)
    }

    /// Whether reading `request`'s audience takes statements of a few fixed texts: one tag,
    /// installation ids, or direct handles (none).
    static func readsFixedStatements(_ request: SendRequest, expression: TagExpression?) -> Bool {
        switch request.audience {
        case .installationIds, .handles: true
        case .tags: if case .tag = expression { true } else { false }
        case .broadcast: false
        }
    }

    /// A resolution's failure, told apart from the write around it.
    private struct Unresolved: Error {
        var underlying: any Error
    }

    /// Whether `request`'s audience may be resolved as it is accepted. Not an expression with
    /// no tag every match carries (`!a`, a scan of the hub's registrations: the dispatcher's
    /// work, behind Kafka); not while the workers of a platform it can reach are far behind
    /// (the dispatcher waits for them).
    private func mayResolve(_ request: SendRequest, expression: TagExpression?) -> Bool {
        if case .broadcast = request.audience { return false }
        if let expression, expression.drivingTags == nil { return false }
        // Only the platforms it can reach: a native send to one, a template or direct
        // handles to any.
        let platforms: [Platform] =
            if case .handles(let handles) = request.audience { Array(Set(handles.map(\.platform))) } else {
                request.format.platform.map { [$0] } ?? Platform.allCases
            }
        return publisher.workersHaveRoom(on: platforms)
    }

    /// The store could not say: the dispatcher resolves the audience, with its retries.
    private func notResolved(_ request: SendRequest, _ error: any Error) {
        logger.debug(
            "audience not resolved as the send was accepted; the dispatcher resolves it",
            metadata: ["pushhub.notification_id": "\(request.notificationId)", "pushhub.error": "\(error)"])
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
