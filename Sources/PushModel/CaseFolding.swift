import Foundation

/// Names compared without their case: hub names, header names. Foundation's
/// `caseInsensitiveCompare` was a lookup's whole cost, paid for every request and every
/// PNS answer. ASCII names (nearly all) are folded byte by byte; a name with other text goes
/// to Foundation, which folds it as it always did.
public enum CaseFolding {
    public static func equal(_ a: String, _ b: String) -> Bool {
        guard a.utf8.allSatisfy({ $0 < 0x80 }), b.utf8.allSatisfy({ $0 < 0x80 }) else {
            return a.caseInsensitiveCompare(b) == .orderedSame
        }
        return a.utf8.count == b.utf8.count
            && zip(a.utf8, b.utf8).allSatisfy { x, y in x == y || (x | 0x20 == y | 0x20 && (0x61...0x7A).contains(x | 0x20)) }
    }
}
