import Foundation
import PushModel
import Testing

@Suite("Random ids")
struct RandomIDTests {
    @Test("version-4 UUIDs in lowercase, none repeated in 100,000")
    func randomIDs() {
        var seen = Set<String>()
        for _ in 0..<100_000 {
            let id = RandomID.make()
            #expect(id.count == 36 && id == id.lowercased())
            #expect(Array(id)[14] == "4" && "89ab".contains(Array(id)[19]), "\(id)")
            #expect(UUID(uuidString: id) != nil)
            seen.insert(id)
        }
        #expect(seen.count == 100_000)
    }
}
