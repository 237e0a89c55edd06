import ArgumentParser
import Foundation
import PushEnvironment
import PushModel

/// What `pushhub import` and `pushhub export` share: a job through the hub API, followed to its end.
struct JobOptions: ParsableArguments {
    @OptionGroup var hubAPI: HubAPIOptions

    @Option(help: "The hub (default: $PUSHHUB_HUB or pushhub-dev).")
    var hub: String?

    @Option(help: "Give up waiting after this many seconds (the job goes on in the ingress).")
    var timeout: Int = 3_600

    var hubName: String { hub ?? PushHubEnvironment.current.hub ?? "pushhub-dev" }

    /// Posts a job and returns its id.
    func start(_ type: NotificationHubJob.JobType, importFileUri: String? = nil) async throws -> String {
        let escape = XMLText.escape
        let body = """
            <?xml version="1.0" encoding="utf-8"?><entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">\
            <NotificationHubJob xmlns="\(RegistrationDescription.connectNamespace)" xmlns:i="http://www.w3.org/2001/XMLSchema-instance">\
            <Type>\(type.rawValue)</Type><OutputContainerUri>pushhub:jobs</OutputContainerUri>\
            \(importFileUri.map { "<ImportFileUri>\(escape($0))</ImportFileUri>" } ?? "")</NotificationHubJob></content></entry>
            """
        let response = try await hubAPI.call(
            "POST", hub: hubName, "/jobs", headers: [("Content-Type", "application/atom+xml;type=entry;charset=utf-8")], body: Data(body.utf8))
        guard response.status == 201 else { throw Self.failure("starting the job", response.status, response.body) }
        return try Self.report(response.body).jobId
    }

    /// Reads the job until it ends, printing its progress to standard error; returns the
    /// counts of what succeeded and failed.
    func follow(_ id: String) async throws -> (succeeded: Int64, failed: Int64) {
        let deadline = Date().addingTimeInterval(TimeInterval(timeout))
        var shown = ""
        while true {
            let response = try await hubAPI.call("GET", hub: hubName, "/jobs/\(id)")
            guard response.status == 200 else { throw Self.failure("reading job \(id)", response.status, response.body) }
            let job = try Self.report(response.body)
            let (succeeded, failed) = (job.count("SucceededCount"), job.count("FailedCount"))
            let line =
                "job \(id): \(job.status?.rawValue ?? "an unknown status"), \(job.progress) %, \(succeeded ?? 0) succeeded, \(failed ?? 0) failed"
            if line != shown {
                FileHandle.standardError.write(Data((line + "\n").utf8))
                shown = line
            }
            switch job.status {
            case .completed:
                guard let succeeded, let failed else { throw CommandFailure(description: "job \(id) ended without its counts: \(job.properties)") }
                return (succeeded, failed)
            case .failed: throw CommandFailure(description: "job \(id) failed: \(job.failure ?? "no reason given")")
            default: break
            }
            guard Date() < deadline else {
                throw CommandFailure(
                    description: "job \(id) has not ended after \(timeout) s; it goes on in the ingress (GET /\(hubName)/jobs/\(id))")
            }
            try await Task.sleep(for: .milliseconds(300))
        }
    }

    /// One of the job's files (`output` or `failed`), whole.
    func download(_ id: String, _ file: String) async throws -> Data {
        let response = try await hubAPI.call("GET", hub: hubName, "/jobs/\(id)/\(file)", bodyLimit: Int.max, timeout: .seconds(3_600))
        guard response.status == 200 else { throw Self.failure("fetching the job's \(file) file", response.status, response.body) }
        return response.body
    }

    static func failure(_ what: String, _ status: Int, _ body: Data) -> CommandFailure {
        CommandFailure(description: "\(what): the hub API answered \(status): \(String(decoding: body.prefix(500), as: UTF8.self))")
    }

