import Foundation
import PushModel

extension SQLRegistrationStore {
    public func installations(hub: String, matching filter: InstallationFilter, after cursor: InstallationCursor?, limit: Int) async throws
        -> InstallationPage
    {
        let limit = max(1, limit)
        let dialect = database.dialect
        let conditions = Self.conditions(of: filter, dialect: dialect)
        let after = cursor?.installationId ?? ""
        return try await database.read { connection in
            let rows: [SQLRow]
            var next: InstallationCursor?
            if let driving = filter.tags?.drivingTags(weighedBy: { _ in 0 }) {
                // As registrations are paged by tag: a window's last candidate is found from the
                // tag index first (each driving tag's range read in order, at most as deep as
                // the page has room), then the rows up to it that meet every condition are read.
                // Windows follow until the page is full, the candidates end, or
                // `windowsPerPage` were read (the page is then short, with a next one).
                let sorted = driving.sorted()
                let perTag = sorted.map { Self.carrying([$0], hub: hub, in: .installations, dialect: dialect)[0] }
                let sources = Self.carrying(sorted, hub: hub, in: .installations, dialect: dialect)
                var found: [SQLRow] = []
                var position = after
                for _ in 0..<Self.windowsPerPage {
                    let room = limit - found.count
                    let bound = try await connection.query(
                        "SELECT installation_id FROM ("
                            + perTag.map { "SELECT installation_id FROM (\($0.sql) AND installation_id > ? ORDER BY installation_id LIMIT ?) AS t" }
                            .joined(separator: " UNION ") + ") AS candidates ORDER BY installation_id LIMIT 1 OFFSET ?",
                        perTag.flatMap { $0.binds + [.text(position), .integer(Int64(room))] } + [.integer(Int64(room - 1))]
                    ).first?.text("installation_id")
                    let upTo = bound == nil ? "" : " AND installation_id <= ?"
                    found += try await connection.query(
                        "SELECT document FROM installations i WHERE i.hub = ? AND i.installation_id IN ("
                            + sources.map { "\($0.sql) AND installation_id > ?\(upTo)" }.joined(separator: " UNION ALL ") + ")"
                            + "\(conditions.sql) ORDER BY i.installation_id",
                        [.text(hub)] + sources.flatMap { $0.binds + [.text(position)] + (bound.map { [.text($0)] } ?? []) } + conditions.binds)
                    next = bound.map(InstallationCursor.init(installationId:))
                    guard let bound, found.count < limit else { break }
                    position = bound
                }
                rows = found
            } else {
                rows = try await connection.query(
                    "SELECT document, installation_id FROM installations i WHERE i.hub = ? AND i.installation_id > ?\(conditions.sql) ORDER BY i.installation_id LIMIT ?",
                    [.text(hub), .text(after)] + conditions.binds + [.integer(Int64(limit))])
                if rows.count == limit { next = rows.last?.text("installation_id").map(InstallationCursor.init(installationId:)) }
            }
            return InstallationPage(documents: rows.compactMap { $0.text("document") }, next: next)
        }
    }

    /// A stored document, read straight from its bytes (it is `wireJSON()`'s), or by
    /// JSONDecoder when the fast reader does not take it.
    static func installation(document: String) throws -> Installation {
        var document = document
        if let installation = document.withUTF8({ Installation.fromJSON(UnsafeRawBufferPointer($0)) }) { return installation }
        return try WireCoding.makeDecoder().decode(Installation.self, from: Data(document.utf8))
    }

    /// Candidate windows a page of a tag-filtered query reads at most.
    static let windowsPerPage = 16

    public func countInstallations(hub: String, matching filter: InstallationFilter) async throws -> Int {
        let conditions = Self.conditions(of: filter, dialect: database.dialect)
        return try await database.read { connection in
            var tagCondition = ""
            var tagBinds: [SQLValue] = []
            if let driving = filter.tags?.drivingTags(weighedBy: { _ in 0 })?.sorted() {
                let sources = Self.carrying(driving, hub: hub, in: .installations, dialect: database.dialect)
                tagCondition = " AND i.installation_id IN (" + sources.map(\.sql).joined(separator: " UNION ALL ") + ")"
                tagBinds = sources.flatMap(\.binds)
            }
            let rows = try await connection.query(
                "SELECT count(*) AS n FROM installations i WHERE i.hub = ?\(tagCondition)\(conditions.sql)",
                [.text(hub)] + tagBinds + conditions.binds)
            return Int(rows.first?.integer("n") ?? 0)
        }
    }

    /// The filter's conditions on `installations i`, each starting with ` AND`; the tag
    /// expression as a whole, on the row's own `tags` (the driving tags only pick the rows).
    static func conditions(of filter: InstallationFilter, dialect: SQLDialect) -> (sql: String, binds: [SQLValue]) {
        var sql = ""
        var binds: [SQLValue] = []
        if let platform = filter.platform {
            sql += " AND i.platform = ?"
            binds.append(.text(platform.rawValue))
        }
        if let userId = filter.userId {
            sql += " AND i.user_id = ?"
            binds.append(.text(userId))
        }
        if let expired = filter.pushChannelExpired {
            sql += " AND i.expired = ?"
            binds.append(.integer(expired ? 1 : 0))
        }
        if let before = filter.updatedBefore {
            sql += " AND i.updated_at < ?"
            binds.append(SQLValue(before))
        }
        if let after = filter.updatedAfter {
            sql += " AND i.updated_at > ?"
            binds.append(SQLValue(after))
        }
        // What the driving tags decide already is not tested again, as registrations are paged.
        if let expression = filter.tags, !expression.isDisjunctionOfTags {
            var remaining: TagExpression? = expression
            if let driving = expression.drivingTags(weighedBy: { _ in 0 }), driving.count == 1, let only = driving.first {
                remaining = expression.assuming(only)
            }
            if let remaining {
                let compiled = compile(remaining, dialect: dialect, column: "i.tags")
                sql += " AND \(compiled.sql)"
                binds += compiled.binds
            }
        }
        return (sql, binds)
    }
}
