import Foundation
import PushTestSupport
import Testing

@testable import PushModel

@Suite("Tag expressions")
struct TagExpressionTests {
    @Test(
        "expressions parse to what they mean",
        arguments: [
            ("Sports", "Sports"),
            ("Sports && !Politics", "Sports && !Politics"),
            ("a || b && c", "a || (b && c)"),
            ("(a || b) && c", "(a || b) && c"),
            ("!!a", "!!a"),
            ("  a&&b  ", "a && b"),
            ("$InstallationId:{phone-1} || $UserId:{alice}", "$InstallationId:{phone-1} || $UserId:{alice}"),
            ("username:alice", "username:alice"),
        ])
    func parses(_ text: String, _ printed: String) throws {
        #expect(try TagExpression.parse(text).description == printed)
    }

    @Test(
        "syntax errors say where",
        arguments: [
            ("", 0, "expected a tag, found the end"),
            ("a &&", 4, "expected a tag, found the end"),
            ("a & b", 2, "unexpected \"&\" (operators are && and ||)"),
            ("(a || b", 7, "expected ')' to close the '(' at position 0"),
            ("a b", 2, "unexpected \"b\""),
            ("a || %", 5, "expected a tag, found \"%\""),
            ("$InstallationId:{x", 0, "implicit tag is missing its closing '}'"),
            ("$Other:{x}", 0, "unknown implicit tag \"$Other:{x}\"; PushHub knows $InstallationId:{…} and $UserId:{…}"),
        ])
    func syntaxErrors(_ text: String, _ position: Int, _ message: String) {
        #expect(throws: TagExpressionError(position: position, message: message)) { try TagExpression.parse(text) }
    }

    @Test("limits: 20 tags with only ||, 6 otherwise")
    func limits() throws {
        let twenty = (1...20).map { "t\($0)" }.joined(separator: " || ")
        #expect(try TagExpression.parse(twenty).tagCount == 20)
        #expect(throws: TagExpressionError.self) { try TagExpression.parse(twenty + " || t21") }
        let six = (1...6).map { "t\($0)" }.joined(separator: " && ")
        #expect(try TagExpression.parse(six).tagCount == 6)
        #expect(throws: TagExpressionError.self) { try TagExpression.parse(six + " && t7") }
        #expect(throws: TagExpressionError.self) { try TagExpression.parse("a || b || c || d || e || f || !g") }
        #expect(throws: TagExpressionError.self) { try TagExpression.parse(String(repeating: "x", count: 121)) }
    }

    @Test(
        "matching and the tags a store can start from",
        arguments: [
            ("a && !b", ["a"], true, ["a"]),
            ("a && !b", ["a", "b"], false, ["a"]),
            ("!a", ["b"], true, nil),
            ("(a || b) && c", ["b", "c"], true, ["c"]),
            ("a || !b", ["c"], true, nil),
            ("a || b", ["c"], false, ["a", "b"]),
        ] as [(String, [String], Bool, [String]?)])
    func matching(_ text: String, _ tags: [String], _ matches: Bool, _ driving: [String]?) throws {
        let expression = try TagExpression.parse(text)
        #expect(expression.matches(Set(tags)) == matches)
        #expect(expression.drivingTags == driving.map(Set.init))
    }
}

extension TagExpressionTests {
    @Test(
        "assuming a tag is present simplifies an expression without changing what it matches",
        arguments: [
            ("a", "a", nil),
            ("a && !b", "a", "!b"),
            ("(a || b) && c", "c", "a || b"),
            ("a || b", "a", nil),
            ("!a", "a", "!a"),
            ("a && b && !(c || a)", "a", "!a"),
        ] as [(String, String, String?)])
    func assuming(_ text: String, _ tag: String, _ simplified: String?) throws {
        let expression = try TagExpression.parse(text)
        let result = expression.assuming(tag)
        #expect(result?.description == simplified)
        // Same verdict as the original for every tag set that holds the assumed tag.
        for extra in [[], ["b"], ["c"], ["b", "c"]] as [[String]] {
            let tags = Set(extra + [tag])
            #expect((result?.matches(tags) ?? true) == expression.matches(tags), "\(text) with \(tags)")
        }
    }
}

extension TagExpressionTests {
    @Test(
        "driving tags weighed by counts: an && starts from its rarer side; counts matter only where an && has driving tags on both sides",
        arguments: [
            ("a && b", ["a": 10, "b": 3], ["b"], true),
            ("b && a", ["a": 10, "b": 3], ["b"], true),
            ("(a || b) && c", ["a": 1, "b": 1, "c": 5], ["a", "b"], true),
            ("(a || b) && c", ["a": 4, "b": 2, "c": 5], ["c"], true),
            ("a && !b", ["a": 10, "b": 1], ["a"], false),
            ("a || b", ["a": 10, "b": 1], ["a", "b"], false),
            ("!(a && b) && c", ["a": 1, "b": 1, "c": 9], ["c"], false),
            ("(a && b) || c", ["a": 9, "b": 1, "c": 9], ["b", "c"], true),
            ("a && b && c", ["a": 5, "b": 7, "c": 6], ["a"], true),
        ])
    func weighedDrivingTags(_ text: String, _ counts: [String: Int], _ driving: [String], _ dependsOnCounts: Bool) throws {
        let expression = try TagExpression.parse(text)
        #expect(expression.drivingTags(weighedBy: { counts[$0] ?? 0 }) == Set(driving))
        #expect(expression.drivingDependsOnCounts == dependsOnCounts)
        #expect(expression.tags == Set(counts.keys))
    }

