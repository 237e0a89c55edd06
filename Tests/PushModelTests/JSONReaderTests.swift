import Foundation
import Testing

@testable import PushModel

@Suite("JSONReader's strings and integers")
struct JSONReaderTests {
    static func read<T>(_ text: String, _ body: (inout JSONReader) -> T) -> T {
        Array(text.utf8).withUnsafeBytes { bytes in
            var reader = JSONReader(bytes)
            return body(&reader)
        }
    }

    @Test("strings of every length and content read as JSONEncoder wrote them; a raw control character anywhere is refused")
    func strings() throws {
        var generator = SystemRandomNumberGenerator()
        let pieces = ["a", "Z", "0", " ", "\"", "\\", "/", "\t", "\n", "\u{01}", "\u{7f}", "é", "✓", "🚀", "abcdefgh", "\\u00"]
        for _ in 0..<5_000 {
            let text = (0..<Int.random(in: 0...40, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
            let encoded = String(decoding: try JSONEncoder().encode(text), as: UTF8.self)
            #expect(Self.read(encoded) { $0.string() } == text, "\(encoded)")
            // Unterminated: nothing is read.
            #expect(Self.read(String(encoded.dropLast())) { $0.string() } == nil, "\(encoded)")
        }
        for length in 0..<24 {
            for place in 0..<max(1, length) {
                var bytes = Array(repeating: UInt8(ascii: "x"), count: length)
                if length > 0 { bytes[place] = 0x0A }
                let text = "\"" + String(decoding: bytes, as: UTF8.self) + "\""
                #expect(Self.read(text) { $0.string() } == (length == 0 ? "" : nil), "\(length) \(place)")
            }
        }
        // Bytes that are not UTF-8 are refused, with or without an escape before them; the
        // reader stops after the closing quote.
        let raw: [([UInt8], String?)] = [
            ([0x22, 0x61, 0xFF, 0x22], nil), ([0x22, 0xC3, 0xA9, 0x22], "é"), ([0x22, 0xC3, 0x22], nil), ([0x22, 0x5C, 0x6E, 0xFF, 0x22], nil),
            ([0x22, 0x7F, 0x22], "\u{7f}"), ([0x22, 0x22], ""), ([0x22, 0x5C, 0x22, 0x22], "\""),
        ]
        for (bytes, expected) in raw {
            let read = (bytes + Array(#","x""#.utf8)).withUnsafeBytes { buffer in
                var reader = JSONReader(buffer)
                let first = reader.string()
                return (first, reader.take(UInt8(ascii: ",")) ? reader.string() : nil)
            }
            #expect(read.0 == expected, "\(bytes)")
            if expected != nil { #expect(read.1 == "x", "\(bytes)") }
        }
    }

    @Test("a body is a JSON object exactly when JSONSerialization makes a dictionary of it, in a corpus and 20,000 mutations of it")
    func objects() {
        let corpus = [
            #"{}"#, #"{"aps":{"alert":"hi","badge":1}}"#, #" {"a":[1,2.5,-3e2,true,false,null,{"b":"\u00e9\n"}]} "#, #"[]"#, #"[{"a":1}]"#,
            #""text""#, "7", "null", #"{"a":1}x"#, #"{"a":1,}"#, #"{"a"}"#, #"{"a":01}"#, #"{"a":1.}"#, #"{"a":"\x"}"#, #"{"a":"\ud800"}"#,
            #"{"a":1e999}"#, #"{"a":-1e-999}"#, #"{"a":123456789012345678901234567890}"#, #"{"a":1,"a":2}"#, "", " ", "{", "}",
            #"{"message":{"token":"t","data":{"k":"v"}}}"#, String(repeating: "[", count: 40) + String(repeating: "]", count: 40),
            "{\"a\":" + String(repeating: "{\"a\":", count: 31) + "1" + String(repeating: "}", count: 32),
            // Numbers JSONSerialization cannot hold, and the longest it can.
            "{\"a\":1" + String(repeating: "0", count: 320) + "}", "{\"a\":-" + String(repeating: "9", count: 400) + ".5}",
            #"{"a":1234567890123456}"#, #"{"a":123456789012345}"#, #"{"a":-0.5E+3,"1e":"1e9"}"#,
        ]
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array(#"{}[]:,"\ 0123456789.eE+-tfnulasrx"#.utf8) + [0x0A, 0x00, 0xC3, 0xA9]
        var cases = corpus.map { Data($0.utf8) }
        for _ in 0..<20_000 {
            var bytes = Array(corpus.randomElement(using: &generator)!.utf8)
            for _ in 0..<Int.random(in: 1...3, using: &generator) {
                let at = Int.random(in: 0...bytes.count, using: &generator)
                switch Int.random(in: 0..<3, using: &generator) {
                case 0 where at < bytes.count: bytes.remove(at: at)
                case 1 where at < bytes.count: bytes[at] = alphabet.randomElement(using: &generator)!
                default: bytes.insert(alphabet.randomElement(using: &generator)!, at: at)
                }
            }
            cases.append(Data(bytes))
        }
        var objects = 0
        for data in cases {
            let serialization = JSONLimits.dictionary(data) != nil
            #expect(JSONLimits.isObject(data) == serialization, "\(String(decoding: data, as: UTF8.self))")
            if serialization { objects += 1 }
        }
        #expect(objects > 1_000, "the mutations keep many objects: \(objects)")
    }

    @Test("integers are what Int(_:) reads, within Int; fractions, exponents and overflow are not integers")
    func integers() {
        var generator = SystemRandomNumberGenerator()
        let cases: [(String, Int?)] = [
            ("0", 0), ("-0", 0), ("7", 7), ("-7", -7), ("9223372036854775807", .max), ("-9223372036854775808", .min),
            ("9223372036854775808", nil), ("-9223372036854775809", nil), ("12345678901234567890", nil), ("1.5", nil), ("1e3", nil),
            ("-2E+2", nil), ("0.0", nil), ("01", 0), ("-", nil), ("x", nil),
        ]
        for (text, expected) in cases {
            #expect(Self.read(text) { $0.integer() } == expected, "\(text)")
        }
        for _ in 0..<20_000 {
            let value = Int.random(in: .min ... .max, using: &generator) >> Int.random(in: 0..<64, using: &generator)
            #expect(Self.read(String(value)) { $0.integer() } == value)
        }
    }

    @Test("takeRepeat consumes a value whose bytes, after any space, are an earlier value's, and nothing else")
    func takeRepeat() {
        let text = #"{"a":"x"} {"a":"x"},{"a":"y"},{"a":"x""#
        let steps: [Bool] = Array(text.utf8).withUnsafeBytes { bytes in
            var reader = JSONReader(bytes)
            let start = reader.valueStart()
            let skipped = reader.skipValue(depth: 0)
            let first = start..<reader.offset
            // The same bytes after a space: taken, and the reader is past them.
            let repeated = reader.takeRepeat(of: first)
            let past = reader.offset == 19
            let comma = reader.take(UInt8(ascii: ","))
            // One byte apart: not taken, and the reader has not moved.
            let before = reader.offset
            let apart = reader.takeRepeat(of: first)
            let stayed = reader.offset == before
            let next = reader.skipValue(depth: 0) && reader.take(UInt8(ascii: ","))
            // Cut short at the end of the bytes: not taken; nor an empty range.
            let short = reader.takeRepeat(of: first)
            let empty = reader.takeRepeat(of: 0..<0)
            return [skipped, first.count == 9, repeated, past, comma, !apart, stayed, next, !short, !empty]
        }
        #expect(steps == Array(repeating: true, count: 10))
    }

    @Test("takeRepeat takes no number or literal: an earlier 1 is only the start of a 12, an earlier true of a truex")
    func takeRepeatOnlyDelimited() {
        let taken: [Bool] = Array("1 12 true truex".utf8).withUnsafeBytes { bytes in
            var reader = JSONReader(bytes)
            let number = reader.valueStart()..<(reader.skipValue(depth: 0) ? reader.offset : 0)
            let longer = reader.takeRepeat(of: number)
            _ = reader.skipValue(depth: 0)
            let literal = reader.valueStart()..<(reader.skipValue(depth: 0) ? reader.offset : 0)
            return [number.count == 1, longer, literal.count == 4, reader.takeRepeat(of: literal)]
        }
        #expect(taken == [true, false, true, false])
    }
}
