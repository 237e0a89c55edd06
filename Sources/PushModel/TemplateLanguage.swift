import Foundation
import Synchronization

/// What a template body is, which decides where expressions may stand and how values are escaped.
public enum TemplateDocument: Sendable {
    /// APNs, FCM and Web Push bodies: expressions in string values (not keys).
    case json
    /// WNS bodies: expressions in element text and attribute values.
    case xml
}

/// Why a template could not be filled.
public struct TemplateError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// The template expression language of Azure Notification Hubs:
///
/// - `$(p)` the property's value; `$(p, n)` at most its first n characters;
/// - `.(p, n)` the same, ending in `...` when cut (n characters in all);
/// - `%(p)` the value URL-encoded; `#(p)` the value, and in JSON a bare number when it is one
///   and the expression is the whole string;
/// - `'text'` a literal; `{a + b + …}` the concatenation of expressions and literals.
///
/// Property names are case-insensitive; a missing property is an empty string.
public struct TemplateRenderer: Sendable {
    private let properties: [String: String]

    /// `properties` are the notification's, e.g. from `TemplateProperties.parse`.
    public init(properties: [String: String]) {
        var lowered: [String: String] = [:]
        for (name, value) in properties { lowered[name.lowercased()] = value }
        self.properties = lowered
    }

    /// Most bytes of a template body (every PNS takes 5,000 bytes or fewer).
    public static let maximumTemplateLength = 16 * 1024
    /// Most expressions (`$(`, `#(`, `%(` and `.(`, whether or not they read as one) in a template.
    public static let maximumExpressions = 256
    /// Most bytes a filled template may grow to.
    public static let maximumOutput = 64 * 1024
    /// Most characters of a property name, a length or a quoted literal inside an expression.
    static let maximumTokenLength = 1024

    /// Fills a template body; the result is valid JSON or XML when the template was.
    public func render(_ body: String, as document: TemplateDocument) throws(TemplateError) -> String {
        try Self.checkSize(body)
        var budget = Budget()
        let output =
            switch document {
            case .json: try renderJSON(body, &budget)
            case .xml: try renderXML(body, &budget)
            }
        return output
    }

    /// What one rendering may still spend: expression starts (whether or not they read as
    /// one, so failed starts cannot make the work grow past the limit) and bytes produced.
    struct Budget {
        var starts = 0
        var produced = 0
    }

    /// Fills a value that is not inside a document (an APNs expiry, a WNS header): no escaping.
    public func render(value text: String) throws(TemplateError) -> String {
        try Self.checkSize(text)
        var budget = Budget()
        return try fill(text, &budget).map(\.text).joined()
    }

    /// Refuses a template over the length limit before any work that grows with it (expression
    /// starts are counted by the `Budget` as they are met, after JSON unescaping).
    static func checkSize(_ template: String) throws(TemplateError) {
        guard template.utf8.count <= maximumTemplateLength else {
            throw TemplateError("a template is at most \(maximumTemplateLength) bytes, not \(template.utf8.count)")
        }
    }

    /// Counts what an expression produced, refusing a rendering that would grow past `maximumOutput`.
    private static func spend(_ value: String, _ budget: inout Budget) throws(TemplateError) {
        budget.produced += value.utf8.count
        guard budget.produced <= maximumOutput else { throw TemplateError("the filled template is over \(maximumOutput) bytes") }
    }

    /// Checks that a template's expressions can be read and, for JSON, that it fills to JSON.
    public static func validate(_ body: String, as document: TemplateDocument) throws(TemplateError) {
        let filled = try TemplateRenderer(properties: [:]).render(body, as: document)
        if document == .json, JSONLimits.object(Data(filled.utf8)) == nil {
            throw TemplateError("the template is not JSON")
        }
    }

    /// Checks a template registration's parts: the body, and the expiry and headers, which may
    /// hold expressions too. `field` names the template in errors.
    public static func validate(body: String, headers: [String: String]?, expiry: String?, format: NativeFormat, field: String)
        throws(WireError)
    {
        let checked = CheckedTemplate(template: Template(body: body, headers: headers, expiry: expiry), xml: format == .windows)
        if CheckedTemplate.valid.withLock({ $0.contains(checked) }) { return }
        try validateUncached(body: body, headers: headers, expiry: expiry, format: format, field: field)
        CheckedTemplate.valid.withLock { valid in
            if valid.count >= CheckedTemplate.capacity { valid.removeAll(keepingCapacity: true) }
            valid.insert(checked)
        }
    }

