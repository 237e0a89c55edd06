import Foundation

/// Random UUIDs as lowercase strings, for notification ids and markers. Foundation's `UUID()`
/// on Linux opens, reads and closes /dev/urandom for each one, three system calls a send;
/// these draw their bytes from `SystemRandomNumberGenerator` (getrandom).
public enum RandomID {
    /// A random (version 4) UUID.
    public static func make() -> String {
        var generator = SystemRandomNumberGenerator()
        return uuid(high: generator.next(), low: generator.next(), version: 4)
    }

    /// A time-ordered (version 7, RFC 9562) UUID: the milliseconds since 1970 in its first 48
    /// bits, then 74 random bits. Notification ids are made so: every table keyed by one (the
    /// notification, its counted targets and counts, its kept request) then
    /// takes new rows at its B-tree's right edge, where the sends of one commit share pages,
    /// not at a random leaf each (a single-user send wrote about three pages of SQLite's log
    /// and read four with random ids).
    public static func timeOrdered(now: Date = Date()) -> String {
        var generator = SystemRandomNumberGenerator()
        let milliseconds = UInt64(clamping: Int64((now.timeIntervalSince1970 * 1000).rounded(.down))) & 0xFFFF_FFFF_FFFF
        let random = generator.next() as UInt64
        return uuid(high: milliseconds << 16 | random >> 48, low: generator.next(), version: 7)
    }

    private static func uuid(high: UInt64, low: UInt64, version: UInt8) -> String {
        let high = high & ~(0xF << 12) | UInt64(version) << 12
        let low = low & ~(0x3 << 62) | 0x8 << 60  // RFC 4122 variant
        // Written as text here: Foundation's `UUID.uuidString` and `lowercased()` were two
        // strings and a tenth of what checking a send cost.
        return String(unsafeUninitializedCapacity: 36) { text in
            var at = 0
            for half in 0..<2 {
                let word = half == 0 ? high : low
                for nibble in 0..<16 {
                    if at == 8 || at == 13 || at == 18 || at == 23 {
                        text[at] = UInt8(ascii: "-")
                        at += 1
                    }
                    text[at] = digits[Int(word >> (60 - 4 * UInt64(nibble)) & 0xF)]
                    at += 1
                }
            }
            return at
        }
    }

    private static let digits: [UInt8] = Array("0123456789abcdef".utf8)
}
