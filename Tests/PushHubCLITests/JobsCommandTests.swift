import Foundation
import PushIngress
import PushModel
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Import and export jobs against a real `pushhub-ingress`: `pushhub import` and `pushhub
/// export`, and an import that survives a `kill -9` of the ingress in the middle.
@Suite("pushhub import and export", .timeLimit(.minutes(3)))
struct JobsCommandTests {
    static let key = String(repeating: "j", count: 44)

    struct Ingress {
        let process: ChildProcess
        let url: String

        var connectionString: String {
            "Endpoint=sb://\(url.replacingOccurrences(of: "http://", with: ""))/;SharedAccessKeyName=Full;SharedAccessKey=\(JobsCommandTests.key)"
        }

        static func start(directory: URL) async throws -> Ingress {
            let process = try ChildProcess(
                IngressCommandTests.ingressExecutable,
                arguments: [
                    "--port", "0", "--config", directory.appendingPathComponent("pushhub.yaml").path, "--database",
                    directory.appendingPathComponent("pushhub.sqlite").path,
                ],
                environment: ["PUSHHUB_LOG_LEVEL": "error", "PUSHHUB_KAFKA": ""])
            let url = try #require(await process.line(startingWith: "PUSHHUB_URL=")).dropFirst("PUSHHUB_URL=".count)
            return Ingress(process: process, url: String(url))
        }

        func call(_ method: String, _ path: String, _ body: String? = nil) async throws -> (Int, String) {
            var request = URLRequest(url: URL(string: "\(url)/jobs-hub\(path)")!)
            request.httpMethod = method
            request.setValue(try #require(ConnectionString(connectionString)).token(for: "/jobs-hub"), forHTTPHeaderField: "Authorization")
            if let body {
                request.setValue("application/atom+xml;type=entry;charset=utf-8", forHTTPHeaderField: "Content-Type")
                request.httpBody = Data(body.utf8)
            }
            let (data, response) = try await URLSession.shared.data(for: request)
            return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
        }

        /// The job's status and counts.
        func job(_ id: String) async throws -> (status: NotificationHubJob.Status?, succeeded: Int?, failed: Int?) {
            let (status, body) = try await call("GET", "/jobs/\(id)")
            #expect(status == 200, "\(body)")
            let job = try NotificationHubJob.parseReport(Data(body.utf8))
            return (job.status, job.count("SucceededCount").map(Int.init), job.count("FailedCount").map(Int.init))
        }
    }

