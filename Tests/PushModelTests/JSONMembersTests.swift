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
}
