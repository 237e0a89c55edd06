import Foundation
import Testing

@testable import PushModel

@Suite("RFC 3339 times")
struct RFC3339Tests {
    @Test("100,000 random times over years 1600 to 9999: written as Foundation writes them, read back to the millisecond")
    func randomTimes() throws {
        var generator = SystemRandomNumberGenerator()
        // From 1600-01-01 to 9999-12-31, and a dense stretch around now.
        let first: Int64 = -11_676_096_000_000
        let last: Int64 = 253_402_300_799_999
        for index in 0..<100_000 {
            let milliseconds =
                index % 2 == 0
                ? Int64.random(in: first...last, using: &generator) : Int64.random(in: 1_700_000_000_000...1_900_000_000_000, using: &generator)
            let (seconds, millis) = milliseconds.quotientAndRemainder(dividingBy: 1000)
            let (whole, fraction) = millis < 0 ? (seconds - 1, millis + 1000) : (seconds, millis)
            let fast = try #require(RFC3339.fastFormat(seconds: whole, milliseconds: fraction))
            let slow = RFC3339.foundationFormat(seconds: whole, milliseconds: fraction)
            try #require(fast == slow, "\(milliseconds)")
            try #require(RFC3339.fastParse(fast) == milliseconds, "\(fast)")
            try #require(RFC3339.foundationParse(fast) == Date(timeIntervalSince1970: Double(milliseconds) / 1000), "\(fast)")
        }
    }

    @Test(
        "texts in other forms, or not times, are left to Foundation, and read as it reads them",
        arguments: [
            "2026-11-25T07:58:04Z", "2026-11-25T07:58:04.1Z", "2026-11-25T07:58:04.12Z", "2026-11-25T07:58:04.123456789Z",
            "2026-11-25T07:58:04.1234567890Z", "2026-11-25T07:58:04+01:00", "2026-11-25t07:58:04z", "2024-02-29T00:00:00.000Z",
            "2023-02-29T00:00:00.000Z", "2026-13-01T00:00:00.000Z", "2026-11-31T00:00:00.000Z", "2026-11-25T24:00:00.000Z",
            "2026-11-25T23:60:00.000Z", "2016-12-31T23:59:60.000Z", "0000-01-01T00:00:00.000Z", "1582-10-10T00:00:00.000Z",
            "1599-12-31T23:59:59.999Z", "2026-11-25T07:58:04.Z",
            "2026-11-25 07:58:04.000Z", "+2026-11-25T07:58:04Z", "2026-11-25T07:58:04.12aZ", "", "not a time",
            "२०२६-11-25T07:58:04.000Z",
        ])
    func otherForms(_ text: String) {
        let fast = RFC3339.fastParse(text)
        let slow = RFC3339.foundationParse(text)
        if let fast {
            #expect(slow == Date(timeIntervalSince1970: Double(fast) / 1000), "read alike")
        }
        #expect(RFC3339.parse(text) == slow, "the same answer as Foundation's")
    }

    @Test("written and read back, a time stays equal", arguments: [0.0, 1.0005, 1_795_248_561.123, 1_795_248_561.1229999, 1_795_248_561.9996, -1.5])
    func stable(_ seconds: Double) throws {
        let truncated = RFC3339.truncated(Date(timeIntervalSince1970: seconds))
        let text = RFC3339.format(truncated)
        #expect(RFC3339.parse(text) == truncated, "\(text)")
        #expect(RFC3339.format(try #require(RFC3339.parse(text))) == text)
    }

    @Test(
        "offsets, fractions and their absence are read",
        arguments: [
            ("2026-11-21T08:09:21Z", 1_795_248_561.0),
            ("2026-11-21T08:09:21.5Z", 1_795_248_561.5),
            ("2026-11-21T10:09:21.250+02:00", 1_795_248_561.25),
            ("2026-11-21T08:09:21.123456Z", 1_795_248_561.123),
        ])
    func reads(_ text: String, _ seconds: Double) {
        #expect(RFC3339.parse(text) == Date(timeIntervalSince1970: seconds))
    }

    @Test("what is not RFC 3339 is refused", arguments: ["yesterday", "2026-11-21", "2026-11-21T08:09:21.Z", ""])
    func refuses(_ text: String) {
        #expect(RFC3339.parse(text) == nil)
    }
}
