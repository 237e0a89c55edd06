import Foundation
import PushModel
import Testing

@Suite("JSON objects read in one pass")
struct JSONMembersTests {
    @Test("JSONMembers: keys with where their values lie; nil for anything but one object")
    func members() throws {
        let text = Data(#" {"a": [1, {"b": 2}], "c" :"d\"e"} "#.utf8)
        let object = try #require(JSONMembers.of(text))
        #expect(object.range == 1..<(text.count - 1))
        #expect(object.members.map(\.key) == ["a", "c"])
        #expect(String(decoding: text[object.members[0].value], as: UTF8.self) == #"[1, {"b": 2}]"#)
        #expect(String(decoding: text[object.members[1].value], as: UTF8.self) == #""d\"e""#)
        let inner = try #require(text.range(of: Data(#"{"b": 2}"#.utf8)))
        let nested = try #require(JSONMembers.of(text, in: inner))
        #expect(String(decoding: text[nested.members[0].value], as: UTF8.self) == "2")
        #expect(nested.members.map(\.key) == ["b"])
        #expect(JSONMembers.of(Data("[]".utf8)) == nil)
        #expect(JSONMembers.of(Data(String(repeating: "{\"a\":", count: 200).utf8)) == nil)
        let deep = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        #expect(JSONMembers.of(Data("{\"a\":\(deep)}".utf8)) == nil, "deeper than the limit")
    }

    @Test(
        "isObject takes only what the parser takes as an object, and takes ordinary objects",
        arguments: [
            (#"{"aps":{"alert":"hi","badge":1}}"#, true), (#" {"a":[1,2.5,-3e2,true,false,null,"x\u00e9"]} "#, true),
            ("{}", true), (#"{"a":1,"a":2}"#, true), ("[]", false), ("", false), ("{", false), (#"{"a":01}"#, false),
            ("{} {}", false), (#"{"a":"\ud800"}"#, false), ("{\"a\":\"\u{1}\"}", false), ("null", false), (#""{}""#, false),
        ])
    func isObject(_ text: String, _ expected: Bool) {
        let data = Data(text.utf8)
        #expect(JSONMembers.isObject(data) == expected)
        if JSONMembers.isObject(data) { #expect(JSONLimits.dictionary(data) != nil, "the parser takes it too") }
    }

    @Test("at the depth limit: what isObject takes, the depth check and the parser take")
    func depth() {
        for levels in 28...36 {
            for scalar in [true, false] {
                let inner = scalar ? "1" : "{}"
                let text = String(repeating: "{\"a\":", count: levels) + inner + String(repeating: "}", count: levels)
                let data = Data(text.utf8)
                if JSONMembers.isObject(data) {
                    #expect(!JSONLimits.isTooDeep(data) && JSONLimits.dictionary(data) != nil, "\(levels) \(scalar)")
                }
            }
        }
        #expect(JSONMembers.isObject(Data((String(repeating: "{\"a\":", count: 30) + "1" + String(repeating: "}", count: 30)).utf8)))
    }
}
