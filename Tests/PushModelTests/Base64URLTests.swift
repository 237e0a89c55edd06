import Foundation
import PushModel
import Testing

@Suite("base64url")
struct Base64URLTests {
    /// Foundation's base64 with the URL alphabet and no padding: what the table must match.
    static func reference(_ bytes: Data) -> String {
        bytes.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    @Test("encodes as Foundation does, and decodes its own output back, for every length up to 100")
    func roundTrip() {
        var generator = SystemRandomNumberGenerator()
        for length in 0...100 {
            for _ in 0..<20 {
                let bytes = Data((0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) })
                let text = Base64URL.encode(bytes)
                #expect(text == Self.reference(bytes))
                #expect(Base64URL.decode(text) == bytes)
                // With padding, and in the standard alphabet, as some clients send keys.
                let standard = bytes.base64EncodedString()
                #expect(Base64URL.decode(standard) == bytes, "\(standard)")
            }
        }
    }

    @Test("RFC 4648's test vectors")
    func vectors() {
        let vectors = ["": "", "f": "Zg", "fo": "Zm8", "foo": "Zm9v", "foob": "Zm9vYg", "fooba": "Zm9vYmE", "foobar": "Zm9vYmFy"]
        for (plain, encoded) in vectors {
            #expect(Base64URL.encode(Data(plain.utf8)) == encoded)
            #expect(Base64URL.decode(encoded) == Data(plain.utf8))
        }
        #expect(Base64URL.decode("_-8") == Data([0xFF, 0xEF]))
    }

    @Test("what is not base64url is refused", arguments: ["Z", "Zm9vY", "Zm 9v", "Zm9v\n", "Zm9v!", "Zg===", "Z=g", "=", "é"])
    func refused(_ text: String) {
        #expect(Base64URL.decode(text) == nil)
    }
}
