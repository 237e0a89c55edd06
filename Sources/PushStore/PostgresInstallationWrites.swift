import PushModel
import Synchronization

/// Installation writes on PostgreSQL taken together: writes that arrive while earlier ones are
/// at the server wait, and go in the next call, one statement and one transaction for them all
/// (`pushhub_write_installations`). Nothing waits for company: a write that finds a call free
/// goes at once, alone. Each write is the same `pushhub_write_installation` as alone, in the
/// order of its installation's id, so two calls take installation rows' locks in one order.
///
/// A call that fails has written nothing (it is one statement); its writes are then made one by
/// one, so that each gets its own outcome and one write the server refuses fails alone.
///
/// Why: on a store of ten million registrations, a new installation alone cost the server about
/// 220 µs of CPU, eight in one call about 130 µs each (the statement's parse, plan and commit,
/// and the round trip, once for all); see docs/benchmarks.md, the seventeenth round of issue 13.
final class PostgresInstallationWrites: Sendable {
    /// Calls at the server at once; the pool's other connections stay for reads and other writes.
    static let calls = 4
    /// Writes in one call at most: a call's statement stays well under a megabyte.
    static let perCall = 64

    private struct Waiting {
        let write: SQLRegistrationStore.InstallationWrite
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var waiting: [Waiting] = []
        var running = 0
        /// Calls made with more than one write, and writes made one by one after a call failed:
        /// what the tests read to know the path they drove was taken.
        var sharedCalls = 0
        var writesAfterFailure = 0
    }

    private let database: any SQLDatabase
    private let state = Mutex(State())

    init(database: any SQLDatabase) {
        self.database = database
    }

    /// Calls made with more than one write, and writes made alone after their call failed.
    var counts: (sharedCalls: Int, writesAfterFailure: Int) {
        state.withLock { ($0.sharedCalls, $0.writesAfterFailure) }
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
            if starts { Task { await self.drain() } }
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
                let count = min(state.waiting.count, Self.perCall)
                defer { state.waiting.removeFirst(count) }
                if count > 1 { state.sharedCalls += 1 }
                return Array(state.waiting.prefix(count))
            }
            guard !taken.isEmpty else { return }
            await call(taken)
        }
    }

    private func call(_ taken: [Waiting]) async {
        if taken.count == 1 {
            let only = taken[0]
            do {
                try await alone(only.write)
                only.continuation.resume()
            } catch { only.continuation.resume(throwing: error) }
            return
        }
        // Sorted by hub and id (stable: two writes of one installation keep their order).
        let ordered = taken.enumerated().sorted { a, b in
            (a.element.write.hub, a.element.write.installationId, a.offset) < (b.element.write.hub, b.element.write.installationId, b.offset)
        }.map(\.element)
        let text = Self.argument(ordered.map(\.write))
        do {
            _ = try await database.writeStatement { connection in
                try await connection.query("SELECT pushhub_write_installations(?) AS written", [.text(text)])
            }
            for waiting in ordered { waiting.continuation.resume() }
        } catch {
            state.withLock { $0.writesAfterFailure += ordered.count }
            for waiting in ordered {
                do {
                    try await alone(waiting.write)
                    waiting.continuation.resume()
                } catch { waiting.continuation.resume(throwing: error) }
            }
        }
    }

    private func alone(_ write: SQLRegistrationStore.InstallationWrite) async throws {
        try await database.writeStatement { connection in
            try await SQLRegistrationStore.writeInstallation(write, dialect: .postgres, on: connection)
        }
    }

    /// The writes as `pushhub_write_installations` takes them: a JSON array of objects named by
    /// its parameters. The document and the registrations are JSON already and go in as they are.
    static func argument(_ writes: [SQLRegistrationStore.InstallationWrite]) -> String {
        var out = JSONBytes(capacity: writes.reduce(0) { $0 + $1.document.utf8.count + 640 * $1.registrations.count + 256 })
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
