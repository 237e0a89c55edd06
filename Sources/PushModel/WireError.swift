/// Why a wire message (a Kafka record value) could not be used.
public enum WireError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The bytes are not a JSON object.
    case malformedJSON(String)
    /// The object has no `schema` field.
    case missingSchema
    /// The `schema` names a message type or version this build does not know.
    case unknownSchema(String)
    /// The message is of the expected schema but a field is missing or invalid.
    case invalidField(field: String, reason: String)

    public var description: String {
        switch self {
        case .malformedJSON(let detail): "not a JSON object: \(detail)"
        case .missingSchema: "schema: missing"
        case .unknownSchema(let schema): "schema: unknown schema \"\(schema)\""
        case .invalidField(let field, let reason): "\(field): \(reason)"
        }
    }

    /// The field at fault, for errors about one field.
    public var field: String? {
        switch self {
        case .invalidField(let field, _): field
        case .missingSchema, .unknownSchema: "schema"
        case .malformedJSON: nil
        }
    }
}
