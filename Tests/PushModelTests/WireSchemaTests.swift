import Foundation
import PushModel
import Testing

@Suite("Wire messages against their JSON Schemas")
struct WireSchemaTests {
    @Test("every valid sample decodes, validates, and round-trips through the Swift types", arguments: try samples(in: "valid"))
    func validSampleRoundTrips(_ sample: URL) async throws {
        let type = try #require(MessageType(sampleName: sample.lastPathComponent))
        let (unchanged, encoded) = try type.roundTrip(try Data(contentsOf: sample))
        #expect(unchanged, "decoding what was encoded gives the same value")
        // What the Swift types write is valid against the schema too.
        let files = try writeTemporary([(sample.lastPathComponent, encoded)])
        let check = try await checkAgainstSchema(type, files)
        #expect(check.status == 0, "\(check.output)")
    }

    @Test("every valid sample is valid against its schema", arguments: MessageType.allCases)
    func validSamplesPassTheSchema(_ type: MessageType) async throws {
        let files = try samples(in: "valid").filter { MessageType(sampleName: $0.lastPathComponent) == type }
        try #require(!files.isEmpty)
        let check = try await checkAgainstSchema(type, files)
        #expect(check.status == 0, "\(check.output)")
    }

    @Test("every invalid sample fails the schema, and the Swift decoder names the field", arguments: try samples(in: "invalid"))
    func invalidSampleIsRefused(_ sample: URL) async throws {
        let expectations = try JSONDecoder().decode(
            [String: Expectation].self,
            from: Data(contentsOf: schemasDirectory.appendingPathComponent("examples/invalid/expected.json")))
        let expectation = try #require(expectations[sample.lastPathComponent], "expected.json names every invalid sample")
        let type = try #require(MessageType(rawValue: expectation.type))

        let check = try await checkAgainstSchema(type, [sample], expectInvalid: true)
        #expect(check.status == 0, "\(check.output)")

        let error = #expect(throws: WireError.self) { try type.decode(try Data(contentsOf: sample)) }
        #expect(error?.field == expectation.field, "\(String(describing: error))")
    }

    struct Expectation: Decodable {
        var type: String
        var field: String
    }
}
