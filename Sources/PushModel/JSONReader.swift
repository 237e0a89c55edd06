import Foundation

/// A strict reader of JSON bytes for the wire batches' fast path. It reads exactly the JSON
/// grammar (RFC 8259) and returns nil at anything it does not take: malformed input, nesting
/// deeper than `JSONLimits.maximumDepth`, a number where it wants an integer, a lone surrogate.
/// The caller then decodes with JSONDecoder, which says what is wrong, so the fast path only
/// ever accepts what JSONDecoder accepts, with the same values.
struct JSONReader {
    private let bytes: UnsafeRawBufferPointer
    private var position = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    /// Whether only whitespace is left.
    mutating func atEnd() -> Bool {
        skipSpace()
        return position == bytes.count
    }

    /// Consumes `byte` after any whitespace, when it is next.
    mutating func take(_ byte: UInt8) -> Bool {
        skipSpace()
        guard position < bytes.count, bytes[position] == byte else { return false }
        position += 1
        return true
    }

    /// `null`, consumed when it is next.
    mutating func takeNull() -> Bool {
        skipSpace()
        guard position + 4 <= bytes.count, bytes[position] == UInt8(ascii: "n"), bytes[position + 1] == UInt8(ascii: "u"),
            bytes[position + 2] == UInt8(ascii: "l"), bytes[position + 3] == UInt8(ascii: "l")
        else { return false }
        position += 4
        return true
    }

    /// The members of an object, one key at a time: `body` reads each key's value and returns
    /// false to give up. Nil when the object is malformed or `body` gave up.
    mutating func object(_ body: (inout JSONReader, String) -> Bool) -> Bool {
        guard take(UInt8(ascii: "{")) else { return false }
        if take(UInt8(ascii: "}")) { return true }
        repeat {
            guard let key = string(), take(UInt8(ascii: ":")), body(&self, key) else { return false }
        } while take(UInt8(ascii: ","))
        return take(UInt8(ascii: "}"))
    }

    /// The members of an object, each of the `known` keys at most once (a key given twice
    /// gives the object up, and the choice between them to JSONDecoder), read by `body`; other
    /// keys are skipped, at `depth`. At most 64 known keys.
    mutating func fields(_ known: [String], depth: Int, _ body: (inout JSONReader, String) -> Bool) -> Bool {
        var seen: UInt64 = 0
        return object { reader, key in
            guard let index = known.firstIndex(of: key) else { return reader.skipValue(depth: depth) }
            guard seen & (1 << index) == 0 else { return false }
            seen |= 1 << index
            return body(&reader, key)
        }
    }

    /// The members of the object that is next, each key with where its value lies (offsets
    /// into the bytes read), and where the object lies; nil when it is malformed, too deep, or
    /// a key repeats.
    mutating func members() -> (object: Range<Int>, members: [(key: String, value: Range<Int>)])? {
        skipSpace()
        let start = position
        var members: [(key: String, value: Range<Int>)] = []
        var keys: Set<String> = []
        let read = object { reader, key in
            guard keys.insert(key).inserted else { return false }
            reader.skipSpace()
            let valueStart = reader.position
            guard reader.skipValue(depth: 1) else { return false }
            members.append((key, valueStart..<reader.position))
            return true
        }
        return read ? (start..<position, members) : nil
    }

    /// `true` or `false`; nil when neither is next.
    mutating func bool() -> Bool? {
        skipSpace()
        if literal("true") { return true }
        if literal("false") { return false }
        return nil
    }

    /// A string into `value`; false (the caller gives up) when none is next.
    mutating func string(into value: inout String?) -> Bool {
        value = string()
        return value != nil
    }

    /// An integer into `value`; false when none is next.
    mutating func integer(into value: inout Int?) -> Bool {
        value = integer()
        return value != nil
    }

    /// An array whose elements `element` reads; nil when it is malformed or an element is not
    /// taken.
    mutating func array<Element>(of element: (inout JSONReader) -> Element?) -> [Element]? {
        var elements: [Element] = []
        let read = array { reader in
            guard let next = element(&reader) else { return false }
            elements.append(next)
            return true
        }
        return read ? elements : nil
    }

    /// The elements of an array, each read by `body`, which returns false to give up.
    mutating func array(_ body: (inout JSONReader) -> Bool) -> Bool {
        guard take(UInt8(ascii: "[")) else { return false }
        if take(UInt8(ascii: "]")) { return true }
        repeat {
            guard body(&self) else { return false }
        } while take(UInt8(ascii: ","))
        return take(UInt8(ascii: "]"))
    }

