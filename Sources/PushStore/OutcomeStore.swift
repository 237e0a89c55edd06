import Crypto
import Foundation
import PushModel

/// Per-notification outcomes, kept beside the registrations.
public protocol OutcomeStore: Sendable {
    /// Notes an accepted notification (state Enqueued) that must end by `deadline`. With
    /// `keep`, the request itself is kept in the same transaction until the notification ends,
    /// so `claimUnfinished` can publish it again.
    ///
    /// With `dispatched` (targets per platform, for a send whose audience was resolved as it
    /// was accepted), its dispatch summary is recorded in the same transaction, as
    /// `recordOutcomes` records one: the send is Processing, or NoTargetFound when it has none.
    func recordEnqueued(_ request: SendRequest, deadline: Date, keep: Bool, dispatched: [Platform: Int]?, now: Date) async throws
    /// Resolves a send's audience with `resolve` and notes the send Enqueued with what it found,
    /// in one transaction: the store `resolve` is given reads in that transaction. (On SQLite
    /// it is the writer's, whose page cache holds what the last writes touched; a reader's is
    /// emptied by every commit of another connection, and read again from the file.) With
    /// targets, the send is recorded as with `dispatched`; with nil (an audience too large to
    /// resolve here), as without. Returns what `resolve` returned; when it throws, nothing is
    /// recorded and its error is thrown.
    func recordEnqueued(
        _ request: SendRequest, deadline: Date, keep: Bool, now: Date,
        resolving resolve: @escaping @Sendable (any RegistrationStore) async throws -> [Platform: [DeliveryBatch.Target]]?
    ) async throws -> [Platform: [DeliveryBatch.Target]]?
    /// Forgets a notification that could not be queued after all, and its kept request: one
    /// still Enqueued, or with `resolved` (recorded with its dispatch summary, none of its
    /// batches queued) one with no results, with its summary.
    func forgetEnqueued(hub: String, notificationId: String, resolved: Bool) async throws
    /// Claims up to `limit` kept requests of notifications that have not ended and have not
    /// progressed for `grace`, published fewer than `maximumPublishes` times, the last time
    /// more than `grace` ago, doubling after each publish up to 16 × `grace`. Their publish
    /// time becomes `now`, so of several ingress replicas one claims each.
    func claimUnfinished(now: Date, grace: TimeInterval, maximumPublishes: Int, limit: Int) async throws -> [SendRequest]
    /// Ends as Abandoned up to `limit` notifications more than `grace` past their deadline
    /// (`abandonAfter` after they were first seen when they have none) that have not
    /// progressed for `grace`. Their unreported targets count as expired; results arriving
    /// later change nothing. Scheduled sends not yet released are left alone.
    func abandonStalled(now: Date, grace: TimeInterval, abandonAfter: TimeInterval, limit: Int) async throws -> [AbandonedSend]
    /// Deletes up to `limit` counted targets of a send that ended with more than its ending
    /// deleted, in one transaction; false when no such send was left.
    func sweepEndedTargets(limit: Int) async throws -> Bool
    /// Applies dispatch summaries (the first one of a notification counts) and batches of
    /// results (each target counts once, however its results are batched), all in one
    /// transaction; says for each batch, in order, whether anything in it was new.
    func recordOutcomes(_ batches: [ResultBatch], now: Date) async throws -> [Bool]
    func notification(hub: String, id: String) async throws -> NotificationOutcome?
    /// A dead handle: its registration is deleted; an installation's registrations are deleted
    /// and the installation marked `pushChannelExpired` until its push channel is replaced.
    /// With `handle`, only while the registration still holds that handle.
    func pruneInvalidHandle(hub: String, registrationId: String, handle: String?) async throws
    /// The targets of a notification of `hub` that did not end in success, in target order
    /// after `after`; none for a notification of another hub.
    func failedTargets(hub: String, notificationId: String, after: String?, limit: Int) async throws -> [FailedTarget]
    /// The handles of `hub` pruned because their push service called them invalid, since
    /// `since`, in the order they were recorded, after the one numbered `after`.
    func prunedHandles(hub: String, since: Date, after: Int64?, limit: Int) async throws -> [PrunedHandle]
    /// Deletes what is past its time: idempotency keys older than `keys`, dispatch notes
    /// older than `dispatches`, error details older than a week, feedback older than a month,
    /// registration ids issued more than a day ago and never used, rich payloads older than a
    /// week, and registrations (with their installations) past their `ExpirationTime`.
    func sweepExpired(now: Date, keys: TimeInterval, dispatches: TimeInterval) async throws
    /// Deletes up to `limit` sends that ended before `endedBefore` (in the order they ended,
    /// within each ended state), in one transaction, each with its counts and its schedule;
    /// says how many it deleted. Their outcomes are unknown after that. Their
    /// error details and the hub's feedback go by age (`sweepExpired`).
    func sweepEndedSends(endedBefore: Date, limit: Int) async throws -> Int
}

