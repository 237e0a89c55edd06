import Foundation

/// A message PushHub writes to or reads from a Kafka topic: UTF-8 JSON with a `schema` field.
public protocol WireMessage: Codable, Sendable {
    /// The value of the `schema` field, e.g. `pushhub.send-request.v1`.
    static var schema: String { get }
    /// Checks what the types cannot say; throws `WireError.invalidField` naming the field.
    func validate() throws(WireError)
}

/// Encoding and decoding of wire messages, with errors that name the field at fault.
public enum WireCoding {
    /// The schemas this build reads.
    public static let knownSchemas: Set<String> = [SendRequest.schema, DeliveryBatch.schema, ResultBatch.schema]

    /// The `schema` of a record value, without decoding the rest.
    public static func schema(of data: Data) throws(WireError) -> String {
        guard let schema = try decodeJSON(SchemaEnvelope.self, data).schema else { throw .missingSchema }
        return schema
    }

    /// Decodes and validates a message of type `T`.
    public static func decode<T: WireMessage>(_ type: T.Type, from data: Data) throws(WireError) -> T {
        // Result and delivery batches, the most read messages, are read straight from their
        // bytes when they are plain; anything else goes through JSONDecoder, which names what
        // is wrong.
        if T.self == ResultBatch.self, let batch = ResultBatch.fromWireJSON(data) {
            try batch.validate()
            return batch as! T
        }
        if T.self == DeliveryBatch.self, let batch = DeliveryBatch.fromWireJSON(data) {
            try batch.validate()
            return batch as! T
        }
        let message = try decodeUnchecked(T.self, from: data)
        try message.validate()
        return message
    }

    /// A SendRequest and its tag expression, parsed once while it is checked.
    public static func decodeRequest(from data: Data) throws(WireError) -> (request: SendRequest, expression: TagExpression?) {
        let request = try decodeUnchecked(SendRequest.self, from: data)
        return (request, try request.validatedExpression())
    }

    /// Decodes without `validate()`: for callers that validate themselves.
    private static func decodeUnchecked<T: WireMessage>(_ type: T.Type, from data: Data) throws(WireError) -> T {
        let schema = try schema(of: data)
        guard schema == T.schema else {
            guard knownSchemas.contains(schema) else { throw .unknownSchema(schema) }
            throw .invalidField(field: "schema", reason: "is \(schema) where \(T.schema) was expected")
        }
        return try decodeJSON(T.self, data)
    }

    /// Encodes a message, `schema` field included, with sorted keys.
    public static func encode<T: WireMessage>(_ message: T) throws(WireError) -> Data {
        // Result batches are the most written message (one per worker batch): written directly.
        if let batch = message as? ResultBatch { return batch.wireJSON() }
        if let batch = message as? DeliveryBatch { return batch.wireJSON() }
        if let request = message as? SendRequest { return request.wireJSON() }
        do {
            return try makeEncoder().encode(Stamped(message: message))
        } catch {
            throw .invalidField(field: "", reason: "could not be encoded: \(error)")
        }
    }

    private static func decodeJSON<T: Decodable>(_ type: T.Type, _ data: Data) throws(WireError) -> T {
        try JSONLimits.checkDepth(data, field: "")
        do {
            return try makeDecoder().decode(T.self, from: data)
        } catch let error as DecodingError {
            throw describe(error)
        } catch {
            throw .malformedJSON("\(error)")
        }
    }

