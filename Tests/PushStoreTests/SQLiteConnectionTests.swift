import Foundation
import PushStore
import Testing

@Suite("SQLite connections", .timeLimit(.minutes(1)))
struct SQLiteConnectionTests {
    @Test("every connection keeps temporary tables and journals in memory, not in files under /var/tmp")
    func temporaryStoreInMemory() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-temp-\(UUID().uuidString).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let database = try SQLiteDatabase(path: path, readers: 2)
        // 2 is MEMORY (0 the build's default, which is a file).
        let written = try await database.write { try await $0.query("PRAGMA temp_store", []).first?.integer("temp_store") }
        #expect(written == 2)
        for _ in 0..<2 {
            let read = try await database.read { try await $0.query("PRAGMA temp_store", []).first?.integer("temp_store") }
            #expect(read == 2)
        }
        await database.close()
    }
}
