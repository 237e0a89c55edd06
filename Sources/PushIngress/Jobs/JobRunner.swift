import Foundation
import Logging
import PushConfiguration
import PushModel
import PushStore
import ServiceLifecycle
import Synchronization

/// Wakes the job runner when a job can start, rather than at its next look.
public final class JobSignal: Sendable {
    private let state = Mutex<(pending: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    public init() {}

    public func wake() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.pending = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    /// Returns at a `wake` or after `duration`, whichever is first.
    func wait(upTo duration: Duration) async {
        let sleeper = Task {
            try? await Task.sleep(for: duration)
            self.wake()
        }
        await withCheckedContinuation { continuation in
            let now = state.withLock { state in
                if state.pending {
                    state.pending = false
                    return true
                }
                state.waiter = continuation
                return false
            }
            if now { continuation.resume() }
        }
        sleeper.cancel()
    }
}

/// Runs import and export jobs in the background of the ingress, one at a time. It takes a
/// job with a lease in the store, renewed with every chunk; a chunk's registration writes and
/// the job's new position commit together, after its output lines are on disk. A job whose
/// ingress died is taken over when its lease runs out and goes on from its last position,
/// its files cut back to it: nothing is written twice.
public final class JobRunner: Service, Sendable {
    public struct Settings: Sendable {
        /// Lines applied in one transaction.
        public var chunkLines = 5_000
        /// Registrations an export reads at a time.
        public var exportPage = 2_000
        public var poll: Duration = .seconds(2)
        /// Finished jobs and their files are kept this long.
        public var keepFinished: TimeInterval = 7 * 86_400
        /// How long a job runs before it is let go, so that the other hubs' jobs get their
        /// turns (the oldest-touched job is taken next).
        public var turn: Duration = .seconds(60)
        /// Called after each chunk is committed, with the job's position (tests stop a job here).
        public var afterChunk: (@Sendable (JobPosition) async throws -> Void)?

        public init() {}
    }

    let store: any JobStore
    let files: JobFiles
    let hubs: HubsConfiguration
    let signal: JobSignal
    let settings: Settings
    let logger: Logger
    /// This runner's name in the store's leases.
    let runner = RandomID.make()
    private let stopping = Atomic<Bool>(false)

    public init(store: any JobStore, files: JobFiles, hubs: HubsConfiguration, signal: JobSignal, settings: Settings = Settings(), logger: Logger) {
        self.store = store
        self.files = files
        self.hubs = hubs
        self.signal = signal
        self.settings = settings
        self.logger = logger
    }

    /// The longest line read; longer ones fail. A registration body is at most 64 KiB, and an
    /// export writes a template's quotes as `&quot;`: this takes back any line an export wrote.
    static let maximumLine = 256 * 1024
    /// The most bytes of lines in one chunk, whatever its line count: a chunk is held in memory
    /// twice (the next is parsed while one is written).
    static let maximumChunkBytes = 8 << 20
    /// Past this many failed lines a job stops, Failed: an input that is mostly wrong should
    /// not fill the disk with reasons.
    static let maximumFailedLines: Int64 = 100_000
    /// Tries in a row that make no progress before a job ends Failed.
    static let maximumAttempts = 10

    public func run() async throws {
        try? FileManager.default.createDirectory(at: files.directory, withIntermediateDirectories: true)
        await withGracefulShutdownHandler {
            var lastSweep = Date.distantPast
            while !stopping.load(ordering: .relaxed) && !Task.isCancelled {
                do {
                    if Date().timeIntervalSince(lastSweep) > 3_600 {
                        lastSweep = Date()
                        try await sweep()
                    }
                    if let job = try await store.claimJob(runner: runner, hubs: hubs.hubs.map(\.name), lease: files.settings.lease, now: Date()) {
                        // When the store could not even defer the job, a pause before the next look.
                        if await run(job) { await signal.wait(upTo: .seconds(5)) }
                        continue
                    }
                } catch {
                    logger.warning("the job store failed; trying again", metadata: ["pushhub.error": "\(String(describing: error).prefix(300))"])
                }
                await signal.wait(upTo: settings.poll)
            }
        } onGracefulShutdown: {
            self.stopping.store(true, ordering: .relaxed)
            self.signal.wake()
        }
    }

    /// Ends imports that never got an input, and removes finished jobs past their keeping
    /// time with their files.
    func sweep() async throws {
        _ = try await store.expireWaitingJobs(before: Date().addingTimeInterval(-86_400))
        for (hub, id) in try await store.removeFinishedJobs(before: Date().addingTimeInterval(-settings.keepFinished)) {
            try? FileManager.default.removeItem(at: files.jobDirectory(hub: hub, id: id))
        }
    }

