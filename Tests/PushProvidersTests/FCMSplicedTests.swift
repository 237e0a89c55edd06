import Foundation
import PushModel
import Testing

@testable import PushProviders

@Suite("FCM v1 bodies spliced from their own text")
struct FCMSplicedTests {
    /// The body as JSON objects, to compare what the two ways make.
    static func object(_ data: Data) throws -> NSDictionary {
        try #require(try JSONSerialization.jsonObject(with: data) as? NSDictionary)
    }

    @Test(
        "the spliced request is the written-again request, member for member",
        arguments: [
            #"{"message":{"notification":{"title":"x"}}}"#,
            #"{"notification":{"title":"x","body":"y"},"data":{"a":"1"}}"#,
            #"  { "message" : { "android" : { "priority" : "HIGH", "ttl" : "60s" } , "data" : { "k" : "v" } } }  "#,
            #"{"message":{}}"#,
            "{}",
            #"{"data":{"text":"caf\u00e9 \"quoted\" \\ / é 😀","n":"1"},"apns":{"payload":{"aps":{"badge":3,"x":[1,2.5,-3e2,true,null]}}}}"#,
            #"{"message":{"notification":{"title":"deep"},"android":{"notification":{"tag":"t"}},"webpush":{"headers":{"TTL":"60"}}}}"#,
        ])
    func spliced(_ body: String) throws {
        let template = try #require(FCMMessage.splicedV1(Data(body.utf8)), "spliced: \(body)")
        let token = "dev\"ice-token\\1"
        let fast = template.body(token)
        let slow = try FCMMessage.request(body: body, format: "fcmv1", token: token)
        #expect(try Self.object(fast) == Self.object(slow), "\(String(decoding: fast, as: UTF8.self))")
        // And through the batch's way in: the template a batch shares.
        let shared = try FCMMessage.template(body: body, format: .fcmv1).get()
        #expect(shared.prefix == template.prefix && shared.suffix == template.suffix)
    }

    @Test(
        "bodies the splice leaves to the parser, which then decides as before",
        arguments: [
            #"{"message":{"token":"theirs","data":{"a":"b"}}}"#,  // a token of its own: ours replaces it
            #"{"token":"theirs"}"#,
            #"{"message":{"data":{}},"extra":1}"#,  // message beside other keys: only the message counts
            #"{"message":"text"}"#,  // a message that is not an object
            #"{"a":1,"a":2}"#,  // a key given twice
            #"{"message":{"a":1,"a":2}}"#,
            "[1]", "", "{", #"{"a":01}"#, "{\"a\":\"\u{1}\"}", "{} {}",
        ])
    func leftToTheParser(_ body: String) throws {
        #expect(FCMMessage.splicedV1(Data(body.utf8)) == nil)
        // The batch's template is still the parser's answer, failure included.
        let template = FCMMessage.template(body: body, format: .fcmv1)
        switch (template, Result { try FCMMessage.request(body: body, format: "fcmv1", token: "tok") }) {
        case (.success(let spliced), .success(let whole)):
            #expect(try Self.object(spliced.body("tok")) == Self.object(whole))
        case (.failure, .failure): break
        default: Issue.record("the template and the request disagree on \(body)")
        }
    }

    @Test("a message over FCM's size as written, but not once compact, goes through the parser")
    func sizeAsWritten() throws {
        let padded = "{\"message\":{\"data\":{\"a\":\"b\"}" + String(repeating: " ", count: 5_000) + "}}"
        #expect(FCMMessage.splicedV1(Data(padded.utf8)) == nil)
        let template = try FCMMessage.template(body: padded, format: .fcmv1).get()
        #expect(template.body("t").count < 100)
    }
}
