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
    /// notification, its receipts, its counted targets and counts, its kept request) then
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
        var bytes = (
            UInt8(truncatingIfNeeded: high >> 56), UInt8(truncatingIfNeeded: high >> 48), UInt8(truncatingIfNeeded: high >> 40),
            UInt8(truncatingIfNeeded: high >> 32), UInt8(truncatingIfNeeded: high >> 24), UInt8(truncatingIfNeeded: high >> 16),
            UInt8(truncatingIfNeeded: high >> 8), UInt8(truncatingIfNeeded: high), UInt8(truncatingIfNeeded: low >> 56),
            UInt8(truncatingIfNeeded: low >> 48), UInt8(truncatingIfNeeded: low >> 40), UInt8(truncatingIfNeeded: low >> 32),
            UInt8(truncatingIfNeeded: low >> 24), UInt8(truncatingIfNeeded: low >> 16), UInt8(truncatingIfNeeded: low >> 8),
            UInt8(truncatingIfNeeded: low)
        )
        bytes.6 = (bytes.6 & 0x0F) | version << 4
        bytes.8 = (bytes.8 & 0x3F) | 0x80  // RFC 4122 variant
        return UUID(uuid: bytes).uuidString.lowercased()
    }
}
