import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import PushModel
import PushStore
import Synchronization

/// Azure's `jobs` API (Manage): `POST /{hub}/jobs` with a `NotificationHubJob` entry,
/// `GET /{hub}/jobs` and `/{hub}/jobs/{id}`; PushHub's own `PUT /{hub}/jobs/{id}/input` for
/// an import's file, and `GET /{hub}/jobs/{id}/output` and `/failed` for what it wrote (what
/// Azure leaves in the output container).
struct JobsController: Sendable {
    let store: (any JobStore)?
    let files: JobFiles?
    let signal: JobSignal?
    let access: HubAccess
    static let bodyLimit = 64 * 1024
    /// Jobs of a hub not finished at once; jobs listed at most.
    static let maximumUnfinished = 8
    static let listLimit = 100
    /// Uploads streamed to disk at once by this ingress; more wait (503 with `Retry-After`).
    static let maximumUploads = 2
    let uploads = InFlightLimit(maximumUploads)

    func addRoutes(to routes: HubRoutes) {
        let manage = routes.requiring(.manage)
        manage.post("{hub}/jobs", use: create)
        manage.get("{hub}/jobs", use: list)
        manage.get("{hub}/jobs/{id}", use: read)
        manage.put("{hub}/jobs/{id}/input", use: upload)
        manage.get("{hub}/jobs/{id}/output", use: output)
        manage.get("{hub}/jobs/{id}/failed", use: failed)
    }

    private func configured() throws -> (any JobStore, JobFiles) {
        guard let store, let files else { throw HubAPIError(.serviceUnavailable, "jobs are not configured on this ingress") }
        return (store, files)
    }

    @Sendable func create(_ request: Request, context: HubRequestContext) async throws -> Response {
        let (store, files) = try configured()
        let hub = context.hub.name
        try request.requireContentType(RegistrationController.atomTypes)
        let body = try await request.collectBody(upTo: Self.bodyLimit)
        let asked: NotificationHubJob.Request
        do { asked = try NotificationHubJob.parseRequest(Data(buffer: body)) } catch { throw HubAPIError.invalid(error) }
        var input: (path: String, size: Int64)?
        if let uri = asked.importFileUri {
            guard asked.type.isImport else {
                throw HubAPIError(.badRequest, "NotificationHubJob.ImportFileUri: an export reads no input")
            }
            do { input = try files.importFile(uri, hub: hub) } catch { throw HubAPIError.invalid(error) }
        }
        let now = RFC3339.truncated(Date())
        let job = NotificationHubJob(
            jobId: RandomID.make(), hub: hub, type: asked.type, importFileUri: asked.importFileUri, outputContainerUri: asked.outputContainerUri,
            createdAt: now, updatedAt: now)
        guard
            try await storeCall({
                try await store.createJob(job, inputPath: input?.path, inputSize: input?.size ?? 0, maximumUnfinished: Self.maximumUnfinished)
            })
        else {
            throw HubAPIError(.conflict, "hub \(hub) has \(Self.maximumUnfinished) jobs not finished; wait for one to end")
        }
        signal?.wake()
        let base = access.base(request, hub)
        var response = Self.atom(job.entry(base: base, links: Self.links(job, base: base)))
        response.status = .created
        response.headers[.location] = "\(base)/jobs/\(job.jobId)?api-version=2015-01"
        return response
    }

    @Sendable func read(_ request: Request, context: HubRequestContext) async throws -> Response {
        let stored = try await job(request, context: context)
        let base = access.base(request, context.hub.name)
        return Self.atom(stored.job.entry(base: base, links: Self.links(stored.job, base: base)))
    }

    @Sendable func list(_ request: Request, context: HubRequestContext) async throws -> Response {
        let (store, _) = try configured()
        let hub = context.hub.name
        let jobs = try await storeCall { try await store.jobs(hub: hub, limit: Self.listLimit) }
        let base = access.base(request, hub)
        let feed =
            "<?xml version=\"1.0\" encoding=\"utf-8\"?><feed xmlns=\"http://www.w3.org/2005/Atom\">"
            + "<title type=\"text\">Jobs</title><id>\(XML.escape(base))/jobs</id><updated>\(RFC3339.format(Date()))</updated>"
            + jobs.map { $0.job.entry(base: base, links: Self.links($0.job, base: base)) }.joined() + "</feed>"
        return Response(
            status: .ok, headers: [.contentType: "application/atom+xml;type=feed;charset=utf-8"], body: .init(byteBuffer: ByteBuffer(string: feed)))
    }

