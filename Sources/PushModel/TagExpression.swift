/// A tag expression such as `Sports && !Politics` or `(a || b) && $UserId:{alice}`:
/// tags joined by `&&`, `||`, `!` and parentheses.
public indirect enum TagExpression: Sendable, Hashable, CustomStringConvertible {
    case tag(String)
    case not(TagExpression)
    case and(TagExpression, TagExpression)
    case or(TagExpression, TagExpression)

    /// Most tags in an expression that uses only `||`.
    public static let maximumTagsWithOnlyOr = 20
    /// Most tags in any other expression.
    public static let maximumTags = 6
    /// Most characters of an expression: 20 tags of 120 characters with their `||`s fit.
    public static let maximumLength = 4096
    /// Most operators (`&&`, `||` and `!`, each negation counted) in an expression.
    public static let maximumOperators = 32
    /// Deepest nesting of parentheses and negations.
    public static let maximumDepth = 16

    /// Parses `text`; errors name the position (0-based, in characters) of the problem. What
    /// breaks a limit (length, operators, nesting, tags) is refused before any work that grows
    /// with it: the parser never recurses deeper than `maximumDepth`, and every tree it returns
    /// is at most `maximumOperators` deep.
    public static func parse(_ text: String) throws(TagExpressionError) -> TagExpression {
        if let tag = singleTag(text) { return .tag(tag) }
        return try parseInFull(text)
    }

    /// `text` when it is one tag and nothing else, as most sends name (`$UserId:{…}` for one
    /// user): read from its bytes, where the parser first splits the whole text into
    /// characters (1.3 % of the ingress's time on single-user sends). Nil for anything else,
    /// which the parser reads, and which it would read to the same tag (a test compares them).
    static func singleTag(_ text: String) -> String? {
        let bytes = text.utf8
        guard let first = bytes.first, bytes.count <= maximumLength else { return nil }
        // ASCII only: a byte is then a character, as the parser reads them (beyond it, a
        // character may join a brace to its neighbour).
        if first == UInt8(ascii: "$") {
            // An implicit tag runs through its first `}`, which must be its last byte.
            guard bytes.last == UInt8(ascii: "}"), bytes.firstIndex(of: UInt8(ascii: "}")) == bytes.index(before: bytes.endIndex),
                bytes.allSatisfy({ $0 < 0x80 && !FieldCheck.isControl($0) }), Tags.implicit(text) != nil
            else { return nil }
            return text
        }
        guard bytes.count <= Tags.maximumLength, bytes.allSatisfy({ $0 < 0x80 && Tags.isAllowed(Unicode.Scalar($0)) }) else { return nil }
        return text
    }

    /// The parser itself, for any expression.
    static func parseInFull(_ text: String) throws(TagExpressionError) -> TagExpression {
        guard text.utf8.count <= maximumLength else {
            throw TagExpressionError(position: 0, message: "an expression is at most \(maximumLength) bytes, not \(text.utf8.count)")
        }
        var parser = Parser(text: text)
        let expression = try parser.parseExpression()
        try parser.expectEnd()
        let tags = expression.tagCount
        let onlyOr = !expression.usesAndOrNot
        let limit = onlyOr ? maximumTagsWithOnlyOr : maximumTags
        guard tags <= limit else {
            throw TagExpressionError(
                position: 0,
                message: onlyOr
                    ? "an expression with only || may name at most \(limit) tags, not \(tags)"
                    : "an expression with && or ! may name at most \(limit) tags, not \(tags)")
        }
        return expression
    }

    /// Whether a registration with `tags` is in the audience.
    public func matches(_ tags: Set<String>) -> Bool {
        switch self {
        case .tag(let tag): tags.contains(tag)
        case .not(let inner): !inner.matches(tags)
        case .and(let left, let right): left.matches(tags) && right.matches(tags)
        case .or(let left, let right): left.matches(tags) || right.matches(tags)
        }
    }

    /// Tags of which every match carries at least one, so a store can start from its tag
    /// index instead of scanning every registration; `nil` when there are none (e.g. `!a`).
    /// Of the two sides of an `&&`, the one with fewer tags.
    public var drivingTags: Set<String>? { drivingTags { _ in 1 } }

    /// The driving tags that the fewest registrations carry, by `count` (a tag's registrations,
    /// or an estimate): of the two sides of an `&&`, the side whose tags' counts add up to less.
    public func drivingTags(weighedBy count: (String) -> Int) -> Set<String>? {
        drivingChoice(count)?.tags
    }

    private func drivingChoice(_ count: (String) -> Int) -> (tags: Set<String>, weight: Int)? {
        switch self {
        case .tag(let tag): return ([tag], count(tag))
        case .not: return nil
        case .and(let left, let right):
            switch (left.drivingChoice(count), right.drivingChoice(count)) {
            case (let l?, let r?): return l.weight <= r.weight ? l : r
            case (let l?, nil): return l
            case (nil, let r?): return r
            case (nil, nil): return nil
            }
        case .or(let left, let right):
            guard let l = left.drivingChoice(count), let r = right.drivingChoice(count) else { return nil }
            let tags = l.tags.union(r.tags)
            return (tags, tags.reduce(0) { $0 &+ count($1) })
        }
    }

    /// Whether counts can change the driving tags: some `&&` has driving tags on both sides.
    /// (`a`, `a || b`, `a && !b` start from the same tags whatever the counts.)
    public var drivingDependsOnCounts: Bool {
        switch self {
        case .tag, .not: false
        case .and(let left, let right):
            (left.drivingTags != nil && right.drivingTags != nil) || left.drivingDependsOnCounts || right.drivingDependsOnCounts
        case .or(let left, let right): left.drivingDependsOnCounts || right.drivingDependsOnCounts
        }
    }

    /// Every tag the expression names.
    public var tags: Set<String> {
        switch self {
        case .tag(let tag): [tag]
        case .not(let inner): inner.tags
        case .and(let left, let right), .or(let left, let right): left.tags.union(right.tags)
        }
    }

    /// True for a tag or tags joined by `||` only: a registration matches exactly when it
    /// carries one of them.
    public var isDisjunctionOfTags: Bool {
        switch self {
        case .tag: true
        case .or(let l, let r): l.isDisjunctionOfTags && r.isDisjunctionOfTags
        case .not, .and: false
        }
    }

    /// This expression for registrations known to carry `tag`: `nil` when it then always
    /// matches, `.never`-free otherwise (an expression that could never match keeps its form).
    public func assuming(_ tag: String) -> TagExpression? {
        switch simplified(assuming: tag) {
        case .always(true): nil
        case .always(false): .not(.tag(tag))  // matches nothing that carries the tag
        case .expression(let expression): expression
        }
    }

    private enum Simplified {
        case always(Bool)
        case expression(TagExpression)
    }

    private func simplified(assuming known: String) -> Simplified {
        switch self {
        case .tag(let tag): return tag == known ? .always(true) : .expression(self)
        case .not(let inner):
            switch inner.simplified(assuming: known) {
            case .always(let value): return .always(!value)
            case .expression(let expression): return .expression(.not(expression))
            }
        case .and(let left, let right):
            switch (left.simplified(assuming: known), right.simplified(assuming: known)) {
            case (.always(false), _), (_, .always(false)): return .always(false)
            case (.always(true), let other), (let other, .always(true)): return other
            case (.expression(let l), .expression(let r)): return .expression(.and(l, r))
            }
        case .or(let left, let right):
            switch (left.simplified(assuming: known), right.simplified(assuming: known)) {
            case (.always(true), _), (_, .always(true)): return .always(true)
            case (.always(false), let other), (let other, .always(false)): return other
            case (.expression(let l), .expression(let r)): return .expression(.or(l, r))
            }
        }
    }

    public var tagCount: Int {
        switch self {
        case .tag: 1
        case .not(let inner): inner.tagCount
        case .and(let l, let r), .or(let l, let r): l.tagCount + r.tagCount
        }
    }

    private var usesAndOrNot: Bool {
        switch self {
        case .tag: false
        case .not, .and: true
        case .or(let l, let r): l.usesAndOrNot || r.usesAndOrNot
        }
    }

    public var description: String {
        switch self {
        case .tag(let tag): tag
        case .not(let inner): "!\(inner.parenthesized)"
        case .and(let l, let r): "\(l.parenthesized) && \(r.parenthesized)"
        case .or(let l, let r): "\(l.parenthesized) || \(r.parenthesized)"
        }
    }

    private var parenthesized: String {
        switch self {
        case .tag, .not: description
        case .and, .or: "(\(description))"
        }
    }
}