    public static func makeDecoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = RFC3339.parse(text) else {
                throw DecodingError.dataCorruptedError(
                    in: container, debugDescription: "must be an RFC 3339 date-time, not \"\(text)\"")
            }
            return date
        }
        return decoder
    }

    /// Encodes through JSONEncoder whatever the type (the reference `encode`'s fast paths are
    /// checked against).
    static func encodeWithEncoder<T: WireMessage>(_ message: T) throws -> Data {
        try makeEncoder().encode(Stamped(message: message))
    }

    public static func makeEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(RFC3339.format(date))
        }
        return encoder
    }

    /// Turns a `DecodingError` into the field it is about, e.g. `audience.handles[1].platform`.
    public static func describe(_ error: DecodingError) -> WireError {
        switch error {
        case .keyNotFound(let key, let context):
            return .invalidField(field: path(context.codingPath + [key]), reason: "missing")
        case .typeMismatch(_, let context) where context.codingPath.isEmpty:
            return .malformedJSON("the record is JSON but not an object")
        case .typeMismatch(let type, let context):
            return .invalidField(field: path(context.codingPath), reason: "must be \(jsonTypeName(type))")
        case .valueNotFound(let type, let context):
            return .invalidField(field: path(context.codingPath), reason: "must be \(jsonTypeName(type)), not null")
        case .dataCorrupted(let context):
            if context.codingPath.isEmpty {
                return .malformedJSON(context.underlyingError.map { "\($0)" } ?? context.debugDescription)
            }
            return .invalidField(field: path(context.codingPath), reason: context.debugDescription)
        @unknown default:
            return .malformedJSON("\(error)")
        }
    }

    static func path(_ codingPath: [any CodingKey]) -> String {
        var text = ""
        for key in codingPath {
            if let index = key.intValue {
                text += "[\(index)]"
            } else {
                text += text.isEmpty ? key.stringValue : ".\(key.stringValue)"
            }
        }
        return text
    }

    private static func jsonTypeName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Bool.Type: "a boolean"
        case is Int.Type, is Int64.Type, is Int32.Type: "an integer"
        case is Double.Type: "a number"
        case is [Any].Type: "an array"
        default: "an object"
        }
    }
}

private struct SchemaEnvelope: Decodable {
    var schema: String?

    init(from decoder: any Decoder) throws {
        // Any JSON object qualifies; a non-string schema is reported as such.
        let container = try decoder.container(keyedBy: Key.self)
        schema = try container.decodeIfPresent(String.self, forKey: .schema)
    }

    enum Key: String, CodingKey { case schema }
}

/// Adds the message type's `schema` field to its encoding.
private struct Stamped<T: WireMessage>: Encodable {
    let message: T

    func encode(to encoder: any Encoder) throws {
        try message.encode(to: encoder)
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(T.schema, forKey: .schema)
    }

    enum Key: String, CodingKey { case schema }
}

/// RFC 3339 date-times: read with or without fractional seconds and with any offset;
/// written in UTC with milliseconds. Both directions work in whole milliseconds, so a time
/// written and read back is equal to what was written.
public enum RFC3339 {
    public static func parse(_ text: String) -> Date? {
        if let milliseconds = fastParse(text) { return Date(timeIntervalSince1970: Double(milliseconds) / 1000) }
        return foundationParse(text)
    }

    /// `parse` through Foundation's ISO 8601 style, for any form it takes.
    static func foundationParse(_ text: String) -> Date? {
        var whole = Substring(text)
        var milliseconds: Int64 = 0
        if let time = text.firstIndex(where: { $0 == "T" || $0 == "t" }), let dot = text[time...].firstIndex(of: ".") {
            let fractionStart = text.index(after: dot)
            let fractionEnd = text[fractionStart...].firstIndex(where: { !$0.isASCII || !$0.isNumber }) ?? text.endIndex
            let digits = text[fractionStart..<fractionEnd]
            guard !digits.isEmpty else { return nil }
            milliseconds = Int64(String((digits + "00").prefix(3))) ?? 0
            whole = text[..<dot] + text[fractionEnd...]
        }
        guard let seconds = try? Date.ISO8601FormatStyle().parse(String(whole)) else { return nil }
        return Date(timeIntervalSince1970: Double(Int64(seconds.timeIntervalSince1970.rounded()) * 1000 + milliseconds) / 1000)
    }

