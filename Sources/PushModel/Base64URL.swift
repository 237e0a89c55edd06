import Foundation

/// base64url without padding (RFC 4648 §5), as JWTs and Web Push use it. Byte by byte with a
/// table: every Web Push target decodes its subscription's keys, so this is on the hot path.
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Each byte's 6-bit value, 0xFF for bytes outside the alphabet. Standard base64's `+` and
    /// `/` are read too, as they always were.
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (value, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(value) }
        table[Int(UInt8(ascii: "+"))] = 62
        table[Int(UInt8(ascii: "/"))] = 63
        return table
    }()

    public static func encode<D: DataProtocol>(_ bytes: D) -> String {
        let input = Array(bytes)
        var output = [UInt8]()
        output.reserveCapacity((input.count * 4 + 2) / 3)
        var index = 0
        while index + 3 <= input.count {
            let chunk = UInt32(input[index]) << 16 | UInt32(input[index + 1]) << 8 | UInt32(input[index + 2])
            output.append(alphabet[Int(chunk >> 18 & 63)])
            output.append(alphabet[Int(chunk >> 12 & 63)])
            output.append(alphabet[Int(chunk >> 6 & 63)])
            output.append(alphabet[Int(chunk & 63)])
            index += 3
        }
        switch input.count - index {
        case 1:
            let chunk = UInt32(input[index]) << 16
            output.append(alphabet[Int(chunk >> 18 & 63)])
            output.append(alphabet[Int(chunk >> 12 & 63)])
        case 2:
            let chunk = UInt32(input[index]) << 16 | UInt32(input[index + 1]) << 8
            output.append(alphabet[Int(chunk >> 18 & 63)])
            output.append(alphabet[Int(chunk >> 12 & 63)])
            output.append(alphabet[Int(chunk >> 6 & 63)])
        default: break
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// The bytes, or nil when `text` is not base64url (padding `=` at the end is allowed).
    public static func decode(_ text: String) -> Data? {
        var text = text
        return text.withUTF8 { decode(bytes: $0) }
    }

    private static func decode(bytes: UnsafeBufferPointer<UInt8>) -> Data? {
        var count = bytes.count
        // At most two `=`, at the end (however many the length calls for, as before); what is
        // left must be characters of the alphabet that end a quantum.
        var padding = 0
        while count > 0, bytes[count - 1] == UInt8(ascii: "="), padding < 2 {
            count -= 1
            padding += 1
        }
        guard count % 4 != 1, padding == 0 || count > 0 else { return nil }
        var output = [UInt8]()
        output.reserveCapacity(count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for index in 0..<count {
            let value = values[Int(bytes[index])]
            guard value != 0xFF else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        return Data(output)
    }
}