/// Why a tag expression could not be read.
public struct TagExpressionError: Error, Sendable, Equatable, CustomStringConvertible {
    /// 0-based offset, in characters, of the problem.
    public var position: Int
    public var message: String

    public init(position: Int, message: String) {
        self.position = position
        self.message = message
    }

    public var description: String { "at position \(position): \(message)" }
}

private struct Parser {
    let characters: [Character]
    var index = 0
    /// Parentheses and negations open around the current position.
    var depth = 0
    var operators = 0

    /// Counts one operator at `position`, refusing one too many.
    mutating func countOperator(at position: Int) throws(TagExpressionError) {
        operators += 1
        guard operators <= TagExpression.maximumOperators else {
            throw TagExpressionError(
                position: position, message: "an expression has at most \(TagExpression.maximumOperators) operators (&&, || and each !)")
        }
    }

    /// Enters a parenthesis or negation at `position`, refusing nesting past the limit.
    mutating func enter(at position: Int) throws(TagExpressionError) {
        depth += 1
        guard depth <= TagExpression.maximumDepth else {
            throw TagExpressionError(
                position: position, message: "parentheses and negations nest at most \(TagExpression.maximumDepth) deep")
        }
    }

    init(text: String) { characters = Array(text) }

    mutating func parseExpression() throws(TagExpressionError) -> TagExpression {
        var left = try parseAnd()
        while skipSpaceAndMatch("||") {
            try countOperator(at: index - 2)
            left = .or(left, try parseAnd())
        }
        return left
    }

