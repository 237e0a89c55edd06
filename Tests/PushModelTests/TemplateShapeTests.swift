import Foundation
import PushModel
import Testing

@Suite("One template type, three shapes")
struct TemplateShapeTests {
    @Test("a delivery target's template carries body, headers and expiry only, made or read; an installation's has no name of its own")
    func shapes() throws {
        let target = DeliveryBatch.Target(
            registrationId: "r", handle: "h",
            template: Template(name: "n", body: "{}", headers: ["X-WNS-Type": "wns/toast"], expiry: "1", tags: ["t"]))
        let encoded = try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(target)) as? [String: Any])
        #expect(Set(try #require(encoded["template"] as? [String: Any]).keys) == ["body", "headers", "expiry"])

        // A target another service produced with more members: they are not carried on.
        let read = try JSONDecoder().decode(
            DeliveryBatch.Target.self, from: Data(#"{"handle":"h","template":{"body":"{}","name":"x","tags":["y"]}}"#.utf8))
        #expect(read.template == Template(body: "{}"))

        let installation = try WireCoding.makeDecoder().decode(
            Installation.self,
            from: Data(
                #"{"installationId":"i","platform":"apns","pushChannel":"aa","templates":{"t":{"body":"{}","name":"other","tags":["x"]}}}"#.utf8))
        #expect(installation.templates["t"] == Template(body: "{}", tags: ["x"]), "the key names it")
    }
}
