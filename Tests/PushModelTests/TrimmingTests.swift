import PushModel
import Testing

@Suite("Trimming spaces and tabs as HTTP does")
struct TrimmingTests {
    @Test(
        "leading and trailing spaces and tabs go; inner ones, newlines and other characters stay",
        arguments: [
            ("  a b\t", "a b"), ("\t\t", ""), ("", ""), ("x", "x"), (" é ", "é"), ("  🚀x🚀  ", "🚀x🚀"), ("\na\n", "\na\n"),
            (" e\u{301} ", "e\u{301}"),
        ])
    func trimmed(_ text: String, _ expected: String) {
        #expect(String(text.trimmingSpaces) == expected)
        #expect(String(text[...].trimmingSpaces) == expected, "the same on a substring")
    }
}
