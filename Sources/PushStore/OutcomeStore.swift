import Crypto
import Foundation
import PushModel

/// Per-notification outcomes, kept beside the registrations.
public protocol OutcomeStore: Sendable {
    /// Notes an accepted notification (state Enqueued) that must end by `deadline`. With
    /// `keep`, the request itself is kept in the same transaction until the notification ends,
    /// so `claimUnfinished` can publish it again.
    func recordEnqueued(_ request: SendRequest, deadline: Date, keep: Bool, now: Date) async throws
    /// Forgets a notification that could not be queued after all, and its kept request.
    func forgetEnqueued(hub: String, notificationId: String) async throws
    /// Claims up to `limit` kept requests of notifications that have not ended, were last
    /// published before `quietSince` and have not progressed since: their publish time becomes
    /// `now`, so of several ingress replicas one claims each.
    func claimUnfinished(now: Date, quietSince: Date, limit: Int) async throws -> [SendRequest]
    /// Ends as Abandoned up to `limit` notifications past their deadline (before
    /// `deadlineBefore`) that have not progressed since `quietSince`. Their unreported targets
    /// count as expired; results arriving later change nothing.
    func abandonStalled(now: Date, deadlineBefore: Date, quietSince: Date, limit: Int) async throws -> [AbandonedSend]
    /// Applies a dispatch summary or a batch of results, once per batch: a batch seen before
    /// (the same receipt) changes nothing and returns false.
    @discardableResult
    func recordOutcomes(_ batch: ResultBatch, now: Date) async throws -> Bool
    func notification(hub: String, id: String) async throws -> NotificationOutcome?
    /// A dead handle: its registration is deleted; an installation's registrations are deleted
    /// and the installation marked `pushChannelExpired` until its push channel is replaced.
    func pruneInvalidHandle(hub: String, registrationId: String) async throws
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
    /// Identifies a batch's content, so a batch delivered or published twice counts once.
    public var receipt: String {
        if dispatched != nil { return "dispatch" }
        var hasher = SHA256()
        hasher.update(data: Data((platform?.rawValue ?? "-").utf8))
        for result in (results ?? []).sorted(by: { ($0.registrationId ?? $0.handle ?? "") < ($1.registrationId ?? $1.handle ?? "") }) {
            hasher.update(data: Data("\n\(result.registrationId ?? "")\t\(result.handle ?? "")\t\(result.outcome == .rejected ? "rejected" : "")".utf8))
        }
        return hasher.finalize().map { String(format: "%02x", $0) }.joined()
    }
}
