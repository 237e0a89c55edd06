import Foundation
import Testing

@testable import PushSimulator

/// The simulator remembers an FCM message's rest (all but its token) once found valid; only a
/// body whose one `"token"` is the message's key may be split so.
@Suite("FCM message cache")
struct FCMMessageCacheTests {
    static func split(_ body: String) -> (token: String, rest: String)? {
        Data(body.utf8).withUnsafeBytes { SimulatorState.splitToken($0) }.map { ($0.token, String(decoding: $0.rest, as: UTF8.self)) }
    }

    @Test("a message's token is taken out, the rest kept")
    func splits() throws {
        let split = try #require(Self.split(#"{"message":{"token":"abc","data":{"k":"v"}}}"#))
        #expect(split.token == "abc" && split.rest == #"{"message":{"token":"","data":{"k":"v"}}}"#)
    }

    @Test(
        "no split when \"token\" appears twice, with escapes or control characters, or not as a key",
        arguments: [
            #"{"message":{"data":{"token":"A"},"token" :"A"}}"#,
            #"{"message":{"token":"A","data":{"token":"B"}}}"#,
            #"{"message":{"token":"A\"B"}}"#,
            #"{"message":{"token":"A\nB"}}"#,
            #"{"message":{"token" : "A"}}"#,
            #"{"message":{"token":"unterminated"#,
            #""token":""#,
        ])
    func refuses(_ body: String) {
        #expect(Self.split(body) == nil, "\(body)")
    }
}
