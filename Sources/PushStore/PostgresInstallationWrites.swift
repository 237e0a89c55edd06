import Logging
import PushModel
import Synchronization

/// Installation writes on PostgreSQL taken together: writes that arrive while earlier ones are
/// at the server wait, and go in the next call, one statement and one transaction for them all
/// (`pushhub_write_installations`). Nothing waits for company: a write that finds a call free
/// starts one at once (with whatever else waits by the time it is taken). Each write is the
/// same `pushhub_write_installation` as alone, in the order of its installation's id, so two
/// calls take installation rows' locks in one order.
///
/// A call the server answers with an error has written nothing (it is one statement): its
/// writes are made again in two halves, each a call, down to one write alone, so that a write
/// the server refuses fails alone and the others land within six rounds of halves. A call
/// with no answer (the connection lost) may have been committed: its writes fail with its error,
/// as a lone write's would.
///
/// Why: on a store of ten million registrations, a new installation alone cost the server about
/// 220 µs of CPU, eight in one call about 130 µs each (the statement's parse, plan and commit,
/// and the round trip, once for all); see docs/benchmarks.md, the seventeenth round of issue 13.
final class PostgresInstallationWrites: Sendable {
    /// Calls at the server at once; the pool's other connections stay for reads and other writes.
    static let calls = 4
    /// Writes in one call at most, and the bytes of its argument a call stops taking writes at
    /// (it takes one however large: a write's body is at most 64 KiB, its registrations up to
    /// eleven rows of it).
    static let perCall = 64
    static let bytesPerCall = 1 << 20

    private struct Waiting {
        let write: SQLRegistrationStore.InstallationWrite
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var waiting: [Waiting] = []
        var running = 0
        /// Calls made with more than one write, and calls the server refused (made again in
        /// halves): what the tests read to know the path they drove was taken.
        var sharedCalls = 0
        var refusedCalls = 0
    }

    private let database: any SQLDatabase
    private let logger: Logger
    private let state = Mutex(State())

    init(database: any SQLDatabase, logger: Logger) {
        self.database = database
        self.logger = logger
    }

    /// Calls made with more than one write, and calls the server refused.
    var counts: (sharedCalls: Int, refusedCalls: Int) {
        state.withLock { ($0.sharedCalls, $0.refusedCalls) }
    }

    /// Returns once `write` is committed, or throws what the server said of it alone.
    func write(_ write: SQLRegistrationStore.InstallationWrite) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let starts = state.withLock { state in
                state.waiting.append(Waiting(write: write, continuation: continuation))
                guard state.running < Self.calls else { return false }
                state.running += 1
                return true
            }
            // Detached: the drain serves other callers' writes too, and takes none of this
            // caller's priority, task-local values or cancellation.
            if starts { Task.detached { await self.drain() } }
        }
    }

    /// Makes calls while writes wait, then gives its place back.
    private func drain() async {
        while true {
            let taken: [Waiting] = state.withLock { state in
                guard !state.waiting.isEmpty else {
                    state.running -= 1
                    return []
                }
                var count = 0
                var bytes = 0
                while count < min(state.waiting.count, Self.perCall), count == 0 || bytes < Self.bytesPerCall {
                    bytes += state.waiting[count].write.argumentBytes
                    count += 1
                }
                defer { state.waiting.removeFirst(count) }
                if count > 1 { state.sharedCalls += 1 }
                return Array(state.waiting.prefix(count))
            }
            guard !taken.isEmpty else { return }
            // Sorted by hub and id (stable: two writes of one installation keep their order).
            let ordered = taken.enumerated().sorted { a, b in
                (a.element.write.hub, a.element.write.installationId, a.offset) < (b.element.write.hub, b.element.write.installationId, b.offset)
            }.map(\.element)
            await call(ordered[...])
        }
    }

    /// Writes `writes` in one call; a call the server refused, again in halves.
    private func call(_ writes: ArraySlice<Waiting>) async {
        do {
            if writes.count == 1 {
                let write = writes.first!.write
                try await database.writeStatement { connection in
                    try await SQLRegistrationStore.writeInstallation(write, dialect: .postgres, on: connection)
                }
            } else {
                let text = Self.argument(writes.map(\.write))
                let written = try await database.writeStatement { connection in
                    try await connection.query("SELECT pushhub_write_installations(?) AS written", [.text(text)]).first?.integer("written")
                }
                // Committed: a count that is not the writes' says the function is not the one
                // this build calls, and is no reason to make them again.
                guard written == Int64(writes.count) else {
                    throw SQLError(message: "pushhub_write_installations wrote \(written.map(String.init) ?? "nothing") of \(writes.count)")
                }
            }
            for waiting in writes { waiting.continuation.resume() }
        } catch let error as SQLError where error.isServerAnswer && writes.count > 1 {
            state.withLock { $0.refusedCalls += 1 }
            logger.warning(
                "installation writes refused together; made again in halves",
                metadata: ["pushhub.writes": "\(writes.count)", "pushhub.error": "\(error.reason.prefix(300))"])
            let middle = writes.startIndex + writes.count / 2
            await call(writes[..<middle])
            await call(writes[middle...])
        } catch {
            for waiting in writes { waiting.continuation.resume(throwing: error) }
        }
    }

    /// The writes as `pushhub_write_installations` takes them: a JSON array of objects named by
    /// its parameters. The document and the registrations are JSON already and go in as they are.
    static func argument(_ writes: [SQLRegistrationStore.InstallationWrite]) -> String {
        var out = JSONBytes(capacity: writes.reduce(0) { $0 + $1.argumentBytes })
        out.array(writes) { write, out in
            out.byte(UInt8(ascii: "{"))
            out.key("hub", first: true)
            out.string(write.hub)
            out.key("installation_id")
            out.string(write.installationId)
            out.key("document")
            out.raw(write.document)
            out.key("updated_at")
            out.value(write.updatedAt)
            out.key("registrations")
            out.raw(SQLRegistrationStore.installationRows(write.registrations))
            for (name, value) in zip(["platform", "user_id", "expired", "tags"], write.queried) {
                out.key(name)
                out.value(value)
            }
            out.byte(UInt8(ascii: "}"))
        }
        return String(decoding: out.bytes, as: UTF8.self)
    }
}

extension JSONBytes {
    /// A column's value: `null`, a number or a string.
    mutating func value(_ value: SQLValue) {
        switch value {
        case .null: literal("null")
        case .integer(let number): integer(Int(number))
        case .text(let text): string(text)
        }
    }
}
