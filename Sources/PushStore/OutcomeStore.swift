import Crypto
import Foundation
import PushModel

/// Per-notification outcomes, kept beside the registrations.
public protocol OutcomeStore: Sendable {
    /// Notes a notification accepted at `enqueuedAt` (state Enqueued).
    func recordEnqueued(hub: String, notificationId: String, at enqueuedAt: Date) async throws
    /// Forgets a notification that could not be queued after all.
    func forgetEnqueued(hub: String, notificationId: String) async throws
    /// Applies a dispatch summary or a batch of results, once per batch: a batch seen before
    /// (the same receipt) changes nothing and returns false.
    @discardableResult
    func recordOutcomes(_ batch: ResultBatch, now: Date) async throws -> Bool
    func notification(hub: String, id: String) async throws -> NotificationOutcome?
    /// A dead handle: its registration is deleted; an installation's registrations are deleted
    /// and the installation marked `pushChannelExpired` until its push channel is replaced.
    func pruneInvalidHandle(hub: String, registrationId: String) async throws
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
