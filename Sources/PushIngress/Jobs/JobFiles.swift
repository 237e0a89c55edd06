import Foundation
import PushConfiguration
import PushModel
import PushStore

/// Where jobs keep their files, and the rules for reading them: each hub's files under
/// `{directory}/{hub}/` (an `ImportFileUri` names one of them), each job's under
/// `{directory}/{hub}/{jobId}/`: `input-{random}.txt` when uploaded, `Output.txt`, `Failed.txt`.
public struct JobFiles: Sendable {
    public let directory: URL
    public let settings: JobsConfiguration

    public init(directory: String, settings: JobsConfiguration = JobsConfiguration()) {
        self.directory = URL(fileURLWithPath: directory).standardized
        self.settings = settings
    }

    public func hubDirectory(_ hub: String) -> URL { directory.appendingPathComponent(hub.lowercased(), isDirectory: true) }
    public func jobDirectory(hub: String, id: String) -> URL { hubDirectory(hub).appendingPathComponent(id, isDirectory: true) }
    public func output(hub: String, id: String) -> URL { jobDirectory(hub: hub, id: id).appendingPathComponent("Output.txt") }
    public func failed(hub: String, id: String) -> URL { jobDirectory(hub: hub, id: id).appendingPathComponent("Failed.txt") }

    /// The file an `ImportFileUri` names: a relative path (or `file:` and one) inside the
    /// hub's directory, no `..`, no hidden parts, a regular file within the input limit once
    /// its links are followed. Errors name the field.
    public func importFile(_ uri: String, hub: String) throws(WireError) -> (path: String, size: Int64) {
        var path = uri
        if path.hasPrefix("file:") { path.removeFirst(5) }
        let parts = path.split(separator: "/", omittingEmptySubsequences: true)
        guard !path.hasPrefix("/"), !parts.isEmpty, parts.allSatisfy({ !$0.hasPrefix(".") && !$0.contains("\\") }),
            !path.contains("%"), !path.contains("?"), !path.contains("#")
        else {
            throw .invalidField(
                field: "NotificationHubJob.ImportFileUri",
                reason: "must be a relative path inside the hub's jobs directory, without .. or hidden parts (PushHub reads no blob URLs)")
        }
        let base = hubDirectory(hub).resolvingSymlinksInPath().path
        let file = hubDirectory(hub).appendingPathComponent(parts.joined(separator: "/")).resolvingSymlinksInPath()
        guard file.path.hasPrefix(base + "/") else {
            throw .invalidField(field: "NotificationHubJob.ImportFileUri", reason: "leads out of the hub's jobs directory")
        }
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: file.path),
            attributes[.type] as? FileAttributeType == .typeRegular, let size = (attributes[.size] as? NSNumber)?.int64Value
        else {
            throw .invalidField(field: "NotificationHubJob.ImportFileUri", reason: "no such file in the hub's jobs directory")
        }
        guard size <= settings.inputLimit else {
            throw .invalidField(field: "NotificationHubJob.ImportFileUri", reason: "the file is larger than \(settings.inputLimit) bytes")
        }
        return (file.path, size)
    }

    /// One line of `Output.txt` for an import: the line number and the registration id.
    static func outputLine(_ line: Int64, _ registrationId: String) -> String { "\(line),\(registrationId)\n" }

    /// One line of `Failed.txt`: the line number, Azure's kind of failure and the reason.
    static func failedLine(_ line: Int64, _ failure: JobLineFailure) -> String {
        "\(line),\(failure.kind),\(failure.reason.map { $0 == "\n" || $0 == "\r" ? " " : $0 }.reduce(into: "") { $0.append($1) })\n"
    }
}
