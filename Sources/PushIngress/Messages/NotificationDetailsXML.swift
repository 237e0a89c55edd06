import Foundation
import PushModel

/// `GET /{hub}/messages/{id}` answers in the NotificationDetails shape of Azure Notification Hubs.
enum NotificationDetailsXML {
    /// Azure's names for the per-platform counts and outcomes.
    static let platformElements: [(Platform, String)] = [
        (.apns, "ApnsOutcomeCounts"), (.fcm, "FcmV1OutcomeCounts"), (.wns, "WnsOutcomeCounts"), (.webpush, "BrowserOutcomeCounts"),
    ]
    static let outcomeNames: [Outcome: String] = [
        .delivered: "Success", .invalidHandle: "BadChannel", .throttled: "Throttled", .payloadRejected: "PayloadTooLarge",
        .expired: "Expired", .failed: "PnsUnavailable", .rejected: "Dropped",
    ]

    static func xml(_ outcome: NotificationOutcome, location: String) -> String {
        var body = "<NotificationId>\(XML.escape(outcome.notificationId))</NotificationId>"
        body += "<Location>\(XML.escape(location))</Location>"
        body += "<State>\(outcome.state.rawValue)</State>"
        body += "<EnqueueTime>\(RFC3339.format(outcome.enqueuedAt))</EnqueueTime>"
        if let started = outcome.startedAt { body += "<StartTime>\(RFC3339.format(started))</StartTime>" }
        if let ended = outcome.endedAt { body += "<EndTime>\(RFC3339.format(ended))</EndTime>" }
        for (platform, element) in platformElements {
            guard let counts = outcome.counts[platform], !counts.isEmpty else { continue }
            body +=
                "<\(element)>"
                + counts.sorted { $0.key.rawValue < $1.key.rawValue }.map {
                    "<Outcome><Name>\(outcomeNames[$0.key] ?? $0.key.rawValue)</Name><Count>\($0.value)</Count></Outcome>"
                }.joined() + "</\(element)>"
        }
        // PushHub's own addition, last so Azure's elements keep their order: why it gave the
        // notification up.
        if let reason = outcome.reason { body += "<Reason>\(XML.escape(reason))</Reason>" }
        return
            "<NotificationDetails xmlns=\"\(RegistrationDescription.connectNamespace)\" xmlns:i=\"http://www.w3.org/2001/XMLSchema-instance\">\(body)</NotificationDetails>"
    }
}