    @Test("an implicit tag names its installation or user, compared byte by byte as the databases compare it")
    func implicitTags() throws {
        let cases: [(String, Tags.Implicit?)] = [
            ("$UserId:{bob}", .user("bob")), ("$InstallationId:{i-1$!~}", .installation("i-1$!~")),
            // A combining mark would join the brace as one character; the bytes still tell.
            ("$UserId:{\u{301}carol}", .user("\u{301}carol")), ("$UserId:{}", .user("")),
            ("$UserId:{bob", nil), ("$UserId:bob}", nil), ("$userid:{bob}", nil), ("$Other:{x}", nil), ("Sports", nil), ("$", nil),
        ]
        for (tag, want) in cases {
            #expect(Tags.implicit(tag) == want, "\(tag)")
        }
        #expect(Tags.implicit(Tags.user("\u{301}carol")) == .user("\u{301}carol"))
        #expect(Tags.implicit(Tags.installation("phone-1")) == .installation("phone-1"))
        // The parser tells implicit tags apart by the same classifier.
        #expect(try TagExpression.parse("$UserId:{\u{301}carol}") == .tag("$UserId:{\u{301}carol}"))
        #expect(throws: TagExpressionError.self) { try TagExpression.parse("$Other:{x}") }
    }

    @Test("a text that is one tag is read without the parser, to what the parser reads; anything else goes to the parser")
    func singleTags() {
        let corpus = [
            "Sports", "$UserId:{bob}", "$InstallationId:{i-1$!~}", "$UserId:{}", "$UserId:{a}}", "$UserId:{a} ", " Sports", "Sports ",
            "Sports&&Music", "$UserId:{a && b}", "$UserId:{a}&&x", "$UserId:{a\u{600}}", "$UserId:{\u{301}carol}", "$UserId:{x}\u{301}",
            "$userid:{bob}", "$Other:{x}", "$", "", "!Sports", "(Sports)", "Spo rts", "Spörts", String(repeating: "a", count: 120),
            String(repeating: "a", count: 121), "$UserId:{" + String(repeating: "x", count: 5_000) + "}", "a\r\n", "$UserId:{\r\n}",
            // The expression's limit, 4,096 bytes, and one past it.
            "$UserId:{" + String(repeating: "x", count: 4_096 - 10) + "}", "$UserId:{" + String(repeating: "x", count: 4_097 - 10) + "}",
        ]
        // Seeded, so a failure can be run again: the seed is in its message.
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SeededGenerator(seed: seed)
        let pieces = [
            "a", "Z", "9", "_", "@", "#", ".", ":", "-", "$", "{", "}", " ", "&", "|", "!", "(", ")", "é", "\u{301}", "\u{600}", "\r", "\n",
        ]
        let mutated = (0..<20_000).map { _ in
            let base = corpus.randomElement(using: &generator)!
            var text = base.count > 200 ? String(base.prefix(200)) : base
            for _ in 0..<Int.random(in: 0...3, using: &generator) {
                let piece = pieces.randomElement(using: &generator)!
                let at = text.index(text.startIndex, offsetBy: Int.random(in: 0...text.count, using: &generator))
                text.insert(contentsOf: piece, at: at)
            }
            return text
        }
        var fast = 0
        for text in corpus + mutated {
            let parsed = Result { () throws(TagExpressionError) in try TagExpression.parse(text) }
            let inFull = Result { () throws(TagExpressionError) in try TagExpression.parseInFull(text) }
            #expect(parsed == inFull, "\(text.prefix(80).debugDescription), seed \(seed)")
            if let tag = TagExpression.singleTag(text) {
                fast += 1
                #expect(inFull == .success(.tag(tag)) && tag == text, "\(text.prefix(80).debugDescription), seed \(seed)")
            }
        }
        // Both kinds of single tag took the short way.
        #expect(TagExpression.singleTag("Sports") == "Sports" && TagExpression.singleTag("$UserId:{bob}") == "$UserId:{bob}")
        #expect(fast > 1_000, "\(fast) of \(corpus.count + mutated.count)")
    }

    @Test("an implicit tag holds no control characters, through the parser or the one-tag path")
    func implicitControlCharacters() throws {
        for text in ["$UserId:{a\u{0}b}", "$InstallationId:{a\tb}", "$UserId:{a\u{7F}}", "Sports && $UserId:{a\u{0}}"] {
            #expect(throws: TagExpressionError.self, "\(text.debugDescription)") { try TagExpression.parse(text) }
            #expect(TagExpression.singleTag(text) == nil)
        }
        #expect(try TagExpression.parse("$UserId:{a.b@c}") == .tag("$UserId:{a.b@c}"))
    }
}
