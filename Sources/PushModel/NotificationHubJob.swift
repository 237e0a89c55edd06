import Foundation

/// A bulk import or export of registrations, as Azure's `jobs` API has it: the
/// `NotificationHubJob` entry a caller posts and the service reports back.
public struct NotificationHubJob: Sendable, Equatable {
    public enum JobType: String, Sendable, CaseIterable {
        case exportRegistrations = "ExportRegistrations"
        case importCreateRegistrations = "ImportCreateRegistrations"
        case importUpdateRegistrations = "ImportUpdateRegistrations"
        case importUpsertRegistrations = "ImportUpsertRegistrations"
        case importDeleteRegistrations = "ImportDeleteRegistrations"

        public var isImport: Bool { self != .exportRegistrations }
    }

    /// Azure's states: `Started` (accepted, not yet running: an import waits here for its
    /// input), `Running`, and the two ends.
    public enum Status: String, Sendable, CaseIterable {
        case started = "Started"
        case running = "Running"
        case completed = "Completed"
        case failed = "Failed"

        public var isFinished: Bool { self == .completed || self == .failed }
    }

    public var jobId: String
    public var hub: String
    public var type: JobType
    public var status: Status
    /// Percent done, 0 to 100: of the input's bytes for an import, of the registrations
    /// counted at the start for an export.
    public var progress: Double
    /// As the caller gave it: a path under the hub's directory in the jobs directory.
    public var importFileUri: String?
    /// As the caller gave it; PushHub writes its files in the jobs directory whatever it says.
    public var outputContainerUri: String?
    public var failure: String?
    /// Lines (or, for an export, registrations) that succeeded and that failed.
    public var succeeded: Int64
    public var failed: Int64
    public var createdAt: Date
    public var updatedAt: Date

    public init(
        jobId: String, hub: String, type: JobType, status: Status = .started, progress: Double = 0, importFileUri: String? = nil,
        outputContainerUri: String? = nil, failure: String? = nil, succeeded: Int64 = 0, failed: Int64 = 0, createdAt: Date, updatedAt: Date
    ) {
        self.jobId = jobId
        self.hub = hub
        self.type = type
        self.status = status
        self.progress = progress
        self.importFileUri = importFileUri
        self.outputContainerUri = outputContainerUri
        self.failure = failure
        self.succeeded = succeeded
        self.failed = failed
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }

    /// What a caller asks for in `POST /{hub}/jobs`.
    public struct Request: Sendable, Equatable {
        public var type: JobType
        public var importFileUri: String?
        public var outputContainerUri: String?

        public init(type: JobType, importFileUri: String? = nil, outputContainerUri: String? = nil) {
            self.type = type
            self.importFileUri = importFileUri
            self.outputContainerUri = outputContainerUri
        }
    }

    /// Longest `ImportFileUri` and `OutputContainerUri`.
    public static let maximumUriLength = 1_024