    public static func format(_ date: Date) -> String {
        let total = Int64((date.timeIntervalSince1970 * 1000).rounded())
        let seconds = total.quotientAndRemainder(dividingBy: 1000)
        let (whole, millis) = seconds.remainder < 0 ? (seconds.quotient - 1, seconds.remainder + 1000) : seconds
        return fastFormat(seconds: whole, milliseconds: millis) ?? foundationFormat(seconds: whole, milliseconds: millis)
    }

    /// `format` through Foundation's ISO 8601 style, for any year.
    static func foundationFormat(seconds whole: Int64, milliseconds millis: Int64) -> String {
        let text = Date.ISO8601FormatStyle().format(Date(timeIntervalSince1970: Double(whole)))
        let padded = String(millis + 1000).dropFirst()
        return text.dropLast() + "." + padded + "Z"
    }

    // The form PushHub writes, `2026-11-25T07:58:04.123Z` (years 1600 to 9999, UTC, a
    // fraction of 1 to 9 digits or none), read and written by hand: Foundation's ISO 8601
    // style was about 4 % of a worker's time, reading each batch's times. Anything else
    // (offsets, leap seconds, lower-case letters, and years before 1600, which Foundation
    // counts in the Julian calendar) goes to Foundation as before.

    /// Milliseconds since 1970 of a time in PushHub's own form; nil for any other.
    static func fastParse(_ text: String) -> Int64? {
        var text = text
        return text.withUTF8 { bytes -> Int64? in
            guard bytes.count >= 20, bytes.count <= 30, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
                bytes[10] == UInt8(ascii: "T"), bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"),
                bytes[bytes.count - 1] == UInt8(ascii: "Z")
            else { return nil }
            func number(_ start: Int, _ count: Int) -> Int64? {
                var value: Int64 = 0
                for index in start..<(start + count) {
                    let digit = bytes[index] &- UInt8(ascii: "0")
                    guard digit < 10 else { return nil }
                    value = value * 10 + Int64(digit)
                }
                return value
            }
            guard let year = number(0, 4), let month = number(5, 2), let day = number(8, 2), let hour = number(11, 2),
                let minute = number(14, 2), let second = number(17, 2), year >= 1600, (1...12).contains(month),
                day >= 1, day <= daysIn(month: month, year: year), hour < 24, minute < 60, second < 60
            else { return nil }
            var milliseconds: Int64 = 0
            if bytes.count > 20 {
                // `.` and 1 to 9 digits; the first three are kept, as the long way keeps them.
                let digits = bytes.count - 21
                guard bytes[19] == UInt8(ascii: "."), digits >= 1, digits <= 9, number(20, digits) != nil else { return nil }
                milliseconds = number(20, min(3, digits))! * [100, 10, 1][min(3, digits) - 1]
            } else if bytes[19] != UInt8(ascii: "Z") {
                return nil
            }
            let days = daysFromCivil(year: year, month: month, day: day)
            return ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + milliseconds
        }
    }

    /// `2026-11-25T07:58:04.123Z` for a time in years 1600 to 9999; nil outside them.
    static func fastFormat(seconds: Int64, milliseconds: Int64) -> String? {
        let (days, secondOfDay) = seconds.quotientAndRemainder(dividingBy: 86_400)
        let (day, second) = secondOfDay < 0 ? (days - 1, secondOfDay + 86_400) : (days, secondOfDay)
        let (year, month, dayOfMonth) = civilFromDays(day)
        guard year >= 1600, year <= 9999 else { return nil }
        // Written straight into the string's storage: one allocation, not an array and a copy.
        return String(unsafeUninitializedCapacity: 24) { bytes in
            func put(_ value: Int64, _ start: Int, _ count: Int) {
                var value = value
                for index in stride(from: start + count - 1, through: start, by: -1) {
                    bytes[index] = UInt8(ascii: "0") + UInt8(value % 10)
                    value /= 10
                }
            }
            put(year, 0, 4)
            bytes[4] = UInt8(ascii: "-")
            put(month, 5, 2)
            bytes[7] = UInt8(ascii: "-")
            put(dayOfMonth, 8, 2)
            bytes[10] = UInt8(ascii: "T")
            put(second / 3600, 11, 2)
            bytes[13] = UInt8(ascii: ":")
            put(second / 60 % 60, 14, 2)
            bytes[16] = UInt8(ascii: ":")
            put(second % 60, 17, 2)
            bytes[19] = UInt8(ascii: ".")
            put(milliseconds, 20, 3)
            bytes[23] = UInt8(ascii: "Z")
            return 24
        }
    }