    /// The job the hub API answered with.
    static func report(_ body: Data) throws -> NotificationHubJob.Report {
        do { return try NotificationHubJob.parseReport(body) } catch {
            throw CommandFailure(description: "the hub API's answer is not a job (\(error)): \(String(decoding: body.prefix(300), as: UTF8.self))")
        }
    }
}

enum XMLText {
    static func escape(_ text: String) -> String { TemplateRenderer.escapeXML(text) }
}

/// `pushhub import FILE`: registrations in Azure's bulk format into a hub, as an import job.
struct ImportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import", abstract: "Imports registrations (one description a line, Azure's bulk format) through an import job.",
        discussion: """
            Uploads FILE to a new job (PUT /{hub}/jobs/{id}/input) and follows it to its end; with --server-file, FILE is a path \
            inside the hub's directory of the ingress's jobs directory instead. Lines that failed are printed with their line \
            number and reason (all of them to --failed-to). Exits 1 when the job failed or a line did.

            Examples:
              pushhub export regs.txt && pushhub import regs.txt --type upsert
              pushhub import new-devices.txt --type create --failed-to failed.txt
            """)

    enum Kind: String, ExpressibleByArgument, CaseIterable {
        case create, update, upsert, delete

        var jobType: NotificationHubJob.JobType {
            switch self {
            case .create: .importCreateRegistrations
            case .update: .importUpdateRegistrations
            case .upsert: .importUpsertRegistrations
            case .delete: .importDeleteRegistrations
            }
        }
    }

    @OptionGroup var job: JobOptions

    @Argument(help: "The file of registration descriptions, one a line.")
    var file: String

    @Option(help: "create, update, upsert or delete.")
    var type: Kind = .upsert

    @Flag(help: "FILE is on the ingress, inside the hub's directory of its jobs directory: nothing is uploaded.")
    var serverFile = false

    @Option(help: "Write every failed line (line number, kind, reason) here.")
    var failedTo: String?

    func run() async throws {
        let id: String
        if serverFile {
            id = try await job.start(type.jobType, importFileUri: file)
        } else {
            guard let data = FileManager.default.contents(atPath: file) else { throw CommandFailure(description: "\(file): cannot be read") }
            id = try await job.start(type.jobType)
            let response = try await job.hubAPI.call(
                "PUT", hub: job.hubName, "/jobs/\(id)/input", headers: [("Content-Type", "text/plain")], body: data, timeout: .seconds(3_600))
            guard response.status == 200 else { throw JobOptions.failure("uploading \(file)", response.status, response.body) }
        }
        let (succeeded, failed) = try await job.follow(id)
        emit("job \(id): \(succeeded) line(s) imported, \(failed) failed")
        guard failed > 0 else { return }
        let failures = try await job.download(id, "failed")
        if let failedTo { try failures.write(to: URL(fileURLWithPath: failedTo)) }
        let lines = String(decoding: failures, as: UTF8.self).split(separator: "\n")
        for line in lines.prefix(20) { FileHandle.standardError.write(Data("  line \(line)\n".utf8)) }
        if lines.count > 20 {
            FileHandle.standardError.write(Data("  … \(lines.count - 20) more\(failedTo == nil ? " (--failed-to FILE keeps them all)" : "")\n".utf8))
        }
        throw ExitCode(1)
    }
}

/// `pushhub export FILE`: a hub's registrations into a file, as an export job.
struct ExportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export", abstract: "Exports a hub's registrations (one description a line, Azure's bulk format) through an export job.",
        discussion: """
            Registrations that stand for installations are not exported: list those with pushhub installations list. The file \
            imports again with pushhub import FILE --type upsert.
            """)

    @OptionGroup var job: JobOptions

    @Argument(help: "Where to write the registrations.")
    var file: String

    func run() async throws {
        let id = try await job.start(.exportRegistrations)
        let (succeeded, _) = try await job.follow(id)
        try await job.download(id, "output").write(to: URL(fileURLWithPath: file))
        emit("job \(id): \(succeeded) registration(s) exported to \(file)")
    }
}