    private static func validateUncached(body: String, headers: [String: String]?, expiry: String?, format: NativeFormat, field: String)
        throws(WireError)
    {
        let renderer = TemplateRenderer(properties: [:])
        do {
            try validate(body, as: format == .windows ? .xml : .json)
        } catch {
            throw .invalidField(field: "\(field).body", reason: error.message)
        }
        do {
            for value in (headers ?? [:]).values { _ = try renderer.render(value: value) }
            if let expiry { _ = try renderer.render(value: expiry) }
        } catch {
            throw .invalidField(field: field, reason: error.message)
        }
        // An APNs expiry without expressions is the same for every push: a time APNs can take.
        if format == .apple, let expiry, !expiry.isEmpty, Template.isLiteral(expiry), Template.expirationSeconds(expiry) == nil {
            throw .invalidField(
                field: "\(field).expiry",
                reason: "must be a time from 1970 to 9999 (RFC 3339, or seconds since 1970) or an expression, not \"\(expiry.prefix(64))\"")
        }
    }

    /// A template found valid. An app registers the same few templates from every device, and
    /// checking one by rendering it was a twentieth of the ingress's time per registration:
    /// the valid ones are remembered, at most `capacity` of them (then all are forgotten).
    /// Compared by bytes, not as Swift compares strings (canonical equivalence): the checks
    /// count bytes, and a longer spelling of a remembered template must be checked itself.
    private struct CheckedTemplate: Hashable {
        var template: Template
        var xml: Bool

        static func == (a: CheckedTemplate, b: CheckedTemplate) -> Bool {
            a.xml == b.xml && a.template.hasSameBytes(as: b.template)
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(xml)
            var body = template.body
            body.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
            hasher.combine(template.expiry?.utf8.count ?? -1)
            hasher.combine(template.headers?.count ?? 0)
        }

        static let capacity = 1_000
        static let valid = Mutex<Set<CheckedTemplate>>([])
    }

    // MARK: Documents

    private func renderJSON(_ body: String, _ budget: inout Budget) throws(TemplateError) -> String {
        let characters = Array(body)
        var output = ""
        output.reserveCapacity(body.count + 64)
        var index = 0
        while index < characters.count {
            let character = characters[index]
            guard character == "\"" else {
                output.append(character)
                index += 1
                continue
            }
            // A string literal: find its end, decode it.
            var end = index + 1
            var raw = ""
            while end < characters.count, characters[end] != "\"" {
                if characters[end] == "\\", end + 1 < characters.count {
                    raw.append(characters[end])
                    end += 1
                }
                raw.append(characters[end])
                end += 1
            }
            guard end < characters.count else { throw TemplateError("the template has an unterminated JSON string") }
            var after = end + 1
            while after < characters.count, characters[after].isWhitespace { after += 1 }
            let isKey = after < characters.count && characters[after] == ":"
            if isKey {
                output += "\"" + raw + "\""
            } else {
                let decoded = try Self.decodeJSONString(raw)
                let pieces = try fill(decoded, &budget)
                if pieces.count == 1, pieces[0].fromNumberExpression, Self.isJSONNumber(pieces[0].text) {
                    output += pieces[0].text
                } else {
                    output += Self.encodeJSONString(pieces.map(\.text).joined())
                }
            }
            index = end + 1
        }
        return output
    }

    private func renderXML(_ body: String, _ budget: inout Budget) throws(TemplateError) -> String {
        var output = ""
        output.reserveCapacity(body.count + 64)
        var rest = Substring(body)
        while !rest.isEmpty {
            guard let open = rest.firstIndex(of: "<") else {
                output += try fillXMLText(rest, &budget)
                break
            }
            output += try fillXMLText(rest[..<open], &budget)
            rest = rest[open...]
            // Comments, CDATA, declarations and processing instructions are copied as they are.
            for (start, stop) in [("<!--", "-->"), ("<![CDATA[", "]]>"), ("<?", "?>"), ("<!", ">")] where rest.hasPrefix(start) {
                guard let close = rest.range(of: stop) else { throw TemplateError("the template has an unterminated \(start)") }
                output += rest[..<close.upperBound]
                rest = rest[close.upperBound...]
                break
            }
            guard rest.hasPrefix("<"), !rest.hasPrefix("<!"), !rest.hasPrefix("<?") else { continue }
            // A tag: attribute values in quotes are filled, the rest copied.
            var tagEnd = rest.startIndex
            var quote: Character?
            var tag = ""
            var value = ""
            while tagEnd < rest.endIndex {
                let character = rest[tagEnd]
                if let open = quote {
                    if character == open {
                        tag += try fillXMLText(Substring(value), &budget, attribute: true) + String(character)
                        value = ""
                        quote = nil
                    } else {
                        value.append(character)
                    }
                } else {
                    tag.append(character)
                    if character == "\"" || character == "'" { quote = character }
                    if character == ">" { break }
                }
                tagEnd = rest.index(after: tagEnd)
            }
            guard tagEnd < rest.endIndex else { throw TemplateError("the template has an unterminated XML tag") }
            output += tag
            rest = rest[rest.index(after: tagEnd)...]
        }
        return output
    }

