import Foundation
import PushModel
import Testing

@Suite("Template language")
struct TemplateLanguageTests {
    static let properties = [
        "messageParam": "Goal!", "Name": "Alice", "count": "5", "long": "abcdefghij", "url": "a b&c/d",
        "quote": #"He said "hi" \ bye"#, "markup": "</text><script>x</script>", "unicode": "ünïcødé 🚀 \u{2028}", "control": "tab\tnew\nline",
        "decimal": "3.14", "notNumber": "5 apples",
    ]
    static let renderer = TemplateRenderer(properties: properties)

    @Test(
        "JSON templates",
        arguments: [
            (#"{"aps":{"alert":"$(messageParam)"}}"#, #"{"aps":{"alert":"Goal!"}}"#),
            (#"{"a":"$(MESSAGEPARAM)","b":"$(missing)"}"#, #"{"a":"Goal!","b":""}"#),
            (#"{"a":"$(long, 4)"}"#, #"{"a":"abcd"}"#),
            (#"{"a":".(long, 6)"}"#, #"{"a":"abc..."}"#),
            (#"{"a":".(name, 6)"}"#, #"{"a":"Alice"}"#),
            (#"{"a":"%(url)"}"#, #"{"a":"a%20b%26c%2Fd"}"#),
            (##"{"badge":"#(count)"}"##, ##"{"badge":5}"##),
            (##"{"badge":"#(decimal)"}"##, ##"{"badge":3.14}"##),
            (##"{"badge":"#(notNumber)"}"##, ##"{"badge":"5 apples"}"##),
            (#"{"a":"{'Breaking: ' + $(messageParam) + ' by ' + $(name)}"}"#, #"{"a":"Breaking: Goal! by Alice"}"#),
            (##"{"a":"Hello $(name), #(count) new"}"##, ##"{"a":"Hello Alice, 5 new"}"##),
            (#"{"$(name)":"key stays"}"#, #"{"$(name)":"key stays"}"#),
            (#"{"a":"end.(note) 100%(approx"}"#, #"{"a":"end.(note) 100%(approx"}"#),
            (#"{"a": "\u0041$(name)\n"}"#, #"{"a": "AAlice\n"}"#),
        ])
    func json(_ template: String, _ expected: String) throws {
        let output = try Self.renderer.render(template, as: .json)
        #expect(output == expected)
        #expect((try? JSONSerialization.jsonObject(with: Data(output.utf8))) != nil, "valid JSON: \(output)")
    }

    @Test("hostile values stay inside their JSON string", arguments: ["quote", "markup", "unicode", "control"])
    func hostileJSON(_ property: String) throws {
        let output = try Self.renderer.render(#"{"aps":{"alert":"$(\#(property))","x":1}}"#, as: .json)
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])
        let aps = try #require(parsed["aps"] as? [String: Any])
        #expect(aps["alert"] as? String == Self.properties[property])
        #expect(aps.count == 2, "nothing was injected")
    }

    @Test(
        "XML templates",
        arguments: [
            (
                #"<toast><visual><binding template="ToastText01"><text id="1">$(messageParam)</text></binding></visual></toast>"#,
                #"<toast><visual><binding template="ToastText01"><text id="1">Goal!</text></binding></visual></toast>"#
            ),
            (
                #"<toast launch="$(name)"><text>{'From ' + $(name) + ': ' + $(messageParam)}</text></toast>"#,
                #"<toast launch="Alice"><text>From Alice: Goal!</text></toast>"#
            ),
            (
                #"<?xml version="1.0"?><!-- $(name) --><tile><text>.(long, 5) &amp; more</text></tile>"#,
                #"<?xml version="1.0"?><!-- $(name) --><tile><text>ab... &amp; more</text></tile>"#
            ),
            (##"<badge value="#(count)"/>"##, ##"<badge value="5"/>"##),
        ])
    func xml(_ template: String, _ expected: String) throws {
        #expect(try Self.renderer.render(template, as: .xml) == expected)
    }

    @Test("hostile values stay inside their XML text or attribute", arguments: ["quote", "markup", "unicode", "control"])
    func hostileXML(_ property: String) throws {
        let output = try Self.renderer.render(#"<toast launch="$(\#(property))"><text id="1">$(\#(property))</text></toast>"#, as: .xml)
        #expect(!output.contains("<script>"))
        #expect(output.components(separatedBy: "</text>").count == 2, "one closing </text>: \(output)")
        // An XML parser reads the value back.
        let parser = XMLCollector(Data(output.utf8))
        #expect(parser.ok, "well-formed: \(output)")
        let expected = Self.properties[property]!.unicodeScalars.filter { $0.value >= 0x20 || "\t\n\r".unicodeScalars.contains($0) }
        #expect(parser.text.unicodeScalars.elementsEqual(expected) || property == "control", "\(parser.text)")
    }

    @Test("values outside documents: APNs expiry and WNS headers")
    func values() throws {
        #expect(try Self.renderer.render(value: "$(count)") == "5")
        #expect(try Self.renderer.render(value: "{'wns/' + $(name)}") == "wns/Alice")
    }

    @Test(
        "malformed expressions are refused with where",
        arguments: [
            (#"{"a":"$(name"}"#, "$( is not closed"),
            (#"{"a":"$()"}"#, "names no property"),
            (#"{"a":"$(name, x)"}"#, "must be a number"),
            (##"{"a":"#(name, 3)"}"##, "takes no length"),
            (#"{"a":"unterminated}"#, "unterminated JSON string"),
        ])
    func malformed(_ template: String, _ reason: String) {
        let error = #expect(throws: TemplateError.self) { try TemplateRenderer.validate(template, as: .json) }
        #expect(error?.message.contains(reason) == true, "\(String(describing: error))")
    }

    @Test("a template found valid once is remembered, but only with its headers, expiry and format: a change is checked again")
    func rememberedValid() throws {
        let body = #"{"aps":{"alert":"$(message)"}}"#
        for _ in 0..<2 {
            try TemplateRenderer.validate(body: body, headers: ["X-A": "$(a)"], expiry: "$(e)", format: .apple, field: "t")
        }
        // A valid WNS body is no JSON; a header or an expiry that breaks.
        let toast = "<toast><visual><binding template=\"ToastText01\"><text id=\"1\">$(message)</text></binding></visual></toast>"
        try TemplateRenderer.validate(body: toast, headers: nil, expiry: nil, format: .windows, field: "t")
        #expect(throws: WireError.self) { try TemplateRenderer.validate(body: toast, headers: nil, expiry: nil, format: .apple, field: "t") }
        #expect(throws: WireError.self) {
            try TemplateRenderer.validate(body: body, headers: ["X-A": "$(a"], expiry: "$(e)", format: .apple, field: "t")
        }
        #expect(throws: WireError.self) {
            try TemplateRenderer.validate(body: body, headers: ["X-A": "$(a)"], expiry: "$(e", format: .apple, field: "t")
        }
        #expect(throws: WireError.self) {
            try TemplateRenderer.validate(body: body + "x", headers: ["X-A": "$(a)"], expiry: "$(e)", format: .apple, field: "t")
        }
    }
    @Test("a remembered template does not let a longer spelling of it through: the size limit counts bytes")
    func rememberedByBytes() throws {
        // 5,000 syllables: 15 kB composed (NFC), 45 kB decomposed (NFD), which Swift calls equal.
        let composed = "{\"a\":\"" + String(repeating: "\u{D55C}", count: 5_000) + "\"}"
        let decomposed = composed.decomposedStringWithCanonicalMapping
        #expect(composed == decomposed && composed.utf8.count < 16_384 && decomposed.utf8.count > 16_384)
        try TemplateRenderer.validate(body: composed, headers: nil, expiry: nil, format: .apple, field: "t")
        #expect(throws: WireError.self) { try TemplateRenderer.validate(body: decomposed, headers: nil, expiry: nil, format: .apple, field: "t") }
    }

}

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// Collects the text of a document, to check escaping by reading it back.
final class XMLCollector: NSObject, XMLParserDelegate {
    var text = ""
    var ok = false

    init(_ data: Data) {
        super.init()
        let parser = XMLParser(data: data)
        parser.delegate = self
        ok = parser.parse()
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) { text += string }
}