    /// The input of an import that has none: the body, up to the jobs' input limit, to a file
    /// of its own under the job's directory; the job takes it only if still waiting.
    @Sendable func upload(_ request: Request, context: HubRequestContext) async throws -> Response {
        let (store, files) = try configured()
        let hub = context.hub.name
        let stored = try await job(request, context: context)
        guard stored.job.type.isImport, stored.job.status == .started, stored.inputPath == nil else {
            throw HubAPIError(
                .conflict, "job \(stored.job.jobId) takes no input: only an import waiting for its input (Started, no ImportFileUri) does")
        }
        guard uploads.enter() else {
            var refusal = HubAPIError(.serviceUnavailable, "\(Self.maximumUploads) inputs are being uploaded to this ingress; try again")
            refusal.retryAfter = 10
            throw refusal
        }
        defer { uploads.leave() }
        let directory = files.jobDirectory(hub: hub, id: stored.job.jobId)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        Self.removeOrphanedInputs(in: directory)
        let file = directory.appendingPathComponent("input-\(RandomID.make()).txt")
        FileManager.default.createFile(atPath: file.path, contents: nil)
        var size: Int64 = 0
        do {
            let handle = try FileHandle(forWritingTo: file)
            defer { try? handle.close() }
            for try await part in request.body {
                size += Int64(part.readableBytes)
                guard size <= files.settings.inputLimit else {
                    throw HubAPIError(.contentTooLarge, "the input is larger than \(files.settings.inputLimit) bytes")
                }
                try handle.write(contentsOf: part.readableBytesView)
            }
            try handle.synchronize()
        } catch {
            try? FileManager.default.removeItem(at: file)
            if let refusal = error as? HubAPIError { throw refusal }
            throw HubAPIError(.badRequest, "the input could not be read whole: \(String(describing: error).prefix(120))")
        }
        // The store may fail after the attach committed (its answer lost), or while its commit is
        // still to show (PostgreSQL's, waiting on a replica when the connection went): tried
        // once more, the attach takes the row lock after that one and says whether the input is
        // this one, as an attach of the same file twice is one. When that fails too, nothing is
        // known, and the file stays: the next upload to the job removes it (the job waits for
        // an input only while it has none), or the job's directory goes with the job.
        let received = size
        let attach = { @Sendable in
            try await storeCall { try await store.attachJobInput(hub: hub, id: stored.job.jobId, path: file.path, size: received) }
        }
        let attached: Bool
        do { attached = try await attach() } catch { attached = try await attach() }
        guard attached else {
            try? FileManager.default.removeItem(at: file)
            throw HubAPIError(.conflict, "job \(stored.job.jobId) took another input meanwhile")
        }
        signal?.wake()
        return try await read(request, context: context)
    }

    /// Removes the inputs earlier uploads left in a job's directory when the store could not say
    /// whether they were attached; called as an upload to a job that has no input starts, so
    /// none is the job's. One written to within the last minutes may be an upload still
    /// coming, and stays.
    static func removeOrphanedInputs(in directory: URL) {
        let manager = FileManager.default
        guard let names = try? manager.contentsOfDirectory(atPath: directory.path) else { return }
        let cutoff = Date().addingTimeInterval(-orphanAge)
        for name in names where name.hasPrefix("input-") && name.hasSuffix(".txt") {
            let path = directory.appendingPathComponent(name).path
            guard let modified = (try? manager.attributesOfItem(atPath: path))?[.modificationDate] as? Date, modified < cutoff else { continue }
            try? manager.removeItem(atPath: path)
        }
    }

    /// How long an input file unwritten to is taken for an upload that ended.
    static let orphanAge: TimeInterval = 300

    @Sendable func output(_ request: Request, context: HubRequestContext) async throws -> Response {
        let (_, files) = try configured()
        let stored = try await job(request, context: context)
        return Self.file(files.output(hub: context.hub.name, id: stored.job.jobId), length: stored.position.outputBytes)
    }

    @Sendable func failed(_ request: Request, context: HubRequestContext) async throws -> Response {
        let (_, files) = try configured()
        let stored = try await job(request, context: context)
        return Self.file(files.failed(hub: context.hub.name, id: stored.job.jobId), length: stored.position.failedBytes)
    }

    private func job(_ request: Request, context: HubRequestContext) async throws -> StoredJob {
        let (store, _) = try configured()
        let id = try context.parameters.require("id")
        guard let stored = try await storeCall({ try await store.job(hub: context.hub.name, id: id) }) else {
            throw HubAPIError(.notFound, "job \(id.prefix(64)) not found")
        }
        return stored
    }

    /// The committed part of an output file, streamed: lines of a chunk not yet committed
    /// are not shown.
    static func file(_ url: URL, length: Int64) -> Response {
        Response(
            status: .ok, headers: [.contentType: "text/plain; charset=utf-8"],
            body: ResponseBody { writer in
                var left = length
                if left > 0, let handle = try? FileHandle(forReadingFrom: url) {
                    defer { try? handle.close() }
                    while left > 0, let data = try handle.read(upToCount: Int(min(left, 256 * 1024))), !data.isEmpty {
                        left -= Int64(data.count)
                        try await writer.write(ByteBuffer(bytes: data))
                    }
                }
                try await writer.finish(nil)
            })
    }

    /// The job's output properties: where to fetch what it wrote.
    static func links(_ job: NotificationHubJob, base: String) -> [(String, String)] {
        [("OutputFilePath", "\(base)/jobs/\(job.jobId)/output"), ("FailedFilePath", "\(base)/jobs/\(job.jobId)/failed")]
    }

    static func atom(_ body: String) -> Response {
        Response(
            status: .ok, headers: [.contentType: "application/atom+xml;type=entry;charset=utf-8"], body: .init(byteBuffer: ByteBuffer(string: body)))
    }
}
