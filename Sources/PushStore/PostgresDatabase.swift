import Foundation
import Logging
import NIOCore
import PostgresNIO

/// PostgreSQL through postgres-nio's connection pool, for deployments with several machines.
public final class PostgresDatabase: SQLDatabase {
    public let dialect = SQLDialect.postgres
    /// Each read leases a connection of the pool, and each connection is a server process.
    public var readsInParallel: Bool { true }
    private let client: PostgresClient
    private let running: Task<Void, Never>
    let logger: Logger

    /// Connects to `url` (`postgres://user:password@host:port/database`).
    public init(url: String, logger: Logger) throws {
        guard let components = URLComponents(string: url), ["postgres", "postgresql"].contains(components.scheme ?? ""),
            let host = components.host, let user = components.user
        else {
            throw SQLError(message: "a PostgreSQL URL looks like postgres://user:password@host:5432/database, not \(Self.redacted(url))")
        }
        let database = components.path.trimmingCharacters(in: CharacterSet(charactersIn: "/"))
        let configuration = PostgresClient.Configuration(
            host: host, port: components.port ?? 5432, username: user, password: components.password,
            database: database.isEmpty ? user : database, tls: .disable)
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        self.client = client
        self.logger = logger
        running = Task { await client.run() }
    }

    /// `url` without its password, for messages and logs.
    public static func redacted(_ url: String) -> String {
        guard var components = URLComponents(string: url), components.password != nil else { return url }
        components.password = "***"
        return components.string ?? "(unreadable URL)"
    }

    public func read<T: Sendable>(_ body: @Sendable (any SQLConnection) async throws -> T) async throws -> T {
        try await onPrimary(body)
    }

    /// A pooled connection to the server, with no transaction of its own.
    private func onPrimary<T: Sendable>(_ body: @Sendable (any SQLConnection) async throws -> T) async throws -> T {
        let logger = self.logger
        return try await client.withConnection { connection in
            try await body(PostgresSQLConnection(connection: connection, logger: logger))
        }
    }

    /// No BEGIN: the body's one statement commits alone.
    public func writeStatement<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) async throws -> T) async throws -> T {
        try await onPrimary(body)
    }

    public func write<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) async throws -> T) async throws -> T {
        let logger = self.logger
        do {
            return try await client.withConnection { connection in
                try await connection.withTransaction(logger: logger) { connection in
                    try await body(PostgresSQLConnection(connection: connection, logger: logger))
                }
            }
        } catch let error as PostgresTransactionError {
            // The store's own errors come back as they were thrown, as they do on SQLite.
            if let closureError = error.closureError { throw closureError }
            throw SQLError(
                message:
                    "the PostgreSQL transaction failed: \(error.beginError ?? error.commitError ?? error.rollbackError.map { $0 as any Error } ?? error)"
            )
        }
    }

    public func close() async {
        running.cancel()
        await running.value
    }
}

struct PostgresSQLConnection: SQLConnection {
    let connection: PostgresConnection
    let logger: Logger

    /// The rows are made on the connection's event loop as they arrive, and handed over once,
    /// whole: read through postgres-nio's row sequence, each buffer of rows was a hand-over
    /// between the event loop and the reading task, a fifth of the reader's CPU when a page
    /// held thousands of rows (docs/benchmarks.md, fourteenth round).
    func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] {
        let rows = RowCollector()
        do {
            _ = try await connection.query(Self.query(sql, binds), logger: logger) { try rows.append($0) }.get()
        } catch {
            throw Self.describe(error, sql)
        }
        return rows.rows
    }

    /// The rows of one query, made by its connection's event loop; read by the query's task
    /// only once the query's future completed, which orders the two.
    private final class RowCollector: @unchecked Sendable {
        var rows: [SQLRow] = []
        var columns: [String: Int]?

        func append(_ row: PostgresRow) throws {
            if columns == nil {
                columns = Dictionary(row.enumerated().map { ($0.element.columnName, $0.offset) }) { first, _ in first }
            }
            var values: [SQLValue] = []
            values.reserveCapacity(columns?.count ?? 0)
            for cell in row {
                guard let bytes = cell.bytes else {
                    values.append(.null)
                    continue
                }
                // The common cells read straight from their bytes (binary: big-endian integers,
                // UTF-8 text), the rest through postgres-nio's decoders.
                switch (cell.dataType, cell.format) {
                case (.int8, .binary) where bytes.readableBytes == 8:
                    values.append(.integer(bytes.getInteger(at: bytes.readerIndex, endianness: .big, as: Int64.self)!))
                case (.text, _), (.varchar, _):
                    values.append(.text(String(buffer: bytes)))
                case (.int8, _): values.append(.integer(try cell.decode(Int64.self)))
                case (.int4, _): values.append(.integer(Int64(try cell.decode(Int32.self))))
                case (.int2, _): values.append(.integer(Int64(try cell.decode(Int16.self))))
                case (.bool, _): values.append(.integer(try cell.decode(Bool.self) ? 1 : 0))
                default: values.append(.text(try cell.decode(String.self)))
                }
            }
            rows.append(SQLRow(columns: columns ?? [:], values: values))
        }
    }

    func execute(_ sql: String, _ binds: [SQLValue]) async throws {
        do {
            try await connection.query(Self.query(sql, binds), logger: logger)
        } catch {
            throw Self.describe(error, sql)
        }
    }

    /// PostgresNIO does not report the rows a statement changed: nothing is run, and the
    /// caller asks with `RETURNING`.
    func executeCountingChanges(_ sql: String, _ binds: [SQLValue]) async throws -> Int? { nil }

    /// PushHub's SQL uses `?` placeholders; PostgreSQL numbers them.
    static func query(_ sql: String, _ binds: [SQLValue]) -> PostgresQuery {
        // Byte by byte: `?` is ASCII, and a UTF-8 continuation byte is never one.
        var numbered: [UInt8] = []
        numbered.reserveCapacity(sql.utf8.count + binds.count * 3)
        var index = 0
        for byte in sql.utf8 {
            if byte == UInt8(ascii: "?") {
                index += 1
                numbered.append(UInt8(ascii: "$"))
                numbered += String(index).utf8
            } else {
                numbered.append(byte)
            }
        }
        var bindings = PostgresBindings(capacity: binds.count)
        for value in binds {
            switch value {
            case .null: bindings.appendNull()
            case .integer(let number): bindings.append(number)
            case .text(let text): bindings.append(text)
            }
        }
        return PostgresQuery(unsafeSQL: String(decoding: numbered, as: UTF8.self), binds: bindings)
    }

    static func describe(_ error: any Error, _ sql: String) -> SQLError {
        if let error = error as? PSQLError {
            let state = error.serverInfo?[.sqlState]
            let message = error.serverInfo?[.message] ?? "\(error.code)"
            // A program limit such as "statement too complex" or an index row too large (54xxx),
            // a value the server cannot take (22xxx: U+0000 in text, a number out of range) or a
            // syntax error (42601) fails the same way next time; a revoked grant or a missing
            // table may not.
            let permanent = state?.hasPrefix("54") == true || state?.hasPrefix("22") == true || state == "42601"
            return SQLError(
                message: "\(message) in: \(sql.prefix(200))", isConstraintViolation: state?.hasPrefix("23") == true, isPermanent: permanent,
                isServerAnswer: error.serverInfo != nil)
        }
        return SQLError(message: "\(error) in: \(sql.prefix(200))")
    }
}
