/// The media type of a Content-Type header, read as HTTP writes it: what comes before any `;`
/// (its parameters, such as charset, are not looked at), without the spaces or tabs around it.
/// Every route that checks a body's type reads it here, without copies of the header.
public enum MediaType {
    /// The media type of `contentType`, as it was written (case kept); nil for no header or
    /// an empty type.
    public static func of(_ contentType: String?) -> Substring? {
        guard let contentType else { return nil }
        let bytes = contentType.utf8
        let end = bytes.firstIndex(of: UInt8(ascii: ";")) ?? bytes.endIndex
        let isSpace = { (byte: UInt8) in byte == 0x20 || byte == 0x09 }
        guard let first = bytes[..<end].firstIndex(where: { !isSpace($0) }) else { return nil }
        let last = bytes[first..<end].lastIndex(where: { !isSpace($0) })!
        return Substring(bytes[first...last])
    }

    /// Whether the media type of `contentType` is `expected` (lowercase ASCII), ASCII letters
    /// compared ignoring case. No header, or an empty type, is the empty type.
    public static func matches(_ contentType: String?, _ expected: String) -> Bool {
        guard let type = of(contentType) else { return expected.isEmpty }
        return type.utf8.count == expected.utf8.count && hasPrefixIgnoringCase(type.utf8, expected)
    }

    /// Whether `bytes` starts with `prefix` (lowercase ASCII), ASCII letters compared
    /// ignoring case.
    static func hasPrefixIgnoringCase<Bytes: Collection<UInt8>>(_ bytes: Bytes, _ prefix: String) -> Bool {
        guard bytes.count >= prefix.utf8.count else { return false }
        for (byte, expected) in zip(bytes, prefix.utf8) {
            let folded = byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
            guard folded == expected else { return false }
        }
        return true
    }
}
