import Foundation
import PushTestSupport
import Testing

@testable import PushModel

@Suite("The endpoint policy's host text helpers read hosts as Foundation's trimming and lowercasing do")
struct EndpointPolicyTextTests {
    static let pieces = ["[", "]", "a", "A", "::1", "127.0.0.1", "Notify.Windows.COM", "\u{301}", "é", "K", "\u{212A}", ":443", "", " ", "İ"]

    @Test("unbracketed and lowercased match trimmingCharacters(in: \"[]\") and lowercased() on 20,000 strings of awkward pieces")
    func sameAsFoundation() {
        var generator = SeededGenerator(seed: 0x5EED)
        for _ in 0..<20_000 {
            let text = (0..<Int.random(in: 0...6, using: &generator)).map { _ in Self.pieces.randomElement(using: &generator)! }.joined()
            #expect(EndpointPolicy.unbracketed(text) == text.trimmingCharacters(in: CharacterSet(charactersIn: "[]")), "\(text.debugDescription)")
            #expect(EndpointPolicy.lowercased(text) == text.lowercased(), "\(text.debugDescription)")
        }
    }

    @Test("a pattern in capitals or with the Kelvin sign matches as its lowercase form does")
    func patternsLowercased() {
        #expect(EndpointPolicy.matches([.init("*.NOTIFY.windows.com")], host: "db5.notify.windows.com", port: 443))
        #expect(EndpointPolicy.matches([.init("[::1]:8443")], host: "[::1]", port: 8443))
        #expect(!EndpointPolicy.matches([.init("[::1]:8443")], host: "[::1]", port: 443))
        // U+212A KELVIN SIGN lowercases to "k": the pattern names k.example.
        #expect(EndpointPolicy.matches([.init("\u{212A}.example")], host: "k.example", port: 443))
        #expect(!EndpointPolicy.matches([.init("*.example")], host: ".example", port: 443))
    }

    @Test("hosts changed after the policy was made are the ones it checks against")
    func hostsChanged() {
        var policy = EndpointPolicy(wnsHosts: ["*.notify.test"])
        #expect((try? policy.checkedText("https://a.notify.test/", platform: .wns).get()) != nil)
        policy.wnsHosts = ["*.other.test"]
        #expect((try? policy.checkedText("https://a.notify.test/", platform: .wns).get()) == nil)
        #expect((try? policy.checkedText("https://a.other.test/", platform: .wns).get()) != nil)
        policy.webPushHosts.append("127.0.0.1:9")
        #expect((try? policy.checkedText("http://127.0.0.1:9/p", platform: .webpush).get()) != nil)
        #expect(policy == EndpointPolicy(wnsHosts: ["*.other.test"], webPushHosts: ["127.0.0.1:9"]))
    }

    static let urlPieces = [
        "https://", "http://", "HTTPS://", "ftp://", "a", "Z", "notify.windows.com", "db5.notify.windows.com", ":", "443", "0443", "65535",
        "65536", "123456", "/", "//", "?", "#", "%", "%2", "%41", "%zz", "@", "u:p@", "[", "]", "[::1]", " ", "\u{E9}", "\\", "-", ".", "..",
        "127.0.0.1", "0x7f.1", "~", "'", "=", "&", "q=1", "\u{0}", "\n", "\"", "<", "{", "|", "^", "`",
    ]

    static let plainPieces = [
        "a", "db5.notify.windows.com", "127.0.0.1", "-", ".", ":", "443", "0443", "65535", "65536", "/", "?", "%41", "%2", "q=1", "~", "'", "@",
        "&", "(", "*", "+", ",", ";", "$", "!", "_", "Z",
    ]

