/// Lowercase hexadecimal, two digits a byte. `String(format: "%02x")` per byte goes through
/// Foundation's formatter: it was a seventh of the load generator's time making device
/// tokens, and every result batch's receipt pays it too.
public enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    public static func lowercase<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> String {
        var output = [UInt8]()
        output.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            output.append(digits[Int(byte >> 4)])
            output.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: output, as: UTF8.self)
    }
}
