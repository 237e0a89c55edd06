import Foundation
import PushModel
import Testing

@Suite("Installation PATCH semantics")
struct InstallationPatchTests {
    static let base = Installation(
        installationId: "i1", userId: "alice", platform: .apns, pushChannel: "token", pushChannelExpired: true, tags: ["a", "b"],
        templates: ["t": .init(body: "{}", headers: ["X-WNS-Type": "wns/toast"], expiry: "0", tags: ["x"])])

    typealias Op = InstallationPatchOperation

    @Test(
        "tag operations",
        arguments: [
            (Op(op: .add, path: "/tags", value: .strings(["c", "a"])), ["a", "b", "c"] as [String]),
            (Op(op: .add, path: "/tags", value: .string("c")), ["a", "b", "c"]),
            (Op(op: .add, path: "/tags/-", value: .string("z")), ["a", "b", "z"]),
            (Op(op: .replace, path: "/tags", value: .strings(["q"])), ["q"]),
            (Op(op: .remove, path: "/tags"), []),
            (Op(op: .remove, path: "/tags/a"), ["b"]),
        ] as [(Op, [String])])
    func tagOperations(_ operation: Op, _ expected: [String]) throws {
        #expect(try Self.base.applying([operation]).tags == expected)
    }

    @Test("user, push channel and templates")
    func otherOperations() throws {
        #expect(try Self.base.applying([Op(op: .replace, path: "/userId", value: .string("bob"))]).userId == "bob")
        #expect(try Self.base.applying([Op(op: .remove, path: "/userId")]).userId == nil)
        let channel = try Self.base.applying([Op(op: .replace, path: "/pushChannel", value: .string("new"))])
        #expect(channel.pushChannel == "new")
        #expect(channel.pushChannelExpired == false, "a new push channel is not expired")
        let added = try Self.base.applying([
            Op(op: .add, path: "/templates/u", value: .object(["body": .string("{\"a\":1}"), "tags": .strings(["k"])]))
        ])
        #expect(added.templates["u"] == .init(body: "{\"a\":1}", tags: ["k"]))
        #expect(try Self.base.applying([Op(op: .remove, path: "/templates/t")]).templates.isEmpty)
        #expect(
            try Self.base.applying([Op(op: .replace, path: "/templates/t/body", value: .string("{\"b\":2}"))]).templates["t"]?.body == "{\"b\":2}")
        #expect(try Self.base.applying([Op(op: .remove, path: "/templates/t/headers")]).templates["t"]?.headers == nil)
        #expect(try Self.base.applying([Op(op: .replace, path: "/templates/t/expiry", value: .string("$(exp)"))]).templates["t"]?.expiry == "$(exp)")
        #expect(try Self.base.applying([Op(op: .add, path: "/templates/t/tags", value: .string("y"))]).templates["t"]?.tags == ["x", "y"])
    }

    @Test(
        "refused operations name the operation and what is wrong",
        arguments: [
            (Op(op: .add, path: "tags", value: .string("a")), "[0].path"),
            (Op(op: .add, path: "/color", value: .string("red")), "[0].path"),
            (Op(op: .add, path: "/tags/-"), "[0].value"),
            (Op(op: .remove, path: "/tags/nope"), "[0].path"),
            (Op(op: .remove, path: "/templates/nope"), "[0].path"),
            (Op(op: .replace, path: "/templates/nope/body", value: .string("{}")), "[0].path"),
            (Op(op: .add, path: "/templates/new", value: .object(["headers": .object([:])])), "[0].value.body"),
            (Op(op: .add, path: "/tags/-", value: .string("bad tag")), "tags"),
            (Op(op: .replace, path: "/pushChannel", value: .string("")), "pushChannel"),
        ] as [(Op, String)])
    func refused(_ operation: Op, _ field: String) {
        let error = #expect(throws: WireError.self) { try Self.base.applying([operation]) }
        #expect(error?.field == field, "\(String(describing: error))")
    }

    @Test("a patch body decodes from JSON as SDKs send it")
    func decodes() throws {
        let body = #"[{"op":"add","path":"/tags","value":"Sports"},{"op":"replace","path":"/templates/t","value":{"body":"{}","tags":["a"]}}]"#
        let operations = try JSONDecoder().decode([Op].self, from: Data(body.utf8))
        let patched = try Self.base.applying(operations)
        #expect(patched.tags.contains("Sports"))
        #expect(patched.templates["t"]?.tags == ["a"])
    }
}