    /// Takes one job that can run and runs it; false when there was none. For benchmarks and
    /// tools that run jobs without the service.
    public func runOne() async throws -> Bool {
        guard let job = try await store.claimJob(runner: runner, hubs: hubs.hubs.map(\.name), lease: files.settings.lease, now: Date()) else {
            return false
        }
        _ = await run(job)
        return true
    }

    /// Runs one claimed job to its end, or until the ingress stops (it is let go, to go on
    /// elsewhere or after the restart) or loses the lease. A failure that may pass (the store or
    /// the disk) defers the job: the store keeps it from being taken during its back-off, while
    /// other jobs go on. True when not even that could be written, and the runner should pause.
    func run(_ stored: StoredJob) async -> Bool {
        let job = stored.job
        let metadata: Logger.Metadata = ["pushhub.hub": "\(job.hub)", "pushhub.job": "\(job.jobId)", "pushhub.jobType": "\(job.type.rawValue)"]
        logger.info("job running", metadata: metadata.merging(["pushhub.line": "\(stored.position.line)"]) { $1 })
        // An uploaded input is the job's own: it goes when the job ends, however it ends.
        var ended = false
        defer {
            if ended, let path = stored.inputPath, path.hasPrefix(files.jobDirectory(hub: job.hub, id: job.jobId).path + "/") {
                try? FileManager.default.removeItem(atPath: path)
            }
        }
        do {
            let finished = try await job.type.isImport ? runImport(stored) : runExport(stored)
            if finished {
                try await store.finishJob(hub: job.hub, id: job.jobId, runner: runner, status: .completed, failure: nil)
                ended = true
                logger.info("job completed", metadata: metadata)
            } else {
                try await store.releaseJob(hub: job.hub, id: job.jobId, runner: runner)
                logger.info(
                    stopping.load(ordering: .relaxed) ? "job let go; it goes on after the restart" : "job let go for a turn of other jobs",
                    metadata: metadata)
            }
        } catch is JobLeaseLost {
            logger.warning("job taken over by another ingress", metadata: metadata)
        } catch let failure as JobFailure {
            logger.warning("job failed", metadata: metadata.merging(["pushhub.error": "\(failure.reason)"]) { $1 })
            ended = (try? await store.finishJob(hub: job.hub, id: job.jobId, runner: runner, status: .failed, failure: failure.reason)) != nil
        } catch {
            // The store or the disk: the job goes on from its last position after a back-off,
            // unless tries in a row keep failing.
            let reason = (error as? SQLError)?.reason ?? String(describing: error)
            logger.warning("job stopped; it goes on later", metadata: metadata.merging(["pushhub.error": "\(reason.prefix(300))"]) { $1 })
            do {
                ended = try await store.deferJob(
                    hub: job.hub, id: job.jobId, runner: runner, failure: String(reason.prefix(300)), maximumAttempts: Self.maximumAttempts)
            } catch {
                // Not even the back-off could be written: the store is failing for everyone.
                return true
            }
        }
        return false
    }

    /// A failure that will repeat: the job ends Failed with it.
    struct JobFailure: Error {
        var reason: String
    }

    /// True when the input was read to its end; false when the ingress stops or the job's turn
    /// is over.
    private func runImport(_ stored: StoredJob) async throws -> Bool {
        let job = stored.job
        let turnEnds = ContinuousClock.now + settings.turn
        var moved = false
        guard let hub = hubs.hub(named: job.hub) else { throw JobFailure(reason: "hub \(job.hub) is no longer configured") }
        guard let inputPath = stored.inputPath else { throw JobFailure(reason: "the job has no input") }
        let output = try JobOutput(
            output: files.output(hub: job.hub, id: job.jobId), failed: files.failed(hub: job.hub, id: job.jobId), position: stored.position)
        let input: JobInput
        do {
            input = JobInput(try JobLineReader(path: inputPath, offset: stored.position.inputOffset, maximum: Self.maximumLine))
        } catch {
            throw JobFailure(reason: "the input file cannot be read any more")
        }
        defer { input.close() }
        var position = stored.position
        let size = max(stored.inputSize, 1)
        let (chunkLines, type) = (settings.chunkLines, job.type)
        // The next chunk is read and parsed while the store applies this one.
        let start = position
        var next = Task { try input.chunk(lines: chunkLines, after: start, hub: hub, type: type) }
        defer { next.cancel() }
        let pause = files.settings.chunkPause
        while true {
            let (lines, read) = try await next.value
            if lines.isEmpty { return true }
            // The configured pause between chunks (`jobs.chunkPauseMilliseconds`): none before the
            // first, none after the last.
            if moved, pause > .zero { try? await Task.sleep(for: pause) }
            // At least a chunk a turn, so a job always moves.
            if stopping.load(ordering: .relaxed) || (moved && ContinuousClock.now > turnEnds) { return false }
            next = Task { try input.chunk(lines: chunkLines, after: read, hub: hub, type: type) }
            do {
                position = try await apply(lines, through: read, from: position, job: job, size: size, output: output)
                moved = true
                try await settings.afterChunk?(position)
                if position.failed > Self.maximumFailedLines {
                    throw JobFailure(reason: "more than \(Self.maximumFailedLines) lines failed (see Failed.txt); the rest was not read")
                }
            } catch {
                // The reader is the next chunk's until it is done with it.
                _ = try? await next.value
                throw error
            }
        }
    }