    /// A string, escapes resolved; nil unless one is next and well-formed UTF-8.
    mutating func string() -> String? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let start = position
        // Most strings hold no escape: the first quote, found by memchr, ends them, and their
        // bytes are looked at in one pass for what matters (control characters, a backslash,
        // non-ASCII) that the compiler can do many bytes at a time. Reading byte by byte was
        // a tenth of the ingress's CPU recording a broadcast's outcomes.
        if let quote = memchr(bytes.baseAddress! + start, Int32(UInt8(ascii: "\"")), bytes.count - start) {
            let end = bytes.baseAddress!.distance(to: UnsafeRawPointer(quote))
            var lowest: UInt8 = 0xFF
            var highest: UInt8 = 0
            var backslash: UInt8 = 0
            for index in start..<end {
                let byte = bytes[index]
                lowest = min(lowest, byte)
                highest = max(highest, byte)
                backslash |= byte == UInt8(ascii: "\\") ? 1 : 0
            }
            if backslash == 0 {
                guard lowest >= 0x20 else { return nil }
                let raw = UnsafeRawBufferPointer(rebasing: bytes[start..<end])
                position = end + 1
                return highest < 0x80 ? String(decoding: raw, as: UTF8.self) : String(validating: raw, as: UTF8.self)
            }
        }
        // A string with escapes, or no closing quote: byte by byte.
        var escaped = false
        var ascii = true
        while position < bytes.count {
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") { break }
            if byte < 0x20 { return nil }
            if byte >= 0x80 { ascii = false }
            if byte == UInt8(ascii: "\\") {
                escaped = true
                position += 1
            }
            position += 1
        }
        guard position < bytes.count else { return nil }
        let raw = UnsafeRawBufferPointer(rebasing: bytes[start..<position])
        position += 1
        if escaped { return Self.unescaped(raw) }
        // ASCII, nearly every string of a batch, is UTF-8 as it is: only the rest is validated
        // (`String(validating:)` was a third of reading a result batch).
        return ascii ? String(decoding: raw, as: UTF8.self) : String(validating: raw, as: UTF8.self)
    }

    /// An integer in JSON's number syntax without fraction or exponent, within `Int`.
    mutating func integer() -> Int? {
        skipSpace()
        let start = position
        guard let end = numberEnd(),
            !bytes[start..<end].contains(where: { $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") })
        else { return nil }
        position = end
        return Int(String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self))
    }

    /// Where the next value starts (after any whitespace), for `takeRepeat(of:)` later.
    mutating func valueStart() -> Int {
        skipSpace()
        return position
    }

    /// Where the reader is.
    var offset: Int { position }

    /// Consumes a value when its bytes, after any whitespace, are those of `earlier`, a whole
    /// value read before from the same bytes. Only an object, array or string: each ends where
    /// its own bytes say (its closing `}`, `]` or `"`), so the same bytes are the same value,
    /// read the same way at the same depth. A number or literal is never taken (an earlier `1`
    /// is the start of a `12`).
    mutating func takeRepeat(of earlier: Range<Int>) -> Bool {
        skipSpace()
        guard !earlier.isEmpty, earlier.upperBound <= bytes.count, position + earlier.count <= bytes.count,
            [UInt8(ascii: "}"), UInt8(ascii: "]"), UInt8(ascii: "\"")].contains(bytes[earlier.upperBound - 1]),
            memcmp(bytes.baseAddress! + position, bytes.baseAddress! + earlier.lowerBound, earlier.count) == 0
        else { return false }
        position += earlier.count
        return true
    }

    /// Skips one value of any kind, nested at most `JSONLimits.maximumDepth` deep counting the
    /// `depth` it starts at; false when it is malformed or deeper.
    mutating func skipValue(depth: Int) -> Bool {
        guard depth <= JSONLimits.maximumDepth else { return false }
        skipSpace()
        guard position < bytes.count else { return false }
        switch bytes[position] {
        case UInt8(ascii: "{"): return object { reader, _ in reader.skipValue(depth: depth + 1) }
        case UInt8(ascii: "["): return array { reader in reader.skipValue(depth: depth + 1) }
        case UInt8(ascii: "\""): return string() != nil
        case UInt8(ascii: "t"): return literal("true")
        case UInt8(ascii: "f"): return literal("false")
        case UInt8(ascii: "n"): return takeNull()
        default:
            guard let end = numberEnd() else { return false }
            position = end
            return true
        }
    }

    private mutating func literal(_ word: StaticString) -> Bool {
        let count = word.utf8CodeUnitCount
        guard position + count <= bytes.count else { return false }
        for index in 0..<count where bytes[position + index] != word.utf8Start[index] { return false }
        position += count
        return true
    }

    private mutating func skipSpace() {
        while position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x09, 0x0A, 0x0D: position += 1
            default: return
            }
        }
    }

    /// Where the number at `position` ends: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    private func numberEnd() -> Int? {
        var index = position
        func digits() -> Int {
            let start = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            return index - start
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count else { return nil }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else if digits() == 0 {
            return nil
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard digits() > 0 else { return nil }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard digits() > 0 else { return nil }
        }
        return index
    }

    /// The text of a string with escapes; nil for an unknown escape, a lone surrogate or bytes
    /// that are not UTF-8.
    private static func unescaped(_ raw: UnsafeRawBufferPointer) -> String? {
        var out: [UInt8] = []
        out.reserveCapacity(raw.count)
        var index = 0
        func hex4() -> UInt32? {
            guard index + 4 <= raw.count else { return nil }
            var value: UInt32 = 0
            for byte in raw[index..<index + 4] {
                guard let digit = hexDigit(byte) else { return nil }
                value = value << 4 | UInt32(digit)
            }
            index += 4
            return value
        }
        while index < raw.count {
            let byte = raw[index]
            index += 1
            guard byte == UInt8(ascii: "\\") else {
                out.append(byte)
                continue
            }
            guard index < raw.count else { return nil }
            let escape = raw[index]
            index += 1
            switch escape {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                guard var code = hex4() else { return nil }
                if (0xD800...0xDBFF).contains(code) {
                    guard index + 2 <= raw.count, raw[index] == UInt8(ascii: "\\"), raw[index + 1] == UInt8(ascii: "u") else { return nil }
                    index += 2
                    guard let low = hex4(), (0xDC00...0xDFFF).contains(low) else { return nil }
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                }
                guard let scalar = Unicode.Scalar(code) else { return nil }
                out.append(contentsOf: UTF8.encode(scalar)!)
            default: return nil
            }
        }
        return String(validating: out, as: UTF8.self)
    }

    /// A hexadecimal digit's value.
    static func hexDigit(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
