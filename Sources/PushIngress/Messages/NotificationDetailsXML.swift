import Foundation
import PushModel

/// `GET /{hub}/messages/{id}` answers in the NotificationDetails shape of Azure Notification Hubs.
enum NotificationDetailsXML {
    /// Azure's names for the per-platform counts and outcomes.
    /// In the order of Azure's DataContract: APNs, WNS and ADM before `PnsErrorDetailsUri`, the
    /// newer FCM v1, browser, Baidu and Xiaomi counts after it (a .NET client ignores an element
    /// out of order; Azure's JavaScript client reads them in any order). Huawei's
    /// `HmsOutcomeCounts` is PushHub's own, last.
    static let platformElements: [(Platform, String)] = [
        (.apns, "ApnsOutcomeCounts"), (.wns, "WnsOutcomeCounts"), (.adm, "AdmOutcomeCounts"), (.fcm, "FcmV1OutcomeCounts"),
        (.webpush, "BrowserOutcomeCounts"), (.baidu, "BaiduOutcomeCounts"), (.xiaomi, "XiaomiOutcomeCounts"), (.hms, "HmsOutcomeCounts"),
    ]
    static let countedBeforeErrors: Set<Platform> = [.apns, .wns, .adm]
    static let outcomeNames: [Outcome: String] = [
        .delivered: "Success", .invalidHandle: "BadChannel", .throttled: "Throttled", .payloadRejected: "PayloadTooLarge",
        .expired: "Expired", .failed: "PnsUnavailable", .rejected: "Dropped",
    ]

    /// Azure's TargetPlatforms: the format of a native send; the formats of the platforms a
    /// template send went to (all of them until it was dispatched).
    static func targetPlatforms(_ outcome: NotificationOutcome) -> String? {
        guard let format = outcome.format else { return nil }
        guard format == .template else { return format.rawValue }
        return (outcome.dispatched ?? Platform.allCases).map(\.templateFormat.rawValue).joined(separator: ",")
    }

    static func xml(_ outcome: NotificationOutcome, location: String, errorsLocation: String) -> String {
        var body = "<NotificationId>\(XML.escape(outcome.notificationId))</NotificationId>"
        body += "<Location>\(XML.escape(location))</Location>"
        body += "<State>\(outcome.state.rawValue)</State>"
        body += "<EnqueueTime>\(RFC3339.format(outcome.enqueuedAt))</EnqueueTime>"
        if let started = outcome.startedAt { body += "<StartTime>\(RFC3339.format(started))</StartTime>" }
        if let ended = outcome.endedAt { body += "<EndTime>\(RFC3339.format(ended))</EndTime>" }
        if let notificationBody = outcome.body { body += "<NotificationBody>\(XML.escape(notificationBody))</NotificationBody>" }
        if let tags = outcome.tags { body += "<Tags>\(XML.escape(tags))</Tags>" }
        if let platforms = targetPlatforms(outcome) { body += "<TargetPlatforms>\(platforms)</TargetPlatforms>" }
        func counts(_ platforms: [(Platform, String)]) -> String {
            platforms.compactMap { platform, element -> String? in
                guard let counts = outcome.counts[platform], !counts.isEmpty else { return nil }
                return "<\(element)>"
                    + counts.sorted { $0.key.rawValue < $1.key.rawValue }.map {
                        "<Outcome><Name>\(outcomeNames[$0.key] ?? $0.key.rawValue)</Name><Count>\($0.value)</Count></Outcome>"
                    }.joined() + "</\(element)>"
            }.joined()
        }
        body += counts(platformElements.filter { countedBeforeErrors.contains($0.0) })
        // Where the targets that did not end in success are listed (Azure's blob; here an
        // API of the hub), once there is one.
        if outcome.counts.values.contains(where: { $0.contains { $0.key != .delivered && $0.value > 0 } }) {
            body += "<PnsErrorDetailsUri>\(XML.escape(errorsLocation))</PnsErrorDetailsUri>"
        }
        body += counts(platformElements.filter { !countedBeforeErrors.contains($0.0) })
        // PushHub's own addition, last so Azure's elements keep their order: why it gave the
        // notification up.
        if let reason = outcome.reason { body += "<Reason>\(XML.escape(reason))</Reason>" }
        return
            "<NotificationDetails xmlns=\"\(RegistrationDescription.connectNamespace)\" xmlns:i=\"http://www.w3.org/2001/XMLSchema-instance\">\(body)</NotificationDetails>"
    }
}
