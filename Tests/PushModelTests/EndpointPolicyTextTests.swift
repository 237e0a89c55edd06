import Foundation
import Testing

@testable import PushModel

@Suite("The endpoint policy's host text helpers read hosts as Foundation's trimming and lowercasing do")
struct EndpointPolicyTextTests {
    static let pieces = ["[", "]", "a", "A", "::1", "127.0.0.1", "Notify.Windows.COM", "\u{301}", "é", "K", "\u{212A}", ":443", "", " ", "İ"]

    @Test("unbracketed and lowercased match trimmingCharacters(in: \"[]\") and lowercased() on 20,000 strings of awkward pieces")
    func sameAsFoundation() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            let text = (0..<Int.random(in: 0...6, using: &generator)).map { _ in Self.pieces.randomElement(using: &generator)! }.joined()
            #expect(EndpointPolicy.unbracketed(text) == text.trimmingCharacters(in: CharacterSet(charactersIn: "[]")), "\(text.debugDescription)")
            #expect(EndpointPolicy.lowercased(text) == text.lowercased(), "\(text.debugDescription)")
        }
    }

    @Test("a pattern in capitals or with the Kelvin sign matches as its lowercase form does")
    func patternsLowercased() {
        #expect(EndpointPolicy.matches("*.NOTIFY.windows.com", host: "db5.notify.windows.com", port: 443))
        #expect(EndpointPolicy.matches("[::1]:8443", host: "[::1]", port: 8443))
        #expect(!EndpointPolicy.matches("[::1]:8443", host: "[::1]", port: 443))
        // U+212A KELVIN SIGN lowercases to "k": the pattern names k.example.
        #expect(EndpointPolicy.matches("\u{212A}.example", host: "k.example", port: 443))
        #expect(!EndpointPolicy.matches("*.example", host: ".example", port: 443))
    }
}
