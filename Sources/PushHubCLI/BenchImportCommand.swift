import ArgumentParser
import Foundation
import PushConfiguration
import PushEnvironment
import PushIngress
import PushLoad
import PushModel
import PushStore

extension BenchCommand {
    /// Import and export jobs as the ingress runs them (its `JobRunner`, on a file in the jobs
    /// directory), timed and with the process's CPU per registration.
    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run import and export jobs of N registrations through the ingress's job runner: rate and CPU per registration.",
            discussion:
                "Examples:\n  pushhub bench import --registrations 200000\n  pushhub bench import --database postgres://… --section import-postgres-benchmark"
        )

        @Option(help: "Registrations in the input file.")
        var registrations = 200_000

        @Option(help: "The store: an SQLite path (default: a fresh temporary file) or postgres://….")
        var database: String?

        @Option(help: "Replace this section of the Markdown file (between its markers) with the figures.")
        var section = "import-benchmark"

        @Option(help: "Replace the section of this Markdown file with the figures.")
        var markdownFile: String?

        func run() async throws {
            let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-bench-import-\(UUID().uuidString)")
            let path = database ?? scratch.appendingPathComponent("store.sqlite").path
            try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: scratch) }
            let logger = makeLogger("pushhub.bench")
            let store = try await StoreLocation(path).open(logger: logger)
            let hub = "bench-import-\(UInt32.random(in: 0...UInt32.max))"
            let hubs = HubsConfiguration(hubs: [.init(name: hub, sasRules: [])])
            let files = JobFiles(directory: scratch.appendingPathComponent("jobs").path)
            try FileManager.default.createDirectory(at: files.hubDirectory(hub), withIntermediateDirectories: true)
            let input = files.hubDirectory(hub).appendingPathComponent("registrations.txt")
            try Self.writeInput(registrations, to: input)
            let runner = JobRunner(store: store, files: files, hubs: hubs, signal: JobSignal(), logger: logger)
            var rows: [String] = []
            for type: NotificationHubJob.JobType in [
                .importCreateRegistrations, .importUpsertRegistrations, .importUpdateRegistrations, .exportRegistrations, .importDeleteRegistrations,
            ] {
                let now = Date()
                let job = NotificationHubJob(
                    jobId: RandomID.make(), hub: hub, type: type, importFileUri: type.isImport ? "registrations.txt" : nil, createdAt: now,
                    updatedAt: now)
                let size = Int64((try FileManager.default.attributesOfItem(atPath: input.path)[.size] as? NSNumber)?.int64Value ?? 0)
                guard try await store.createJob(job, inputPath: type.isImport ? input.path : nil, inputSize: size, maximumUnfinished: 100) else {
                    throw CommandFailure(description: "the job was refused")
                }
                let cpu = ProcessCPU.seconds()
                let start = ContinuousClock.now
                // A job runs in turns; a long one is taken up again until it ends.
                repeat {
                    guard try await runner.runOne() else { throw CommandFailure(description: "the job did not run") }
                } while try await store.job(hub: hub, id: job.jobId)?.job.status.isFinished == false
                let seconds = (ContinuousClock.now - start).seconds
                let cpuSeconds = ProcessCPU.seconds() - cpu
                guard let done = try await store.job(hub: hub, id: job.jobId), done.job.status == .completed, done.job.failed == 0,
                    done.job.succeeded == Int64(registrations)
                else {
                    let state = try await store.job(hub: hub, id: job.jobId)
                    throw CommandFailure(description: "\(type.rawValue) did not complete cleanly: \(String(describing: state?.job))")
                }
                let row =
                    "| \(type.rawValue) | \(registrations) | \(String(format: "%.2f", seconds)) | \(Int(Double(registrations) / seconds)) | "
                    + "\(String(format: "%.1f", cpuSeconds / Double(registrations) * 1e6)) |"
                emit(row)
                rows.append(row)
            }
            await store.close()
            if database == nil {
                for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
            }
            let table =
                """
                Store: \(database == nil ? "SQLite (a fresh file)" : "PostgreSQL"); \(registrations) registrations, 60 % APNs and 40 % FCM v1, \
                three tags each, one in ten a template; \(ProcessInfo.processInfo.activeProcessorCount) cores.

                | job | registrations | seconds | registrations/s | process CPU-µs per registration |
                |---|---|---|---|---|
                \(rows.joined(separator: "\n"))
                """
            emit(table)
            if let markdownFile { try BenchmarkReport.replaceSection(section, in: URL(fileURLWithPath: markdownFile), with: table) }
        }

        /// Lines as Azure's SDKs serialize descriptions, each with its own id, so the same file
        /// creates, upserts, updates and deletes.
        static func writeInput(_ count: Int, to url: URL) throws {
            FileManager.default.createFile(atPath: url.path, contents: nil)
            let handle = try FileHandle(forWritingTo: url)
            defer { try? handle.close() }
            var text = ""
            for index in 0..<count {
                var registration = Registration(
                    registrationId: "bench-\(index)", hub: "", format: index % 5 < 3 ? .apple : .fcmv1,
                    handle: String(repeating: String(format: "%08x", index), count: 8), tags: ["Sports", "team-\(index % 50)", "user-\(index)"],
                    updatedAt: Date())
                if index % 10 == 0 {
                    registration.template = Template(
                        name: "t",
                        body: registration.format == .apple ? #"{"aps":{"alert":"$(message)"}}"# : #"{"message":{"data":{"m":"$(message)"}}}"#)
                }
                text += RegistrationDescription.line(registration)
                if text.utf8.count > 1 << 20 {
                    try handle.write(contentsOf: Data(text.utf8))
                    text = ""
                }
            }
            try handle.write(contentsOf: Data(text.utf8))
        }
    }
}

/// The process's CPU time (user and system), in seconds.
enum ProcessCPU {
    static func seconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }
}
