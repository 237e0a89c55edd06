import Foundation
import PushModel

/// The parsers that take input from outside, each as one fuzz target: the bytes go in the way a
/// client's or a producer's would, and anything but a clean result or a thrown error (a crash,
/// a hang, a sanitizer report) is a finding.
public enum FuzzTarget: String, CaseIterable, Sendable {
    case tagExpression = "tag-expression"
    case template
    case atom
    case installation
    case patch
    case wire

    /// Runs one input through the target's parser (and what the service does next with it).
    public func run(_ data: Data) {
        switch self {
        case .tagExpression:
            let text = String(decoding: data, as: UTF8.self)
            if let expression = try? TagExpression.parse(text) {
                _ = expression.matches(["a", "b", "Sports"])
                _ = expression.drivingTags
                _ = expression.assuming("a")
                _ = expression.description
            }
        case .template:
            // First byte picks the document; the rest is the template, filled with properties.
            let document: TemplateDocument = (data.first ?? 0) & 1 == 0 ? .json : .xml
            let template = String(decoding: data.dropFirst(), as: UTF8.self)
            let renderer = TemplateRenderer(properties: [
                "p": "value with \"quotes\" & <tags>", "n": "42", "long": String(repeating: "x", count: 300),
            ])
            _ = try? renderer.render(template, as: document)
            _ = try? renderer.render(value: template)
            _ = try? TemplateRenderer.validate(template, as: document)
        case .atom:
            if let registration = try? RegistrationDescription.parse(data, hub: "fuzzhub", registrationId: "fuzz-1") {
                _ = RegistrationDescription.entry(registration, base: "http://localhost/fuzzhub")
            }
            // A line of a job's input, and what an export writes of it, which must read back.
            if let registration = try? RegistrationDescription.parseLine(data, hub: "fuzzhub") {
                let line = RegistrationDescription.line(registration)
                guard let again = try? RegistrationDescription.parseLine(Data(line.dropLast().utf8), hub: "fuzzhub") else {
                    fatalError("an exported line does not read back: \(line)")
                }
                precondition(again.handle == registration.handle && again.tags == registration.tags, "an exported line reads back otherwise")
            }
            _ = try? NotificationHubJob.parseRequest(data)
        case .installation:
            guard !JSONLimits.isTooDeep(data), let installation = try? WireCoding.makeDecoder().decode(Installation.self, from: data) else { return }
            if (try? installation.validate()) != nil {
                _ = installation.registrations(hub: "fuzzhub", now: Date(timeIntervalSince1970: 0))
            }
        case .patch:
            // A valid installation, patched with the input.
            guard !JSONLimits.isTooDeep(data), let operations = try? JSONDecoder().decode([InstallationPatchOperation].self, from: data),
                operations.count <= InstallationPatchOperation.maximumOperations
            else { return }
            let installation = Installation(
                installationId: "fuzz", platform: .apns, pushChannel: "aaaa", tags: ["a"],
                templates: ["t": .init(body: #"{"aps":{"alert":"$(p)"}}"#)])
            _ = try? installation.applying(operations)
        case .wire:
            _ = try? WireCoding.decode(SendRequest.self, from: data)
            _ = try? WireCoding.decode(DeliveryBatch.self, from: data)
            _ = try? WireCoding.decode(ResultBatch.self, from: data)
            // What the fast reader takes, JSONDecoder takes with the same value.
            if let fast = ResultBatch.fromWireJSON(data) {
                let reference = try? WireCoding.makeDecoder().decode(ResultBatch.self, from: data)
                precondition(reference == fast, "ResultBatch.fromWireJSON read \(fast), JSONDecoder \(String(describing: reference))")
            }
            if let fast = DeliveryBatch.fromWireJSON(data) {
                let reference = try? WireCoding.makeDecoder().decode(DeliveryBatch.self, from: data)
                precondition(reference == fast, "DeliveryBatch.fromWireJSON read \(fast), JSONDecoder \(String(describing: reference))")
            }
        }
    }

    /// The target named by `PUSHHUB_FUZZ_TARGET`.
    public static var fromEnvironment: FuzzTarget? {
        ProcessInfo.processInfo.environment["PUSHHUB_FUZZ_TARGET"].flatMap(FuzzTarget.init(rawValue:))
    }
}