    /// Applies a chunk's lines and returns the committed position. When the store refuses the
    /// chunk for good (a value its indexes cannot hold, say), the lines go one at a time, and
    /// a line it refuses fails alone, with the store's reason: nothing is retried for ever.
    private func apply(
        _ lines: [JobLine], through read: JobPosition, from position: JobPosition, job: NotificationHubJob, size: Int64, output: JobOutput
    ) async throws -> JobPosition {
        func once(_ lines: [JobLine], through: JobPosition, from position: JobPosition) async throws -> JobPosition {
            // A try before this one may have written lines and failed to commit them.
            try output.reset(to: position)
            var next = position
            (next.inputOffset, next.line) = (through.inputOffset, through.line)
            return try await store.applyImportChunk(
                hub: job.hub, id: job.jobId, runner: runner, type: job.type, lines: lines, next: next,
                progress: min(99.99, Double(next.inputOffset) / Double(size) * 100), lease: files.settings.lease
            ) { results in
                var written = ""
                var failures = ""
                for result in results {
                    switch result.outcome {
                    case .success(let id): written += JobFiles.outputLine(result.line, id)
                    case .failure(let failure): failures += JobFiles.failedLine(result.line, failure)
                    }
                }
                return try output.append(output: written, failed: failures)
            }
        }
        /// The lines, failed with the store's reason (without the statement: never the SQL).
        func refuse(_ lines: [JobLine], _ error: SQLError, through: JobPosition, from position: JobPosition) async throws -> JobPosition {
            let refused = lines.map {
                JobLine(line: $0.line, registration: .failure(.init("BadRequest", "the store refused it: \(error.reason.prefix(200))")), end: $0.end)
            }
            do { return try await once(refused, through: through, from: position) } catch let error as SQLError where error.isPermanent {
                throw JobFailure(reason: "the store refuses the job's writes: \(error.reason.prefix(200))")
            }
        }
        do {
            return try await once(lines, through: read, from: position)
        } catch let error as SQLError where error.isPermanent && lines.count > 1 {
            logger.notice(
                "the store refused a chunk; its lines go one at a time",
                metadata: ["pushhub.job": "\(job.jobId)", "pushhub.error": "\(String(error.reason.prefix(200)))"])
            var position = position
            for (index, line) in lines.enumerated() {
                var through = read
                if index < lines.count - 1 { (through.inputOffset, through.line) = (line.end, line.line) }
                do {
                    position = try await once([line], through: through, from: position)
                } catch let error as SQLError where error.isPermanent {
                    position = try await refuse([line], error, through: through, from: position)
                }
            }
            return position
        } catch let error as SQLError where error.isPermanent {
            return try await refuse(lines, error, through: read, from: position)
        }
    }

    /// An input file's reader, used by one chunk's task at a time.
    final class JobInput: @unchecked Sendable {
        private var reader: JobLineReader

        init(_ reader: JobLineReader) { self.reader = reader }

        func close() { reader.close() }