    @Test("a plain URL is read without Foundation's parser as Foundation reads it: scheme, host, port and text, on 40,000 strings")
    func plainReadingSameAsFoundation() throws {
        var generator = SeededGenerator(seed: 0x5EED)
        var plain = 0
        let policy = EndpointPolicy(wnsHosts: ["*.notify.windows.com", "127.0.0.1:8443"], webPushHosts: ["127.0.0.1"])
        for round in 0..<40_000 {
            // Half of them shaped as a URL (scheme, host, perhaps a port, then pieces a plain URL
            // may hold), so that many are plain; the rest anything.
            func some(_ pieces: [String], _ counts: ClosedRange<Int>) -> String {
                (0..<Int.random(in: counts, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
            }
            let text =
                round % 2 == 0
                ? ["https://", "http://"].randomElement(using: &generator)!
                    + some(["a", "db5.notify.windows.com", "127.0.0.1", "-", ".", "Z"], 1...3)
                    + some([":443", ":0443", ":65535", ":65536", ":", ":8443", ""], 0...1) + some(["/", "?", "#", ""], 0...1)
                    + some(Self.plainPieces, 0...5)
                : some(Self.urlPieces, 0...7)
            guard let reading = EndpointPolicy.plainReading(text) else { continue }
            plain += 1
            let full = try #require(try? EndpointPolicy.fullReading(text).get(), "\(text.debugDescription)")
            #expect(full.reading == reading, "\(text.debugDescription)")
            #expect(full.url.absoluteString == text, "\(text.debugDescription)")
            // What Web Push resolves and connects to: the URL that url(_:platform:) makes.
            let made = try #require(URL(string: text), "\(text.debugDescription)")
            #expect(made.host == reading.host && (made.port ?? (made.scheme == "https" ? 443 : 80)) == reading.port, "\(text.debugDescription)")
        }
        #expect(plain > 3_000, "enough of the strings are plain URLs (\(plain))")
    }

    @Test("what is not plain is read by Foundation's parser: capitals, user info, a fragment, brackets, a bad escape or port")
    func notPlain() {
        for text in [
            "HTTPS://db5.notify.windows.com/", "https://DB5.notify.windows.com/", "https://u:p@db5.notify.windows.com/",
            "https://db5.notify.windows.com/#x", "https://[::1]:8443/", "https://db5.notify.windows.com/%4", "https://h:65536/",
            "https://h:/", "https://h:123456/", "https://h\\x/", "https://h/a b", "https://h/é", "ftp://h/", "https://h#",
        ] {
            #expect(EndpointPolicy.plainReading(text) == nil, "\(text)")
        }
        #expect(
            EndpointPolicy.plainReading("https://db5.notify.windows.com:0443/?token=a%2Fb")
                == .init(scheme: "https", host: "db5.notify.windows.com", port: 443))
        #expect(EndpointPolicy.plainReading("http://127.0.0.1") == .init(scheme: "http", host: "127.0.0.1", port: 80))
        let policy = EndpointPolicy()
        #expect(
            policy.checkedText("https://u:p@db5.notify.windows.com/", platform: .wns) == .failure(.init("must not carry a user name or password")))
        #expect(policy.checkedText("https://DB5.Notify.Windows.com/x", platform: .wns) == .success("https://DB5.Notify.Windows.com/x"))
        #expect((try? policy.checkedText("https://db5.notify.windows.com.evil.example/", platform: .wns).get()) == nil)
        #expect(
            policy.checkedText("https://127.0.0.1/", platform: .webpush) == .failure(.init("is a loopback, private or reserved address (127.0.0.1)")))
        // Foundation reads any run of digits as a port; a socket's has 16 bits (a worker
        // connecting to one trapped).
        for text in ["https://push.example:65536/x", "https://push.example:99999999/x", "https://DB5.notify.windows.com:70000/x"] {
            #expect((try? policy.checkedText(text, platform: text.contains("windows") ? .wns : .webpush).get()) == nil, "\(text)")
        }
        #expect(policy.checkedText("https://push.example:65535/x", platform: .webpush) == .success("https://push.example:65535/x"))
        // IPv6 forms that carry a special IPv4 address or lead nowhere public: IPv4-translated,
        // 6to4, Teredo, discard-only.
        for host in [
            "[::ffff:0:7f00:1]", "[::ffff:0:a9fe:a9fe]", "[2002:7f00:1::]", "[2002:a00:1::1]", "[2001:0:4136:e378:8000:63bf:3fff:fdd2]", "[100::1]",
        ] {
            #expect((try? policy.checkedText("https://\(host)/x", platform: .webpush).get()) == nil, "\(host)")
        }
        for host in ["[2002:808:808::1]", "[2001:4860:4860::8888]", "[::ffff:0:808:808]"] {
            #expect(policy.checkedText("https://\(host)/x", platform: .webpush) == .success("https://\(host)/x"), "\(host)")
        }
    }
}
