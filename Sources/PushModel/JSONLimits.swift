import Foundation

/// Limits on JSON that comes from outside (HTTP bodies, Kafka records, PNS answers), checked
/// by one scan before any parser sees the bytes, so no parser is asked to recurse deeper
/// than `maximumDepth`.
public enum JSONLimits {
    /// Deepest nesting of arrays and objects PushHub reads.
    public static let maximumDepth = 32

    /// What a document that nests too deep is told.
    public static let depthMessage = "JSON nests at most \(maximumDepth) arrays and objects deep"

    /// Refuses `bytes` whose arrays and objects nest deeper than `maximumDepth`, naming
    /// `field` (the whole document when empty).
    public static func checkDepth<Bytes: Sequence<UInt8>>(_ bytes: Bytes, field: String) throws(WireError) {
        // Contiguous bytes (Data, arrays) are scanned through a buffer, not an iterator per byte.
        let tooDeep = bytes.withContiguousStorageIfAvailable { isTooDeep($0) } ?? isTooDeep(bytes)
        guard !tooDeep else {
            throw field.isEmpty ? .malformedJSON(depthMessage) : .invalidField(field: field, reason: depthMessage)
        }
    }

    /// True when `bytes` nest arrays and objects deeper than `maximumDepth` (strings skipped).
    public static func isTooDeep<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> Bool {
        var depth = 0
        return !outsideStrings(bytes) { byte in
            switch byte {
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                depth += 1
                return depth <= maximumDepth
            case UInt8(ascii: "]"), UInt8(ascii: "}"):
                depth -= 1
            default: break
            }
            return true
        }
    }

    /// Hands `body` each byte of JSON text that is not inside a string (a string's quotes are
    /// handed over), until it returns false; false then, true when the text ended.
    static func outsideStrings<Bytes: Sequence<UInt8>>(_ bytes: Bytes, _ body: (UInt8) -> Bool) -> Bool {
        var inString = false
        var escaped = false
        for byte in bytes {
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                continue
            }
            if byte == UInt8(ascii: "\"") { inString = true }
            guard body(byte) else { return false }
        }
        return true
    }

    /// `JSONSerialization.jsonObject` after the depth check; nil for JSON too deep or not JSON.
    public static func object(_ data: Data) -> Any? {
        guard !isTooDeep(data) else { return nil }
        return try? JSONSerialization.jsonObject(with: data)
    }

    /// Whether `data` is one JSON object within the depth limit, as JSONSerialization judges.
    /// The strict reader (`JSONReader`) answers first, making no value, for a document whose
    /// numbers are plain (no exponent, at most 15 digits in a row): JSONSerialization refuses a
    /// number it cannot hold, such as `1e999` or a run of 310 digits, which the grammar allows.
    /// What the reader does not take, and any document with such a number, JSONSerialization
    /// judges. (It made every value of a send's body: a twentieth of what the ingress spent
    /// accepting a send.)
    public static func isObject(_ data: Data) -> Bool {
        let read = data.withUnsafeBytes { raw -> Bool? in
            guard !isTooDeep(raw) else { return false }
            var reader = JSONReader(raw)
            guard reader.object({ reader, _ in reader.skipValue(depth: 1) }), reader.atEnd(), !hasLargeNumber(raw) else { return nil }
            return true
        }
        return read ?? (dictionary(data) != nil)
    }

    /// Whether a number outside strings has an exponent (`e` or `E` after a digit or a point)
    /// or more than 15 digits in a row.
    static func hasLargeNumber(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var previous: UInt8 = 0
        var digits = 0
        let isDigit = { (byte: UInt8) in (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }
        return !outsideStrings(bytes) { byte in
            digits = isDigit(byte) ? digits + 1 : 0
            // `"` is handed over too: no exponent follows a string.
            if digits > 15 || (byte | 0x20 == UInt8(ascii: "e") && (previous == UInt8(ascii: ".") || isDigit(previous))) { return false }
            previous = byte
            return true
        }
    }

    /// A JSON object (dictionary) after the depth check; nil for anything else.
    public static func dictionary(_ data: Data) -> [String: Any]? {
        object(data) as? [String: Any]
    }
}

/// The top-level members of a JSON object text, read without making its values: for a body
/// to be changed by splicing its text rather than parsed and written again.
public enum JSONMembers {
    public struct Object: Sendable {
        /// Where the object lies, from `{` to `}`.
        public var range: Range<Int>
        /// Each key with where its value lies, in the order written.
        public var members: [(key: String, value: Range<Int>)]
    }

    /// The object that `range` of `data` holds (all of it when nil), with nothing but
    /// whitespace around it. Offsets are `data`'s. Nil when it is not one JSON object within
    /// the depth limit, or a key repeats.
    public static func of(_ data: Data, in range: Range<Int>? = nil) -> Object? {
        let range = range ?? data.startIndex..<data.endIndex
        guard !range.isEmpty, range.lowerBound >= data.startIndex, range.upperBound <= data.endIndex else { return nil }
        return data.withUnsafeBytes { raw -> Object? in
            let base = range.lowerBound - data.startIndex
            var reader = JSONReader(UnsafeRawBufferPointer(rebasing: raw[base..<(base + range.count)]))
            guard let read = reader.members(), reader.atEnd() else { return nil }
            let offset = range.lowerBound
            return Object(
                range: (read.object.lowerBound + offset)..<(read.object.upperBound + offset),
                members: read.members.map { ($0.key, ($0.value.lowerBound + offset)..<($0.value.upperBound + offset)) })
        }
    }
}
