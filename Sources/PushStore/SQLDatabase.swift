import Foundation

/// A value bound to a statement or read from a row. PushHub's schema uses only integers,
/// text and nulls, so both databases can share one store implementation.
public enum SQLValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case text(String)

    public init(_ text: String?) { self = text.map(SQLValue.text) ?? .null }
    public init(_ integer: Int64?) { self = integer.map(SQLValue.integer) ?? .null }
    /// Milliseconds since 1970; a date past what 64 bits hold is held at the nearest end.
    public init(_ date: Date?) {
        self =
            date.map { date in
                let milliseconds = (date.timeIntervalSince1970 * 1000).rounded()
                return .integer(Int64(exactly: milliseconds) ?? (milliseconds.isNaN ? 0 : milliseconds > 0 ? .max : .min))
            } ?? .null
    }
    public init(_ flag: Bool) { self = .integer(flag ? 1 : 0) }
}

/// One result row, read by column name.
public struct SQLRow: Sendable {
    let columns: [String: Int]
    let values: [SQLValue]

    public subscript(_ column: String) -> SQLValue {
        columns[column].map { values[$0] } ?? .null
    }

    public func text(_ column: String) -> String? { text(at: columns[column]) }

    public func integer(_ column: String) -> Int64? { integer(at: columns[column]) }

    public func date(_ column: String) -> Date? { date(at: columns[column]) }

    /// The text of the column at `index` (found once for many rows), nil for a null or a
    /// column the query does not have.
    func text(at index: Int?) -> String? {
        switch index.map({ values[$0] }) ?? .null {
        case .text(let text): text
        case .integer(let number): String(number)
        case .null: nil
        }
    }

    /// Milliseconds since the epoch, as `SQLValue(Date)` writes them.
    func date(at index: Int?) -> Date? {
        integer(at: index).map { Date(timeIntervalSince1970: Double($0) / 1000) }
    }

    func integer(at index: Int?) -> Int64? {
        switch index.map({ values[$0] }) ?? .null {
        case .integer(let number): number
        case .text(let text): Int64(text)
        case .null: nil
        }
    }
}

/// The SQL a database understands, where the two differ.
public enum SQLDialect: Sendable {
    case sqlite
    case postgres
}

/// Statements on one connection, inside `read` or `write`.
public protocol SQLConnection: Sendable {
    /// Runs `sql` (with `?` placeholders) and returns its rows.
    func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow]
    /// Runs `sql` for its effect. (Where a count of changed rows matters, use
    /// `executeCountingChanges`, and `RETURNING` where it answers nil.)
    func execute(_ sql: String, _ binds: [SQLValue]) async throws
    /// Runs `sql`, an INSERT, UPDATE or DELETE without `RETURNING`, and says how many rows it
    /// changed; nil where the client cannot say (PostgreSQL's), and the caller asks again with
    /// `RETURNING`, having changed nothing.
    func executeCountingChanges(_ sql: String, _ binds: [SQLValue]) async throws -> Int?
}

/// A database the store runs on.
public protocol SQLDatabase: Sendable {
    var dialect: SQLDialect { get }
    /// Whether two `read`s at once run on connections of their own, side by side, so that a
    /// reader may split a large read in two.
    var readsInParallel: Bool { get }
    /// Runs `body` on a connection for reading.
    func read<T: Sendable>(_ body: @Sendable (any SQLConnection) async throws -> T) async throws -> T
    /// Runs `body` in one transaction, committed when it returns and rolled back when it throws.
    /// The body may run twice (SQLite, after a write it shared a transaction with failed): it
    /// works on the database only, or is a `writeOnce`.
    func write<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) async throws -> T) async throws -> T
    /// Runs `body`, which writes with one statement, as its own transaction: on PostgreSQL
    /// without BEGIN and COMMIT around it (a statement commits alone), on SQLite as `write`.
    func writeStatement<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) async throws -> T) async throws -> T
    /// Runs `body`, which does something outside the database as well (appends to a file), as
    /// `write` does, and never more than once: SQLite may run a `write`'s body again after
    /// rolling back a transaction it shared with a write that failed.
    func writeOnce<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) async throws -> T) async throws -> T
    /// Runs `body`, the migrations, whose single writes may copy a whole table.
    func migrating<T: Sendable>(_ body: () async throws -> T) async throws -> T
    /// Closes every connection.
    func close() async
}

extension SQLDatabase {
    public var readsInParallel: Bool { false }
}

/// PostgreSQL never runs a body twice: `writeOnce` is `write` there.
extension SQLDatabase {
    public func writeOnce<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) async throws -> T) async throws -> T {
        try await write(body)
    }
}

extension SQLDatabase {
    public func migrating<T: Sendable>(_ body: () async throws -> T) async throws -> T { try await body() }
}

/// A transaction already open on one connection, as a database: a store made on it reads and
/// writes in that transaction (`SQLRegistrationStore.within(_:)`).
struct OpenTransaction: SQLDatabase {
    let connection: any SQLConnection
    let dialect: SQLDialect

    func read<T: Sendable>(_ body: @Sendable (any SQLConnection) async throws -> T) async throws -> T { try await body(connection) }
    func write<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) async throws -> T) async throws -> T {
        try await body(connection)
    }
    func writeStatement<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) async throws -> T) async throws -> T {
        try await body(connection)
    }
    /// The transaction's owner closes the connection.
    func close() async {}
}

/// A database error with what the database said.
public struct SQLError: Error, Sendable, CustomStringConvertible {
    public var message: String
    /// True when the statement broke a uniqueness rule.
    public var isConstraintViolation: Bool = false
    /// True when the database refused the statement itself (its shape, size or a limit), so
    /// running it again fails the same way; false for what may pass later (busy, unreachable).
    public var isPermanent: Bool = false
    /// True when the server answered the statement with an error (it ran, and was rolled back);
    /// false when no answer came (the connection lost, the pool closed), after which it may
    /// have been committed or not.
    public var isServerAnswer: Bool = false

    public init(message: String, isConstraintViolation: Bool = false, isPermanent: Bool = false, isServerAnswer: Bool = false) {
        self.message = message
        self.isConstraintViolation = isConstraintViolation
        self.isPermanent = isPermanent
        self.isServerAnswer = isServerAnswer
    }

    public var description: String { message }

    /// What the database said, without the statement the message goes on to quote.
    public var reason: String { message.components(separatedBy: " in: ").first ?? message }
}
