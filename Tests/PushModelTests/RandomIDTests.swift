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

    @Test("version-7 UUIDs: the time in the first 48 bits, ordered by it as text, none repeated in 100,000 made in the same millisecond")
    func timeOrdered() throws {
        let now = Date(timeIntervalSince1970: 1_795_248_561.123)
        var seen = Set<String>()
        for _ in 0..<100_000 {
            let id = RandomID.timeOrdered(now: now)
            #expect(id.count == 36 && id == id.lowercased())
            #expect(Array(id)[14] == "7" && "89ab".contains(Array(id)[19]), "\(id)")
            #expect(UUID(uuidString: id) != nil)
            seen.insert(id)
        }
        #expect(seen.count == 100_000)
        // 1,795,248,561,123 ms is 0x01a2 0x0a9b 0xa5e3 (48 bits).
        let id = RandomID.timeOrdered(now: now)
        #expect(id.hasPrefix(String(1_795_248_561_123, radix: 16).leftPadded(to: 12).prefix(8) + "-"))
        let hex = id.replacingOccurrences(of: "-", with: "").prefix(12)
        #expect(UInt64(hex, radix: 16) == 1_795_248_561_123)
        // Later ids sort after earlier ones, as text and so as SQL keys.
        let times = (0..<1000).map { Date(timeIntervalSince1970: 1_700_000_000 + Double($0) * 0.001 + Double($0 / 7)) }
        let ids = times.map { RandomID.timeOrdered(now: $0) }
        #expect(ids == ids.sorted())
    }
}

extension String {
    fileprivate func leftPadded(to count: Int) -> String { String(repeating: "0", count: max(0, count - self.count)) + self }
}