    /// Fills XML character data as written in the document (entities stay as they are; what
    /// expressions produce is escaped).
    private func fillXMLText(_ text: Substring, _ budget: inout Budget, attribute: Bool = false) throws(TemplateError) -> String {
        guard text.contains(where: { "$.%#{".contains($0) }) else { return String(text) }
        return try fill(String(text), &budget).map { piece in
            piece.isLiteral ? piece.text : Self.escapeXML(piece.text)
        }.joined()
    }

    // MARK: Expressions

    struct Piece {
        var text: String
        /// Text of the template itself (not a value), copied as written.
        var isLiteral: Bool
        var fromNumberExpression = false
    }

    /// Splits text into literal runs and evaluated expressions.
    private func fill(_ text: String, _ budget: inout Budget) throws(TemplateError) -> [Piece] {
        let characters = Array(text)
        var pieces: [Piece] = []
        var literal = ""
        var index = 0
        func flush() {
            if !literal.isEmpty { pieces.append(Piece(text: literal, isLiteral: true)) }
            literal = ""
        }
        while index < characters.count {
            let character = characters[index]
            if "$.%#".contains(character), index + 1 < characters.count, characters[index + 1] == "(" {
                budget.starts += 1
                guard budget.starts <= Self.maximumExpressions else {
                    throw TemplateError("a template holds at most \(Self.maximumExpressions) expressions")
                }
                var parser = ExpressionParser(characters: characters, index: index)
                let call: ExpressionParser.Call
                do {
                    call = try parser.parseCall()
                } catch {
                    // `$(` and `#(` always mean an expression; `.(` and `%(` also occur in prose.
                    guard character == "." || character == "%" else { throw error }
                    literal.append(character)
                    index += 1
                    continue
                }
                flush()
                let value = evaluate(call)
                try Self.spend(value, &budget)
                pieces.append(Piece(text: value, isLiteral: false, fromNumberExpression: call.function == "#"))
                index = parser.index
            } else if character == "{", var parser = Optional(ExpressionParser(characters: characters, index: index)),
                let terms = try? parser.parseBraces()
            {
                flush()
                var value = ""
                for term in terms {
                    let part: String
                    switch term {
                    case .literal(let text): part = text
                    case .call(let call):
                        budget.starts += 1
                        guard budget.starts <= Self.maximumExpressions else {
                            throw TemplateError("a template holds at most \(Self.maximumExpressions) expressions")
                        }
                        part = evaluate(call)
                    }
                    try Self.spend(part, &budget)
                    value += part
                }
                pieces.append(Piece(text: value, isLiteral: false))
                index = parser.index
            } else {
                literal.append(character)
                index += 1
            }
        }
        flush()
        return pieces
    }

    private func evaluate(_ call: ExpressionParser.Call) -> String {
        let value = properties[call.property.lowercased()] ?? ""
        switch call.function {
        case "$", "#":
            guard let limit = call.limit, value.count > limit else { return value }
            return String(value.prefix(limit))
        case ".":
            guard let limit = call.limit, value.count > limit else { return value }
            return String(value.prefix(max(0, limit - 3))) + String("...".prefix(limit))
        default:  // "%"
            var allowed = CharacterSet.alphanumerics
            allowed.insert(charactersIn: "-._~")
            return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value
        }
    }

    // MARK: Escaping