    static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days since 1970-01-01 of a date of the proleptic Gregorian calendar (the era
    /// arithmetic of Howard Hinnant's `days_from_civil`).
    static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The date of a count of days since 1970-01-01 (`civil_from_days`).
    static func civilFromDays(_ days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// `date` with the precision PushHub writes, so a stored time reads back equal.
    public static func truncated(_ date: Date) -> Date {
        Date(timeIntervalSince1970: Double(Int64((date.timeIntervalSince1970 * 1000).rounded())) / 1000)
    }
}

/// Checks of single fields, used by the wire messages and the hub API.
public enum FieldCheck {
    /// `field` is named only for an error (checks run for every target of a batch).
    public static func notEmpty(_ value: String, _ field: @autoclosure () -> String) throws(WireError) {
        if value.isEmpty { throw .invalidField(field: field(), reason: "must not be empty") }
    }

    /// `value` holds no control character (U+0000 to U+001F, U+007F): no device handle, key,
    /// name or header value does, a header value with a line break would end its header, and
    /// PostgreSQL refuses U+0000 in text (a refusal the store could only answer with 503).
    public static func noControlCharacters(_ value: String, _ field: @autoclosure () -> String) throws(WireError) {
        if hasControlCharacters(value) {
            throw .invalidField(field: field(), reason: "must not hold control characters")
        }
    }

    /// True when `value` holds a control character (U+0000 to U+001F, U+007F): in UTF-8 these
    /// are single bytes, and no byte of a longer character is one.
    public static func hasControlCharacters(_ value: String) -> Bool {
        value.utf8.contains(where: isControl)
    }

    /// True for a control character's byte (U+0000 to U+001F, U+007F).
    public static func isControl(_ byte: UInt8) -> Bool { byte < 0x20 || byte == 0x7F }

    /// A device's handle as the store keeps it: at most 2,048 bytes (the store indexes handles,
    /// and PostgreSQL's index rows hold at most 2,704 bytes), without control characters.
    public static func handle(_ value: String, _ field: @autoclosure () -> String) throws(WireError) {
        try storedLength(value, field())
        try noControlCharacters(value, field())
    }

    /// At most the 2,048 bytes the store indexes of a handle or an id.
    public static func storedLength(_ value: String, _ field: @autoclosure () -> String) throws(WireError) {
        guard value.utf8.count <= EndpointPolicy.maximumURLLength else {
            throw .invalidField(field: field(), reason: "is longer than \(EndpointPolicy.maximumURLLength) bytes")
        }
    }

    public static func uuid(_ value: String, _ field: String) throws(WireError) {
        if !isUUID(value) { throw .invalidField(field: field, reason: "must be a UUID, not \"\(value)\"") }
    }

    /// A UUID's canonical text: 36 characters, hex digits of either case with dashes after the
    /// 8th, 12th, 16th and 20th. Read byte by byte: `UUID(uuidString:)` parses with `sscanf`
    /// (every send and every batch is checked), and lets spaces and moved dashes through.
    public static func isUUID(_ value: String) -> Bool {
        var value = value
        return value.withUTF8 { bytes in
            guard bytes.count == 36 else { return false }
            for (offset, byte) in bytes.enumerated() {
                switch offset {
                case 8, 13, 18, 23: if byte != UInt8(ascii: "-") { return false }
                default:
                    switch byte {
                    case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"), UInt8(ascii: "A")...UInt8(ascii: "F"): break
                    default: return false
                    }
                }
            }
            return true
        }
    }

    /// Hub names as Azure Notification Hubs allows them.
    public static func hubName(_ value: String, _ field: String) throws(WireError) {
        let scalars = value.unicodeScalars
        guard let first = scalars.first, scalars.count <= 50, isLetterOrDigit(first),
            scalars.allSatisfy({ isLetterOrDigit($0) || $0 == "." || $0 == "-" || $0 == "_" })
        else {
            throw .invalidField(
                field: field,
                reason: "must be 1 to 50 letters, digits, '.', '-' or '_', starting with a letter or digit, not \"\(value)\"")
        }
    }

    public static func isLetterOrDigit(_ scalar: Unicode.Scalar) -> Bool {
        ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || ("0"..."9").contains(scalar)
    }

    /// A header a send passes to the PNS, which goes out as an HTTP header: a name of at most
    /// 128 token characters, a value of at most 4,096 bytes without control characters (tabs
    /// aside). The field an error names is the header's own.
    public static func passedHeader(name: String, value: String) throws(WireError) {
        guard !name.isEmpty, name.utf8.count <= 128, name.utf8.allSatisfy(isTokenByte) else {
            throw .invalidField(field: "headers", reason: "\(name.utf8Prefix(64)) is not a header name")
        }
        guard value.utf8.count <= 4_096, value.unicodeScalars.allSatisfy({ $0 == "\t" || ($0.value >= 0x20 && $0.value != 0x7F) }) else {
            throw .invalidField(field: name, reason: "a header value is at most 4096 bytes, without control characters")
        }
    }

    /// Most headers a send may pass (the platforms' own are a handful).
    public static let maximumPassedHeaders = 64

    /// HTTP's token characters, of which header names are made.
    public static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        default: "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }

    public static func headers(_ headers: [String: String], _ field: String) throws(WireError) {
        for name in headers.keys where name.isEmpty || name.contains(where: { $0.isWhitespace || $0 == ":" }) {
            throw .invalidField(field: field, reason: "header name \"\(name)\" is not a valid HTTP header name")
        }
        for (name, value) in headers {
            try noControlCharacters(name, "\(field).\(name)")
            try noControlCharacters(value, "\(field).\(name)")
        }
    }
}

extension String {
    /// The longest start of the text whose UTF-8 is at most `bytes` long, cut between Unicode
    /// scalars. For bounding what a record or a PNS said: `prefix(_:)` counts Characters, and
    /// one Character may be any number of bytes (a letter with a million combining marks).
    public func utf8Prefix(_ bytes: Int) -> String {
        guard utf8.count > bytes else { return self }
        var used = 0
        var end = unicodeScalars.startIndex
        for scalar in unicodeScalars {
            let width = UTF8.width(scalar)
            guard used + width <= bytes else { break }
            used += width
            end = unicodeScalars.index(after: end)
        }
        return String(unicodeScalars[..<end])
    }
}

extension WireCoding {
    /// The most bytes of a record's value PushHub produces: librdkafka refuses a record over
    /// its `message.max.bytes` (1,000,000 by default), and a refusal that comes again would
    /// hold its partition. Key and headers fit in the rest.
    public static let maximumRecordBytes = 512 * 1024

    /// `items` encoded as the messages `make` builds of them, in as few records as fit
    /// `limit` bytes each: a message over it is cut in two halves, and each half again, down to
    /// one item (about log2 of the count deep). Most fit whole, encoded once.
    public static func encodeInParts<Item, Message: WireMessage>(
        _ items: [Item], limit: Int = maximumRecordBytes, _ make: ([Item]) -> Message
    ) throws -> [Data] {
        // The whole list first, as it is (no copy): nearly every message fits.
        let value = try encode(make(items))
        guard value.count > limit, items.count > 1 else { return [value] }
        let middle = items.count / 2
        return try encodeInParts(Array(items[..<middle]), limit: limit, make) + encodeInParts(Array(items[middle...]), limit: limit, make)
    }
}