    /// Reads the `NotificationHubJob` in an Atom entry (or on its own). Errors name the element.
    public static func parseRequest(_ body: Data) throws(WireError) -> Request {
        let document = try XMLNode.parse(body)
        guard let job = document.find(where: { $0 == "NotificationHubJob" }) else {
            throw .invalidField(field: "entry", reason: "holds no NotificationHubJob element")
        }
        guard let typeText = job.child("Type")?.text, !typeText.isEmpty else {
            throw .invalidField(field: "NotificationHubJob.Type", reason: "missing")
        }
        guard let type = JobType(rawValue: typeText) else {
            throw .invalidField(
                field: "NotificationHubJob.Type", reason: "\(typeText) is not one of \(JobType.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        func uri(_ name: String) throws(WireError) -> String? {
            guard let text = job.child(name)?.text, !text.isEmpty else { return nil }
            guard text.utf8.count <= maximumUriLength, text.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F }) else {
                throw .invalidField(
                    field: "NotificationHubJob.\(name)", reason: "must be at most \(maximumUriLength) bytes, without control characters")
            }
            return text
        }
        return Request(type: type, importFileUri: try uri("ImportFileUri"), outputContainerUri: try uri("OutputContainerUri"))
    }

    /// What a client reads of a job the hub API answered with (an Atom entry or the element).
    public struct Report: Sendable, Equatable {
        public var jobId: String
        /// nil when the answer named a status this build does not know.
        public var status: Status?
        public var progress: String
        public var failure: String?
        /// `OutputProperties`: `OutputFilePath`, `FailedFilePath`, `SucceededCount`, `FailedCount`.
        public var properties: [String: String]

        /// A count of `properties`; nil when the answer has none, or not a number.
        public func count(_ key: String) -> Int64? { properties[key].flatMap { Int64($0) } }
    }

    /// Reads a job as the hub API writes it.
    public static func parseReport(_ body: Data) throws(WireError) -> Report {
        let document = try XMLNode.parse(body)
        guard let job = document.find(where: { $0 == "NotificationHubJob" }), let id = job.child("JobId")?.text, !id.isEmpty else {
            throw .invalidField(field: "entry", reason: "holds no NotificationHubJob with a JobId")
        }
        var properties: [String: String] = [:]
        for pair in job.child("OutputProperties")?.children ?? [] {
            if let key = pair.child("Key")?.text { properties[key] = pair.child("Value")?.text ?? "" }
        }
        return Report(
            jobId: id, status: (job.child("Status")?.text).flatMap(Status.init(rawValue:)), progress: job.child("Progress")?.text ?? "0",
            failure: job.child("Failure")?.text,
            properties: properties)
    }

    static let arraysNamespace = "http://schemas.microsoft.com/2003/10/Serialization/Arrays"

    /// The `NotificationHubJob` element, in the DataContract's order: JobId, Progress, Type,
    /// Status, OutputContainerUri, ImportFileUri, InputProperties, Failure, OutputProperties,
    /// CreatedAt, UpdatedAt. `links` are the output properties (`OutputFilePath`,
    /// `FailedFilePath`); the counts go there too, as `SucceededCount` and `FailedCount`.
    public func xml(links: [(String, String)]) -> String {
        let escape = TemplateRenderer.escapeXML
        var fields = "<JobId>\(escape(jobId))</JobId><Progress>\(String(format: "%.2f", progress))</Progress>"
        fields += "<Type>\(type.rawValue)</Type><Status>\(status.rawValue)</Status>"
        if let outputContainerUri { fields += "<OutputContainerUri>\(escape(outputContainerUri))</OutputContainerUri>" }
        if let importFileUri { fields += "<ImportFileUri>\(escape(importFileUri))</ImportFileUri>" }
        if let failure { fields += "<Failure>\(escape(failure))</Failure>" }
        let properties = links + [("SucceededCount", String(succeeded)), ("FailedCount", String(failed))]
        fields += "<OutputProperties xmlns:d3p1=\"\(Self.arraysNamespace)\">"
        for (key, value) in properties {
            fields +=
                "<d3p1:KeyValueOfstringstring><d3p1:Key>\(escape(key))</d3p1:Key><d3p1:Value>\(escape(value))</d3p1:Value></d3p1:KeyValueOfstringstring>"
        }
        fields += "</OutputProperties>"
        fields += "<CreatedAt>\(RFC3339.format(createdAt))</CreatedAt><UpdatedAt>\(RFC3339.format(updatedAt))</UpdatedAt>"
        return
            "<NotificationHubJob xmlns=\"\(RegistrationDescription.connectNamespace)\" xmlns:i=\"http://www.w3.org/2001/XMLSchema-instance\">\(fields)</NotificationHubJob>"
    }

    /// An Atom entry for the job; `base` is `https://host/hub`.
    public func entry(base: String, links: [(String, String)]) -> String {
        RegistrationDescription.atomEntry(
            link: "\(base)/jobs/\(jobId)?api-version=2015-01", title: jobId, updated: updatedAt, content: xml(links: links))
    }
}
