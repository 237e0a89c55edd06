import Foundation
import Testing

@testable import PushStore

@Suite("SQLite's process-wide settings")
struct SQLiteMemoryStatisticsTests {
    @Test("SQLite's memory statistics are off, so its allocations take no process-wide mutex")
    func memoryStatisticsOff() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-memstatus-\(UUID().uuidString).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let database = try SQLiteDatabase(path: path, readers: 1)
        try await database.write { connection in
            try await connection.execute("CREATE TABLE rows (id INTEGER PRIMARY KEY, text TEXT NOT NULL)", [])
            for id in 0..<200 { try await connection.execute("INSERT INTO rows VALUES (?, ?)", [.integer(Int64(id)), .text("row \(id)")]) }
        }
        let count = try await database.read { try await $0.query("SELECT count(*) AS n FROM rows", []).first?.integer("n") }
        #expect(count == 200)
        // With the statistics on, SQLite counts its page cache and statements: far from 0.
        #expect(SQLiteConnection.memoryCounted == 0)
        await database.close()
    }
}