    static func isJSONNumber(_ text: String) -> Bool {
        text.wholeMatch(of: /(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/) != nil
    }

    static func encodeJSONString(_ text: String) -> String {
        var output = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case "\n": output += "\\n"
            case "\r": output += "\\r"
            case "\t": output += "\\t"
            case "\u{08}": output += "\\b"
            case "\u{0C}": output += "\\f"
            case _ where scalar.value < 0x20 || scalar.value == 0x2028 || scalar.value == 0x2029:
                output += String(format: "\\u%04x", scalar.value)
            default: output.unicodeScalars.append(scalar)
            }
        }
        return output + "\""
    }

    static func decodeJSONString(_ raw: String) throws(TemplateError) -> String {
        guard raw.contains("\\") else { return raw }
        guard let data = "\"\(raw)\"".data(using: .utf8),
            let decoded = try? JSONDecoder().decode(String.self, from: data)
        else { throw TemplateError("the template has an invalid JSON string escape in \"\(raw.prefix(40))\"") }
        return decoded
    }

    /// Text safe inside an XML element or a quoted attribute; characters XML 1.0 does not
    /// allow are dropped.
    public static func escapeXML(_ text: String) -> String {
        var output = ""
        output.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": output += "&amp;"
            case "<": output += "&lt;"
            case ">": output += "&gt;"
            case "\"": output += "&quot;"
            case "'": output += "&apos;"
            // Characters XML 1.0 does not allow are dropped.
            case _ where scalar.value < 0x20 && scalar != "\t" && scalar != "\n" && scalar != "\r": continue
            default: output.unicodeScalars.append(scalar)
            }
        }
        return output
    }
}

/// Reads one expression: `$(p)`, `$(p, n)`, `.(p, n)`, `%(p)`, `#(p)`, or `{term + term}`.
private struct ExpressionParser {
    struct Call {
        var function: Character
        var property: String
        var limit: Int?
    }

    enum Term {
        case literal(String)
        case call(Call)
    }

    let characters: [Character]
    var index: Int

    mutating func parseCall() throws(TemplateError) -> Call {
        let start = index
        let function = characters[index]
        index += 2  // the function character and "("
        skipSpace()
        var name = ""
        var nameLength = 0
        while index < characters.count, characters[index] != ")", characters[index] != ",", !characters[index].isWhitespace {
            name.append(characters[index])
            index += 1
            nameLength += 1
            guard nameLength <= TemplateRenderer.maximumTokenLength else {
                throw TemplateError("expression at \(start): a property name is at most \(TemplateRenderer.maximumTokenLength) characters")
            }
        }
        skipSpace()
        var limit: Int?
        if index < characters.count, characters[index] == "," {
            index += 1
            skipSpace()
            var digits = ""
            while index < characters.count, characters[index].isASCII, characters[index].isNumber, digits.count < 9 {
                digits.append(characters[index])
                index += 1
            }
            guard let number = Int(digits) else { throw TemplateError("expression at \(start): the length after ',' must be a number") }
            limit = number
            skipSpace()
        }
        guard index < characters.count, characters[index] == ")" else {
            throw TemplateError("expression at \(start): \(function)( is not closed")
        }
        index += 1
        guard !name.isEmpty else { throw TemplateError("expression at \(start): \(function)() names no property") }
        if function == "." && limit == nil { throw TemplateError("expression at \(start): .(\(name), n) needs a length") }
        if (function == "%" || function == "#") && limit != nil {
            throw TemplateError("expression at \(start): \(function)(\(name)) takes no length")
        }
        return Call(function: function, property: name, limit: limit)
    }

    mutating func parseBraces() throws(TemplateError) -> [Term] {
        index += 1  // "{"
        var terms: [Term] = []
        while true {
            skipSpace()
            guard index < characters.count else { throw TemplateError("{ is not closed") }
            if characters[index] == "'" {
                index += 1
                var text = ""
                var length = 0
                while index < characters.count, characters[index] != "'" {
                    text.append(characters[index])
                    index += 1
                    length += 1
                    guard length <= TemplateRenderer.maximumTokenLength else {
                        throw TemplateError("a quoted literal is at most \(TemplateRenderer.maximumTokenLength) characters")
                    }
                }
                guard index < characters.count else { throw TemplateError("a quoted literal is not closed") }
                index += 1
                terms.append(.literal(text))
            } else if "$.%#".contains(characters[index]), index + 1 < characters.count, characters[index + 1] == "(" {
                terms.append(.call(try parseCall()))
            } else {
                throw TemplateError("{ holds something other than expressions and 'literals'")
            }
            skipSpace()
            guard index < characters.count else { throw TemplateError("{ is not closed") }
            if characters[index] == "}" {
                index += 1
                return terms
            }
            guard characters[index] == "+" else { throw TemplateError("terms in { } are joined by +") }
            index += 1
        }
    }

    private mutating func skipSpace() {
        while index < characters.count, characters[index].isWhitespace { index += 1 }
    }
}