        /// The next `lines` lines after `position`, parsed, and the position after them;
        /// no lines at the end of the input.
        func chunk(lines count: Int, after position: JobPosition, hub: HubsConfiguration.Hub, type: NotificationHubJob.JobType) throws -> (
            [JobLine], JobPosition
        ) {
            var position = position
            var lines: [JobLine] = []
            var texts: [(line: Int64, text: Data, end: Int64)] = []
            texts.reserveCapacity(count)
            var bytes = 0
            while lines.count + texts.count < count, bytes < JobRunner.maximumChunkBytes, let (line, consumed) = try reader.next() {
                position.line += 1
                position.inputOffset += consumed
                switch line {
                case .tooLong:
                    lines.append(
                        JobLine(
                            line: position.line, registration: .failure(.init("BadRequest", "the line is longer than \(maximumLine) bytes")),
                            end: position.inputOffset))
                case .text(let text):
                    // Blank lines (a file's last newline, say) are no registrations.
                    if text.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { continue }
                    bytes += text.count
                    texts.append((position.line, text, position.inputOffset))
                }
            }
            lines += JobRunner.parse(texts, hub: hub, type: type)
            lines.sort { $0.line < $1.line }
            return (lines, position)
        }
    }

    /// The registrations of `texts`, read on both cores: parsing is most of an import's CPU.
    static func parse(_ texts: [(line: Int64, text: Data, end: Int64)], hub: HubsConfiguration.Hub, type: NotificationHubJob.JobType) -> [JobLine] {
        let halves = texts.count < 64 ? [texts[...]] : [texts[..<(texts.count / 2)], texts[(texts.count / 2)...]]
        let parsed = Mutex<[[JobLine]]>(Array(repeating: [], count: halves.count))
        DispatchQueue.concurrentPerform(iterations: halves.count) { index in
            let lines = halves[index].map { JobLine(line: $0.line, registration: parseLine($0.text, hub: hub, type: type), end: $0.end) }
            parsed.withLock { $0[index] = lines }
        }
        return parsed.withLock { $0.flatMap { $0 } }
    }

    /// One line's registration, or why it is none: its XML, its id and its endpoint checked.
    static func parseLine(_ text: Data, hub: HubsConfiguration.Hub, type: NotificationHubJob.JobType) -> Result<Registration, JobLineFailure> {
        let registration: Registration
        do { registration = try RegistrationDescription.parseLine(text, hub: hub.name) } catch {
            return .failure(.init("BadRequest", error.description))
        }
        let id = registration.registrationId
        if !id.isEmpty {
            guard Registration.isImportableId(id) else {
                return .failure(
                    .init("BadRequest", "RegistrationId: must be 1 to \(Registration.maximumIdLength) characters, none a control character"))
            }
            guard !Registration.isInstallationOwned(id) else {
                return .failure(.init("Forbidden", "RegistrationId: ids starting with \(Registration.installationPrefix) belong to installations"))
            }
        } else if type == .importUpdateRegistrations || type == .importDeleteRegistrations {
            return .failure(.init("BadRequest", "RegistrationId: missing; an update or a delete names the registration"))
        }
        if type != .importDeleteRegistrations {
            do { try hub.checkEndpoint(of: registration) } catch { return .failure(.init("BadRequest", error.description)) }
        }
        return .success(registration)
    }

    /// True when every registration was written out; false as for an import.
    private func runExport(_ stored: StoredJob) async throws -> Bool {
        let job = stored.job
        let turnEnds = ContinuousClock.now + settings.turn
        var moved = false
        let output = try JobOutput(
            output: files.output(hub: job.hub, id: job.jobId), failed: files.failed(hub: job.hub, id: job.jobId), position: stored.position)
        var position = stored.position
        if position.exportCursor == nil && position.succeeded == 0 {
            position.exportTotal = try await store.countExportedRegistrations(hub: job.hub)
            // The count reads the hub: the lease is renewed once it is known.
            try await store.checkpointJob(hub: job.hub, id: job.jobId, runner: runner, position: position, progress: 0, lease: files.settings.lease)
        }
        while true {
            // At least a chunk a turn, so a job always moves.
            if stopping.load(ordering: .relaxed) || (moved && ContinuousClock.now > turnEnds) { return false }
            let page = try await store.exportPage(hub: job.hub, after: position.exportCursor, limit: settings.exportPage)
            var text = ""
            for registration in page.registrations { text += RegistrationDescription.line(registration) }
            (position.outputBytes, position.failedBytes) = try output.append(output: text, failed: "")
            position.exportCursor = page.next ?? position.exportCursor
            position.succeeded += Int64(page.registrations.count)
            let progress = min(99.99, Double(position.succeeded) / Double(max(position.exportTotal, 1)) * 100)
            try await store.checkpointJob(
                hub: job.hub, id: job.jobId, runner: runner, position: position, progress: progress, lease: files.settings.lease)
            moved = true
            try await settings.afterChunk?(position)
            if page.registrations.count < settings.exportPage { return true }
        }
    }
}
