import Foundation
import HTTPTypes
import Hummingbird
import PushDispatcher
import PushModel

/// A debug send (`POST /{hub}/messages?test`, or `ServiceBusNotification-TestSend: true`), as
/// Azure's test send: the notification goes, through the workers and the PNS, to at most 10 of
/// the registrations it matches, and the answer waits for their results, up to `timeout`.
/// The answer is Azure's `NotificationOutcome`; `PushHub-Matched` says how many matched.
struct DebugSend: Sendable {
    let queue: NotificationQueue
    let audiences: AudienceResolver
    /// How long the answer waits for the PNS's results.
    let timeout: Duration
    /// Debug sends waiting for results at a time; more are answered 503.
    let waiting = InFlightLimit(8)

    static let sampleSize = 10
    /// Matches are counted up to this many, among at most `readLimit` registrations read;
    /// past either, the count says "at least".
    static let countLimit = 10_000
    static let readLimit = 50_000
    static let header = HTTPField.Name("ServiceBusNotification-TestSend")!
    static let matchedHeader = HTTPField.Name("PushHub-Matched")!

    /// Whether `request` asks for a debug send: `?test`, or Azure's header.
    static func isRequested(_ request: Request) -> Bool {
        isRequested(request, testParameter: request.uri.queryParameters.has("test"))
    }

    /// The same, where the caller parsed the query already and says whether it has `test`.
    static func isRequested(_ request: Request, testParameter: Bool) -> Bool {
        testParameter || request.headers[header]?.lowercased() == "true"
    }

    /// What came back for the sample, by target (registration id, or handle for direct sends).
    struct Answers: Sendable {
        var results: [String: (platform: Platform?, result: DeliveryResult)] = [:]
    }

    struct Sent: Sendable {
        let request: SendRequest
        let sample: AudienceSample
        let answers: Answers
    }

    /// Sends `request` to its sample and waits for the results; throws `NotQueued` when the
    /// send could not be queued, and `Busy` when too many debug sends wait already.
    func send(_ request: SendRequest, expression: TagExpression?) async throws -> Sent {
        guard waiting.enter() else { throw Busy() }
        defer { waiting.leave() }
        let sample = try await audiences.sample(
            of: request, expression: expression, hub: request.hub, picking: Self.sampleSize, countingUpTo: Self.countLimit,
            examining: Self.readLimit)
        guard let tail = try queue.publisher.resultsTail(of: request.notificationId) else {
            throw HubAPIError(.serviceUnavailable, "debug sends need Kafka's results topic, which this ingress does not read")
        }
        guard await tail.positioned(within: .seconds(10)) else {
            await tail.close()
            throw NotificationQueue.NotQueued()
        }
        let sent: SendRequest
        do {
            sent = try await queue.enqueue(sample: request, resolved: sample.targets)
        } catch {
            await tail.close()
            throw error
        }
        let expected = Set(sample.targets.values.joined().map { $0.registrationId ?? $0.handle })
        let (answers, _) = await tail.read(from: Answers(), within: expected.isEmpty ? .zero : timeout) { answers, batch in
            for result in batch.results ?? [] {
                guard let key = result.registrationId ?? result.handle, expected.contains(key) else { continue }
                answers.results[key] = (batch.platform, result)
            }
            return answers.results.count >= expected.count
        }
        return Sent(request: sent, sample: sample, answers: answers)
    }

    struct Busy: Error {}

    /// Azure's `NotificationOutcome`: the counts and a `RegistrationResult` per target, in the
    /// order its DataContract gives.
    static func xml(_ sent: Sent, timeout: Duration) -> String {
        var success = 0
        var failure = 0
        var rows = ""
        for platform in Platform.allCases {
            for target in sent.sample.targets[platform] ?? [] {
                let answer = sent.answers.results[target.registrationId ?? target.handle]?.result
                if answer?.outcome == .delivered { success += 1 } else { failure += 1 }
                let registration =
                    target.registrationId.map { "<RegistrationId>\(XML.escape($0))</RegistrationId>" } ?? "<RegistrationId i:nil=\"true\"/>"
                rows +=
                    "<RegistrationResult><ApplicationPlatform>\(platform.templateFormat.rawValue)</ApplicationPlatform>"
                    + "<PnsHandle>\(XML.escape(HandleDisplay.shortened(target.handle)))</PnsHandle>\(registration)"
                    + "<Outcome>\(XML.escape(words(answer, timeout: timeout)))</Outcome></RegistrationResult>"
            }
        }
        return
            "<NotificationOutcome xmlns=\"\(RegistrationDescription.connectNamespace)\" xmlns:i=\"http://www.w3.org/2001/XMLSchema-instance\">"
            + "<Success>\(success)</Success><Failure>\(failure)</Failure><Results>\(rows)</Results></NotificationOutcome>"
    }

    /// The PNS's answer in words.
    static func words(_ result: DeliveryResult?, timeout: Duration) -> String {
        guard let result else {
            return "No result within \(timeout.components.seconds) s: the notification is still on its way (see GET messages/{id})"
        }
        let pns = [result.pnsStatus.map(String.init), result.pnsReason].compactMap { $0 }.joined(separator: " ")
        let because = pns.isEmpty ? "" : " (\(pns))"
        switch result.outcome {
        case .delivered: return "The Notification was successfully sent to the Push Notification System"
        case .invalidHandle:
            return "The Push Notification System reported the handle invalid\(because)"
                + (result.registrationId == nil ? "" : "; the registration was deleted")
        case .throttled: return "The Push Notification System throttled the notification\(because)"
        case .payloadRejected: return "The Push Notification System rejected the payload\(because)"
        case .expired: return "The notification expired before the Push Notification System took it\(because)"
        case .failed: return "The Push Notification System could not be reached or failed\(because)"
        case .rejected: return "PushHub could not deliver the notification\(because)"
        }
    }
}