/// A target that did not end in success, as its result said.
public struct FailedTarget: Sendable, Equatable {
    /// The target's key in its notification (registration id, or platform and handle).
    public var target: String
    public var platform: Platform?
    public var result: DeliveryResult
    /// When its result was recorded.
    public var at: Date

    public init(target: String, platform: Platform?, result: DeliveryResult, at: Date) {
        self.target = target
        self.platform = platform
        self.result = result
        self.at = at
    }
}

/// A handle pruned because its push service called it invalid.
public struct PrunedHandle: Sendable, Equatable {
    /// Its place in the hub's feedback, for paging.
    public var sequence: Int64
    public var platform: Platform?
    public var handle: String
    public var registrationId: String
    /// The send that found it dead.
    public var notificationId: String
    public var pnsStatus: Int?
    public var pnsReason: String?
    public var prunedAt: Date

    public init(
        sequence: Int64, platform: Platform?, handle: String, registrationId: String, notificationId: String, pnsStatus: Int?, pnsReason: String?,
        prunedAt: Date
    ) {
        self.sequence = sequence
        self.platform = platform
        self.handle = handle
        self.registrationId = registrationId
        self.notificationId = notificationId
        self.pnsStatus = pnsStatus
        self.pnsReason = pnsReason
        self.prunedAt = prunedAt
    }
}

extension OutcomeStore {
    /// Forgets a notification still Enqueued that could not be queued after all.
    public func forgetEnqueued(hub: String, notificationId: String) async throws {
        try await forgetEnqueued(hub: hub, notificationId: notificationId, resolved: false)
    }

    /// Notes an accepted notification whose audience the dispatcher resolves.
    public func recordEnqueued(_ request: SendRequest, deadline: Date, keep: Bool, now: Date) async throws {
        try await recordEnqueued(request, deadline: deadline, keep: keep, dispatched: nil, now: now)
    }

    /// A dead handle, whatever handle its registration holds now.
    public func pruneInvalidHandle(hub: String, registrationId: String) async throws {
        try await pruneInvalidHandle(hub: hub, registrationId: registrationId, handle: nil)
    }

    /// Applies one dispatch summary or batch of results; false when nothing in it was new.
    @discardableResult
    public func recordOutcomes(_ batch: ResultBatch, now: Date) async throws -> Bool {
        try await recordOutcomes([batch], now: now).first ?? false
    }
}

/// A notification PushHub gave up.
public struct AbandonedSend: Sendable, Equatable {
    public var notificationId: String
    public var hub: String
    public var reason: String
    /// Targets without a result, now counted as expired.
    public var unreported: Int

    public init(notificationId: String, hub: String, reason: String, unreported: Int) {
        self.notificationId = notificationId
        self.hub = hub
        self.reason = reason
        self.unreported = unreported
    }
}

extension ResultBatch {
    /// One key per result, naming its target: each target of a notification counts once. A
    /// rejected record's result names none, so it is keyed by its batch and place.
    public var targetKeys: [String] {
        let platform = platform?.rawValue ?? "-"
        var batchReceipt: String?
        return (results ?? []).enumerated().map { index, result in
            if result.registrationId == nil, result.handle == nil {
                if batchReceipt == nil { batchReceipt = receipt }
                return "\(platform)\t#\(batchReceipt!)\t\(index)"
            }
            return Self.targetKey(platform: platform, registrationId: result.registrationId, handle: result.handle)
        }
    }

    /// The key of a target with a registration or handle, as `targetKeys` names it.
    /// A key over 512 bytes is its platform and the SHA-256 of the whole: the key is part of
    /// an index's key, and PostgreSQL refuses an index row over 2,704 bytes (a registration's
    /// id and a handle can each be a few hundred to 2,048 bytes).
    public static func targetKey(platform: String, registrationId: String?, handle: String?) -> String {
        let key = "\(platform)\t\(registrationId ?? "")\t\(handle ?? "")"
        guard key.utf8.count > 512 else { return key }
        return "\(platform)\t#" + Hex.lowercase(SHA256.hash(data: Data(key.utf8)))
    }

    /// Identifies a batch's content: the dispatch summary, or a digest of its targets.
    public var receipt: String {
        if dispatched != nil { return "dispatch" }
        var hasher = SHA256()
        hasher.update(data: Data((platform?.rawValue ?? "-").utf8))
        for result in (results ?? []).sorted(by: { ($0.registrationId ?? $0.handle ?? "") < ($1.registrationId ?? $1.handle ?? "") }) {
            hasher.update(
                data: Data("\n\(result.registrationId ?? "")\t\(result.handle ?? "")\t\(result.outcome == .rejected ? "rejected" : "")".utf8))
        }
        return Hex.lowercase(hasher.finalize())
    }
}
