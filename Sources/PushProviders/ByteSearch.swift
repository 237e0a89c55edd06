import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Where bytes occur in other bytes, each candidate found by `memchr`: Foundation's
/// `Data.range(of:)` goes through NSData on Linux, five allocations a call, and the calls here
/// run once a batch, which is once a push when a batch holds one device.
enum ByteSearch {
    /// How far from `data.startIndex` `needle` first occurs in `data`; nil when it does not, or
    /// when `needle` is empty.
    static func firstOffset(of needle: [UInt8], in data: Data) -> Int? {
        data.withUnsafeBytes { haystack in
            needle.withUnsafeBytes { key -> Int? in
                guard let base = haystack.baseAddress, let start = key.baseAddress, let first = key.first else { return nil }
                var offset = 0
                while haystack.count - offset >= key.count {
                    guard let found = memchr(base + offset, Int32(first), haystack.count - offset - key.count + 1) else { return nil }
                    if memcmp(found, start, key.count) == 0 { return base.distance(to: found) }
                    offset = base.distance(to: found) + 1
                }
                return nil
            }
        }
    }
}