    /// A directory for the ingress, whose `pushhub.yaml` has `chunkPause` milliseconds between an
    /// import's chunks.
    static func setUp(chunkPause: Int = 0) throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-jobs-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("jobs/jobs-hub"), withIntermediateDirectories: true)
        try configure(directory, chunkPause: chunkPause)
        return directory
    }

    /// Writes the ingress's `pushhub.yaml` in `directory`, with `chunkPause` milliseconds between
    /// an import's chunks.
    static func configure(_ directory: URL, chunkPause: Int = 0) throws {
        try """
        hubs:
          - name: jobs-hub
            sasRules: [{name: Full, key: "\(key)", rights: [Listen, Send, Manage]}]
            credentials: {}
        jobs:
          leaseSeconds: 2
          chunkPauseMilliseconds: \(chunkPause)
        """.write(to: directory.appendingPathComponent("pushhub.yaml"), atomically: true, encoding: .utf8)
    }

    static func lines(_ count: Int, prefix: String) -> String {
        (0..<count).map {
            "<AppleRegistrationDescription xmlns=\"http://schemas.microsoft.com/netservices/2010/10/servicebus/connect\">"
                + "<RegistrationId>\(prefix)\($0)</RegistrationId><Tags>Sports,n\($0 % 10)</Tags><DeviceToken>cafe\($0)</DeviceToken>"
                + "</AppleRegistrationDescription>\n"
        }.joined()
    }

    /// Runs `body` on a thread of its own: big files are made without holding up the tests
    /// that share the concurrency pool.
    static func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try body() }) }.start()
        }
    }

    @Test("an import whose ingress is killed with -9 goes on after the restart and writes every line once")
    func killedMidImport() async throws {
        // Five chunks of 5,000 lines, a second apart: the import stays in its middle for four
        // seconds or more however fast the machine, so the looks below cannot all miss it.
        let directory = try Self.setUp(chunkPause: 1_000)
        let count = 25_000
        try await Self.offPool {
            try Self.lines(count, prefix: "k").write(to: directory.appendingPathComponent("jobs/jobs-hub/big.txt"), atomically: true, encoding: .utf8)
        }
        let first = try await Ingress.start(directory: directory)
        let job = """
            <entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><NotificationHubJob \
            xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><Type>ImportCreateRegistrations</Type>\
            <ImportFileUri>big.txt</ImportFileUri></NotificationHubJob></content></entry>
            """
        let (created, entry) = try await first.call("POST", "/jobs", job)
        #expect(created == 201, "\(entry)")
        let id = try NotificationHubJob.parseReport(Data(entry.utf8)).jobId
        // Killed once some chunks are committed, long before the end.
        var progress = try await first.job(id)
        let deadline = ContinuousClock.now + .seconds(60)
        while (progress.succeeded ?? 0) < 1 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
            progress = try await first.job(id)
        }
        first.process.signal(SIGKILL)
        _ = await first.process.exitStatus(within: .seconds(10))
        #expect(progress.status == .running && (progress.succeeded ?? 0) > 0 && (progress.succeeded ?? count) < count, "\(progress)")

        // The restarted ingress runs the rest without pauses.
        try Self.configure(directory)
        let second = try await Ingress.start(directory: directory)
        defer { second.process.signal(SIGTERM) }
        var done = try await second.job(id)
        while done.status != .completed && done.status != .failed && ContinuousClock.now < deadline + .seconds(60) {
            try await Task.sleep(for: .milliseconds(200))
            done = try await second.job(id)
        }
        // A create job: a chunk applied twice would have failed as conflicts.
        #expect(done.status == .completed && done.succeeded == count && done.failed == 0, "\(done)")
        let outputFile = directory.appendingPathComponent("jobs/jobs-hub/\(id)/Output.txt")
        let (lineCount, inOrder, firstLine, lastLine) = try await Self.offPool {
            let written = try String(contentsOf: outputFile, encoding: .utf8).split(separator: "\n")
            return (
                written.count, zip(written, 1...count).allSatisfy { $0.hasPrefix("\($1),") }, String(written.first ?? ""), String(written.last ?? "")
            )
        }
        #expect(lineCount == count)
        #expect(firstLine == "1,k0" && lastLine == "\(count),k\(count - 1)")
        #expect(inOrder, "every line once, in order")

        // `pushhub export` writes them all; `pushhub import` reports failed lines and exits 1.
        let environment = ["PUSHHUB_URL": second.url, "PUSHHUB_CONNECTION_STRING": second.connectionString, "PUSHHUB_HUB": "jobs-hub"]
        let exported = directory.appendingPathComponent("exported.txt")
        let (exportStatus, exportOutput) = try await CommandLineMistakesTests.pushhub(["export", exported.path], environment: environment)
        #expect(exportStatus == 0 && exportOutput.contains("\(count) registration(s) exported"), "\(exportOutput)")
        let exportedLines = try String(contentsOf: exported, encoding: .utf8).split(separator: "\n")
        #expect(exportedLines.count == count)
        #expect(try RegistrationDescription.parseLine(Data(exportedLines[7].utf8), hub: "jobs-hub").registrationId == "k7")

        let small = directory.appendingPathComponent("small.txt")
        try (Self.lines(2, prefix: "k") + Self.lines(3, prefix: "new-") + "not xml\n").write(to: small, atomically: true, encoding: .utf8)
        let failedTo = directory.appendingPathComponent("failed.txt")
        let (importStatus, importOutput) = try await CommandLineMistakesTests.pushhub(
            ["import", small.path, "--type", "create", "--failed-to", failedTo.path], environment: environment)
        #expect(importStatus == 1 && importOutput.contains("3 line(s) imported, 3 failed"), "\(importOutput)")
        #expect(
            try String(contentsOf: failedTo, encoding: .utf8).split(separator: "\n") == [
                "1,Conflict,registration k0 exists", "2,Conflict,registration k1 exists", "6,BadRequest,body: not well-formed XML (line 1, column 1)",
            ])
        let (upsertStatus, upsertOutput) = try await CommandLineMistakesTests.pushhub(["import", small.path], environment: environment)
        #expect(upsertStatus == 1 && upsertOutput.contains("5 line(s) imported, 1 failed"), "\(upsertOutput)")
    }
}