    private mutating func parseAnd() throws(TagExpressionError) -> TagExpression {
        var left = try parseUnary()
        while skipSpaceAndMatch("&&") {
            try countOperator(at: index - 2)
            left = .and(left, try parseUnary())
        }
        return left
    }

    private mutating func parseUnary() throws(TagExpressionError) -> TagExpression {
        skipSpace()
        if peek == "!" {
            try countOperator(at: index)
            try enter(at: index)
            index += 1
            let inner = try parseUnary()
            depth -= 1
            return .not(inner)
        }
        if peek == "(" {
            let open = index
            try enter(at: index)
            index += 1
            let inner = try parseExpression()
            skipSpace()
            guard peek == ")" else {
                throw TagExpressionError(position: index, message: "expected ')' to close the '(' at position \(open)")
            }
            index += 1
            depth -= 1
            return inner
        }
        return .tag(try parseTag())
    }

    private mutating func parseTag() throws(TagExpressionError) -> String {
        let start = index
        guard let first = peek else { throw TagExpressionError(position: index, message: "expected a tag, found the end") }
        if first == "$" {
            // An implicit tag, `$InstallationId:{id}` or `$UserId:{id}`: read through the brace.
            while let character = peek, character != "}" { index += 1 }
            guard peek == "}" else {
                throw TagExpressionError(position: start, message: "implicit tag is missing its closing '}'")
            }
            index += 1
            let tag = String(characters[start..<index])
            guard Tags.implicit(tag) != nil else {
                throw TagExpressionError(
                    position: start, message: "unknown implicit tag \"\(tag)\"; PushHub knows $InstallationId:{…} and $UserId:{…}")
            }
            // No installation or user id holds one, and PostgreSQL refuses U+0000 in text.
            guard !FieldCheck.hasControlCharacters(tag) else {
                throw TagExpressionError(position: start, message: "an implicit tag holds no control characters")
            }
            return tag
        }
        while let character = peek, character.unicodeScalars.count == 1, Tags.isAllowed(character.unicodeScalars.first!) {
            index += 1
        }
        guard index > start else {
            throw TagExpressionError(position: start, message: "expected a tag, found \"\(first)\"")
        }
        guard index - start <= Tags.maximumLength else {
            throw TagExpressionError(position: start, message: "a tag is at most \(Tags.maximumLength) characters")
        }
        return String(characters[start..<index])
    }

    mutating func expectEnd() throws(TagExpressionError) {
        skipSpace()
        if let character = peek {
            let hint = character == "&" || character == "|" ? " (operators are && and ||)" : ""
            throw TagExpressionError(position: index, message: "unexpected \"\(character)\"\(hint)")
        }
    }

    private var peek: Character? { index < characters.count ? characters[index] : nil }

    private mutating func skipSpace() {
        while let character = peek, character.isWhitespace { index += 1 }
    }

    private mutating func skipSpaceAndMatch(_ token: String) -> Bool {
        skipSpace()
        let tokenCharacters = Array(token)
        guard index + tokenCharacters.count <= characters.count,
            Array(characters[index..<index + tokenCharacters.count]) == tokenCharacters
        else { return false }
        index += tokenCharacters.count
        return true
    }
}
