import Foundation
import PushModel
import PushTestSupport

/// The package's root directory, found from this file's path.
let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
let schemasDirectory = packageRoot.appendingPathComponent("docs/schemas")

/// The wire message types by the file-name prefix their samples use.
enum MessageType: String, CaseIterable, Sendable {
    case sendRequest = "send-request"
    case deliveryBatch = "delivery-batch"
    case resultBatch = "result-batch"

    var schemaFile: URL { schemasDirectory.appendingPathComponent("\(rawValue).v1.schema.json") }

    init?(sampleName: String) {
        guard let type = Self.allCases.first(where: { sampleName.hasPrefix($0.rawValue + ".") }) else { return nil }
        self = type
    }

    /// Decodes `data` as this type and encodes it again.
    func roundTrip(_ data: Data) throws -> (unchanged: Bool, encoded: Data) {
        switch self {
        case .sendRequest: try Self.roundTrip(SendRequest.self, data)
        case .deliveryBatch: try Self.roundTrip(DeliveryBatch.self, data)
        case .resultBatch: try Self.roundTrip(ResultBatch.self, data)
        }
    }

    func decode(_ data: Data) throws(WireError) {
        switch self {
        case .sendRequest: _ = try WireCoding.decode(SendRequest.self, from: data)
        case .deliveryBatch: _ = try WireCoding.decode(DeliveryBatch.self, from: data)
        case .resultBatch: _ = try WireCoding.decode(ResultBatch.self, from: data)
        }
    }

    private static func roundTrip<T: WireMessage & Equatable>(_ type: T.Type, _ data: Data) throws -> (unchanged: Bool, encoded: Data) {
        let first = try WireCoding.decode(T.self, from: data)
        let encoded = try WireCoding.encode(first)
        let second = try WireCoding.decode(T.self, from: encoded)
        return (first == second, encoded)
    }
}

/// Sample documents in docs/schemas/examples/<folder>.
func samples(in folder: String) throws -> [URL] {
    try FileManager.default.contentsOfDirectory(
        at: schemasDirectory.appendingPathComponent("examples/\(folder)"), includingPropertiesForKeys: nil
    ).filter { $0.pathExtension == "json" && $0.lastPathComponent != "expected.json" }
        .sorted { $0.lastPathComponent < $1.lastPathComponent }
}

/// Runs the JSON Schema validator (Python `jsonschema`, see scripts/check-json-schema.py)
/// on `documents`; returns its exit status and output.
func checkAgainstSchema(_ type: MessageType, _ documents: [URL], expectInvalid: Bool = false) async throws -> (status: Int32, output: String) {
    try await ProcessLaunch.output(
        ["python3", packageRoot.appendingPathComponent("scripts/check-json-schema.py").path]
            + (expectInvalid ? ["--expect-invalid"] : []) + [type.schemaFile.path] + documents.map(\.path))
}

/// Writes `documents` to files in a fresh temporary directory.
func writeTemporary(_ documents: [(name: String, data: Data)]) throws -> [URL] {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-schema-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    return try documents.map { document in
        let url = directory.appendingPathComponent(document.name)
        try document.data.write(to: url)
        return url
    }
}
