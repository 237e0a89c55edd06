import Foundation
import PushStore
import Testing

@Suite("SQLite connections", .timeLimit(.minutes(1)))
struct SQLiteConnectionTests {
    @Test("readers keep a query's temporary tables in memory, not in files under /var/tmp; the writer keeps its savepoint journals in files")
    func temporaryStoreInMemory() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-temp-\(UUID().uuidString).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let database = try SQLiteDatabase(path: path, readers: 2)
        // 2 is MEMORY, 0 the build's default (a file once past a small size).
        let written = try await database.write { try await $0.query("PRAGMA temp_store", []).first?.integer("temp_store") }
        #expect(written == 0)
        for _ in 0..<2 {
            let read = try await database.read { try await $0.query("PRAGMA temp_store", []).first?.integer("temp_store") }
            #expect(read == 2)
        }
        await database.close()
    }
}
