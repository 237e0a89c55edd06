import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import PushModel
import PushStore

/// `Idempotency-Key` on sends (`POST /{hub}/messages`, `$batch`, `/schedulednotifications`,
/// `/api/notifications`): a request repeated with the key within 24 h is answered as the first
/// was (same TrackingId and Location, `Idempotent-Replay: true`) and sends nothing; the key
/// with another request is refused, and while the first is still being accepted a repeat is
/// told to retry.
struct IdempotentSends: Sendable {
    let store: (any IdempotencyStore)?
    var now: @Sendable () -> Date = { Date() }
    var logger = Logger(label: "pushhub.ingress.idempotency")

    static let header = HTTPField.Name("Idempotency-Key")!
    static let replayHeader = HTTPField.Name("Idempotent-Replay")!
    static let window: TimeInterval = 24 * 3600
    /// A key claimed this long ago and never completed (its ingress went away) may be
    /// claimed again.
    static let pendingTimeout: TimeInterval = 120
    static let maximumKeyLength = 255

    enum Answer: Sendable {
        case sent(notificationId: String)
        case replay(notificationId: String, collection: String)
    }

    /// Why a keyed send was not taken, for the API to answer in its own shape.
    enum Refusal: Error, Equatable {
        /// 400: the key is empty, too long or not printable ASCII.
        case invalidKey(String)
        /// 422: the key was used with another request.
        case differentRequest
        /// 409 with Retry-After: the first request with the key is still being accepted.
        case inProgress
        /// 503: no store keeps keys.
        case unavailable

        var status: HTTPResponse.Status {
            switch self {
            case .invalidKey: .badRequest
            case .differentRequest: .unprocessableContent
            case .inProgress: .conflict
            case .unavailable: .serviceUnavailable
            }
        }

        var message: String {
            switch self {
            case .invalidKey(let message): message
            case .differentRequest: "Idempotency-Key: used within the last 24 h with a different request"
            case .inProgress: "Idempotency-Key: the first request with this key is still being accepted; try again"
            case .unavailable: "Idempotency-Key: keys need the store, which this ingress has not"
            }
        }

        /// Seconds to wait before trying again, when that helps.
        var retryAfter: Int? { self == .inProgress ? 1 : nil }
    }

    /// Runs `send` (which queues the send and returns its notification id) once per key in
    /// `scope`; without a key, simply runs it. `fingerprint` identifies the request (see
    /// `fingerprint(of:)`). `send` is given the notification id to send under when a retry must
    /// reuse one (nil: its own). A send that throws frees the key, so a retry may send; one
    /// the queue did not answer for certain leaves its id for the retry.
    func run(
        _ request: Request, scope: String, fingerprint: @autoclosure () -> String, collection: String, _ send: (String?) async throws -> String
    ) async throws -> Answer {
        // A send without a key pays for nothing here: its fingerprint (an encoding and a
        // digest of the whole request) is made only for a key.
        guard let key = request.headers[Self.header] else { return .sent(notificationId: try await send(nil)) }
        guard (1...Self.maximumKeyLength).contains(key.utf8.count), key.utf8.allSatisfy({ (0x20...0x7E).contains($0) }) else {
            throw Refusal.invalidKey("Idempotency-Key: must be 1 to \(Self.maximumKeyLength) printable ASCII characters")
        }
        guard let store else { throw Refusal.unavailable }
        switch try await store.claimIdempotencyKey(
            scope: scope, key: key, fingerprint: fingerprint(), now: now(), window: Self.window, pendingTimeout: Self.pendingTimeout)
        {
        case .claimed(let token, let reusing):
            let id: String
            do {
                id = try await send(reusing)
            } catch let notQueued as NotificationQueue.NotQueued where notQueued.kept {
                // Part of it went out and recovery finishes it: a retry must not send again.
                await complete(store, scope: scope, key: key, token: token, notificationId: notQueued.notificationId ?? "", collection: collection)
                throw notQueued
            } catch let notQueued as NotificationQueue.NotQueued {
                // Kafka may have written it though it did not say so: the retry sends under
                // the same id, which the dispatcher takes once.
                if let id = notQueued.notificationId {
                    try? await store.failIdempotencyKey(scope: scope, key: key, token: token, notificationId: id)
                } else {
                    try? await store.releaseIdempotencyKey(scope: scope, key: key, token: token)
                }
                throw notQueued
            } catch {
                try? await store.releaseIdempotencyKey(scope: scope, key: key, token: token)
                throw error
            }
            await complete(store, scope: scope, key: key, token: token, notificationId: id, collection: collection)
            return .sent(notificationId: id)
        case .replay(let id, let collection): return .replay(notificationId: id, collection: collection)
        case .differentRequest: throw Refusal.differentRequest
        case .inProgress: throw Refusal.inProgress
        }
    }

    /// Records what a keyed send answered. The send is queued already, so a store that fails
    /// here is tried three times, then logged: the answer is still the send's 201 (a retry
    /// after the key's time-out could then send again, the one case it can).
    private func complete(
        _ store: any IdempotencyStore, scope: String, key: String, token: String, notificationId: String, collection: String
    ) async {
        for attempt in 1...3 {
            do {
                if !(try await store.completeIdempotencyKey(
                    scope: scope, key: key, token: token, notificationId: notificationId, collection: collection))
                {
                    // Another request took the key over while this one was slow: both sent.
                    logger.error(
                        "an idempotency key was claimed again while its first request was being accepted; both were sent",
                        metadata: ["pushhub.notification_id": "\(notificationId)"])
                }
                return
            } catch {
                if attempt == 3 {
                    logger.error(
                        "an idempotency key's answer was not recorded",
                        metadata: ["pushhub.notification_id": "\(notificationId)", "pushhub.error": "\(error)"])
                } else {
                    try? await Task.sleep(for: .milliseconds(100 * attempt))
                }
            }
        }
    }

    /// What a send asks for, whatever its id and time: its format, audience, body and
    /// pass-through headers, and `extra` (a schedule time, the route).
    static func fingerprint(of request: SendRequest, extra: [String] = []) -> String {
        var request = request
        request.notificationId = ""
        request.enqueuedAt = Date(timeIntervalSince1970: 0)
        request.expiresAt = nil
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let encoded = (try? encoder.encode(request)) ?? Data(request.body.utf8)
        return fingerprint(parts: [String(decoding: encoded, as: UTF8.self)] + extra)
    }

    /// SHA-256 of the parts, each prefixed by its length.
    static func fingerprint(parts: [String]) -> String {
        var hash = SHA256()
        for part in parts {
            hash.update(data: Data("\(part.utf8.count):".utf8))
            hash.update(data: Data(part.utf8))
        }
        return hash.finalize().map { String(format: "%02x", $0) }.joined()
    }
}
