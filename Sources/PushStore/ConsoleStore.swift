import Foundation
import PushModel

/// What the web console reads beyond the hub API's own queries: counts for a hub's overview,
/// its recent sends, and one target's failures.
public protocol ConsoleStore: Sendable {
    /// A hub's registrations by platform and its installations by platform.
    func deviceCounts(hub: String) async throws -> DeviceCounts
    /// A hub's notifications, newest first (by acceptance, then id), after `before` in that
    /// order (from the newest when nil).
    func recentNotifications(hub: String, before: (at: Date, id: String)?, limit: Int) async throws -> [NotificationOutcome]
    /// What a hub sent since `since`: its sends, their targets' outcomes, the handles pruned.
    func activity(hub: String, since: Date) async throws -> HubActivity
    /// The results of a registration among `notificationIds` of `hub` that did not end in
    /// success, by notification id.
    func failures(hub: String, of registration: Registration, notificationIds: [String]) async throws -> [String: DeliveryResult]
}

public struct DeviceCounts: Sendable, Equatable {
    public var registrations: [Platform: Int] = [:]
    /// By the installation's platform as stored (`apns`, `fcmv1`, …).
    public var installations: [String: Int] = [:]

    public init() {}
}

public struct HubActivity: Sendable, Equatable {
    public var sends = 0
    public var outcomes: [Outcome: Int] = [:]
    public var pruned = 0

    public init() {}

    public var targets: Int { outcomes.values.reduce(0, +) }
}

extension SQLRegistrationStore: ConsoleStore {
    /// The notifications a console page lists at most.
    static let recentLimit = 200

    public func deviceCounts(hub: String) async throws -> DeviceCounts {
        try await database.read { connection in
            var counts = DeviceCounts()
            for row in try await connection.query("SELECT format, count(*) AS n FROM registrations WHERE hub = ? GROUP BY format", [.text(hub)]) {
                guard let platform = row.text("format").flatMap(NativeFormat.init(rawValue:))?.platform else { continue }
                counts.registrations[platform, default: 0] += Int(row.integer("n") ?? 0)
            }
            for row in try await connection.query("SELECT platform, count(*) AS n FROM installations WHERE hub = ? GROUP BY platform", [.text(hub)]) {
                counts.installations[row.text("platform") ?? "", default: 0] += Int(row.integer("n") ?? 0)
            }
            return counts
        }
    }

    public func recentNotifications(hub: String, before: (at: Date, id: String)?, limit: Int) async throws -> [NotificationOutcome] {
        try await database.read { connection in
            let at = before.map { SQLValue($0.at) } ?? .integer(Int64.max)
            let rows = try await connection.query(
                """
                SELECT * FROM notifications WHERE hub = ? AND (enqueued_at < ? OR (enqueued_at = ? AND notification_id < ?))
                ORDER BY enqueued_at DESC, notification_id DESC LIMIT ?
                """, [.text(hub), at, at, .text(before?.id ?? ""), .integer(Int64(min(max(1, limit), Self.recentLimit)))])
            guard !rows.isEmpty else { return [] }
            let ids = rows.compactMap { $0.text("notification_id") }
            let counts = try await connection.query(
                "SELECT notification_id, platform, outcome, count FROM notification_counts WHERE notification_id IN (\(Self.placeholders(ids.count)))",
                ids.map { .text($0) })
            var byNotification: [String: [SQLRow]] = [:]
            for count in counts { byNotification[count.text("notification_id") ?? "", default: []].append(count) }
            return rows.map { row in
                let id = row.text("notification_id") ?? ""
                return Self.notificationOutcome(row, id: id, hub: hub, counts: byNotification[id] ?? [])
            }
        }
    }

    public func activity(hub: String, since: Date) async throws -> HubActivity {
        try await database.read { connection in
            var activity = HubActivity()
            activity.sends = Int(
                try await connection.query(
                    "SELECT count(*) AS n FROM notifications WHERE hub = ? AND enqueued_at >= ?", [.text(hub), SQLValue(since)]
                ).first?.integer("n") ?? 0)
            for row in try await connection.query(
                """
                SELECT c.outcome, CAST(sum(c.count) AS BIGINT) AS n FROM notification_counts c JOIN notifications n ON n.notification_id = c.notification_id
                WHERE n.hub = ? AND n.enqueued_at >= ? GROUP BY c.outcome
                """, [.text(hub), SQLValue(since)])
            {
                guard let outcome = row.text("outcome").flatMap(Outcome.init(rawValue:)) else { continue }
                activity.outcomes[outcome, default: 0] += Int(row.integer("n") ?? 0)
            }
            activity.pruned = Int(
                try await connection.query(
                    "SELECT count(*) AS n FROM pruned_handles WHERE hub = ? AND pruned_at >= ?", [.text(hub), SQLValue(since)]
                ).first?.integer("n") ?? 0)
            return activity
        }
    }

    public func failures(hub: String, of registration: Registration, notificationIds: [String]) async throws -> [String: DeliveryResult] {
        let ids = Array(notificationIds.prefix(Self.recentLimit))
        // Its key in each notification, as its results were counted: one primary-key lookup each.
        let target = ResultBatch.targetKey(
            platform: registration.platform.rawValue, registrationId: registration.registrationId, handle: registration.handle)
        guard !ids.isEmpty else { return [:] }
        return try await database.read { connection in
            var results: [String: DeliveryResult] = [:]
            for row in try await connection.query(
                """
                SELECT f.notification_id, f.registration_id, f.handle, f.outcome, f.pns_status, f.pns_reason, f.attempts FROM failed_targets f
                JOIN notifications n ON n.notification_id = f.notification_id
                WHERE n.hub = ? AND f.target = ? AND f.notification_id IN (\(Self.placeholders(ids.count)))
                """, [.text(hub), .text(target)] + ids.map { .text($0) })
            {
                results[row.text("notification_id") ?? ""] = Self.deliveryResult(row)
            }
            return results
        }
    }
}
