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
        let text = Date.ISO8601FormatStyle().format(Date(timeIntervalSince1970: Double(whole)))
        let padded = String(millis + 1000).dropFirst()
        return text.dropLast() + "." + padded + "Z"
    }

    /// `date` with the precision PushHub writes, so a stored time reads back equal.
    public static func truncated(_ date: Date) -> Date {
        Date(timeIntervalSince1970: Double(Int64((date.timeIntervalSince1970 * 1000).rounded())) / 1000)
    }
}

/// Checks of single fields, used by the wire messages and the hub API.
public enum FieldCheck {
    public static func notEmpty(_ value: String, _ field: String) throws(WireError) {
        if value.isEmpty { throw .invalidField(field: field, reason: "must not be empty") }
    }

    public static func uuid(_ value: String, _ field: String) throws(WireError) {
        if UUID(uuidString: value) == nil { throw .invalidField(field: field, reason: "must be a UUID, not \"\(value)\"") }
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

    public static func headers(_ headers: [String: String], _ field: String) throws(WireError) {
        for name in headers.keys where name.isEmpty || name.contains(where: { $0.isWhitespace || $0 == ":" }) {
            throw .invalidField(field: field, reason: "header name \"\(name)\" is not a valid HTTP header name")
        }
    }
}
