import Foundation

/// The fields of an `application/x-www-form-urlencoded` text (a form's body, or a query):
/// at most 32 fields, names and values percent-decoded with `+` as a space. A name given
/// twice keeps its first value.
struct ConsoleForm: Sendable {
    static let fieldLimit = 32
    static let bodyLimit = 96 * 1_024

    private(set) var fields: [String: String] = [:]

    init(_ text: Substring) throws(ConsoleFormError) {
        for (index, pair) in text.split(separator: "&", omittingEmptySubsequences: true).enumerated() {
            guard index < Self.fieldLimit else { throw ConsoleFormError(message: "a form has at most \(Self.fieldLimit) fields") }
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = Self.decode(parts[0]), let value = Self.decode(parts.count > 1 ? parts[1] : "") else {
                throw ConsoleFormError(message: "a form field is not percent-encoded UTF-8")
            }
            if fields[name] == nil { fields[name] = value }
        }
    }

    init(query: String?) throws(ConsoleFormError) {
        try self.init(Substring(query ?? ""))
    }

    private static func decode(_ text: Substring) -> String? {
        String(text).replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }

    /// The field, trimmed of surrounding spaces and line ends; nil when absent or empty.
    subscript(_ name: String) -> String? {
        guard let value = fields[name]?.trimmingCharacters(in: .whitespacesAndNewlines), !value.isEmpty else { return nil }
        return value
    }

    /// The field as given, without trimming.
    func raw(_ name: String) -> String? { fields[name] }
}

struct ConsoleFormError: Error, Sendable {
    var message: String
}
