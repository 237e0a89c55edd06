import Foundation
import Logging

/// Where the registration store is: `postgres://user:password@host:port/database`, or an
/// SQLite file (`sqlite:///path` or a plain path).
public enum StoreLocation: Sendable, Equatable, CustomStringConvertible {
    case sqlite(path: String)
    case postgres(url: String)

    public init(_ text: String) {
        if text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") {
            self = .postgres(url: text)
        } else if text.hasPrefix("sqlite://") {
            self = .sqlite(path: String(text.dropFirst("sqlite://".count)))
        } else {
            self = .sqlite(path: text)
        }
    }

    /// Safe to log: no password.
    public var description: String {
        switch self {
        case .sqlite(let path): "sqlite://\(path)"
        case .postgres(let url): PostgresDatabase.redacted(url)
        }
    }

    /// Opens the store, creating the SQLite file's directory when needed, and migrates it.
    public func open(logger: Logger) async throws -> SQLRegistrationStore {
        switch self {
        case .sqlite(let path):
            let directory = (path as NSString).deletingLastPathComponent
            if !directory.isEmpty { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }
            return try await SQLRegistrationStore.open(SQLiteDatabase(path: path))
        case .postgres(let url):
            return try await SQLRegistrationStore.open(PostgresDatabase(url: url, logger: logger))
        }
    }
}
