import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import PushConfiguration
import PushIngress
import PushModel
import PushStore
import Testing

/// Azure's `jobs` API through HTTP: a job posted as Azure's SDKs post it, its input uploaded or
/// named in the jobs directory, run by the ingress's job runner, and read back as Azure's
/// `NotificationHubJob` with the files it wrote.
@Suite("Jobs API (import and export)")
struct JobsAPITests {
    struct Fixture {
        let store: SQLRegistrationStore
        let app: any ApplicationProtocol
        let files: JobFiles
        let hubs: HubsConfiguration

        init(jobs: JobsConfiguration = JobsConfiguration(), wrap: (SQLRegistrationStore) -> any JobStore = { $0 }) async throws {
            let root = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-jobs-\(UUID().uuidString)")
            store = try await SQLRegistrationStore.open(SQLiteDatabase(path: root.path + ".sqlite"))
            var hubs = IngressFixture.hubs
            hubs.jobs = jobs
            self.hubs = hubs
            files = JobFiles(directory: root.path, settings: jobs)
            try FileManager.default.createDirectory(at: files.hubDirectory("myhub"), withIntermediateDirectories: true)
            var stores = IngressStores(store)
            stores.jobs = wrap(store)
            app = Application(router: try buildIngressRouter(hubs: hubs, stores: stores, jobs: files, jobSignal: JobSignal()))
        }

        /// A runner of its own, with small chunks so a job takes several.
        func runner(chunkLines: Int = 3, afterChunk: (@Sendable (JobPosition) async throws -> Void)? = nil) -> JobRunner {
            var settings = JobRunner.Settings()
            settings.chunkLines = chunkLines
            settings.exportPage = chunkLines
            settings.afterChunk = afterChunk
            return JobRunner(
                store: store, files: files, hubs: hubs, signal: JobSignal(), settings: settings,
                logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
        }
    }

    static let manage = IngressFixture.fullAccess
    static let atom = manage.withContentType("application/atom+xml;type=entry;charset=utf-8")
    static let connect = "http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"

    /// The entry Azure's .NET SDK posts for `SubmitNotificationHubJobAsync`.
    static func job(_ type: String, importFileUri: String? = nil) -> String {
        """
        <?xml version="1.0" encoding="utf-8"?><entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">\
        <NotificationHubJob xmlns:i="http://www.w3.org/2001/XMLSchema-instance" xmlns="\(connect)">\
        <Type>\(type)</Type><OutputContainerUri>https://account.blob.core.windows.net/container?sig=x</OutputContainerUri>\
        \(importFileUri.map { "<ImportFileUri>\($0)</ImportFileUri>" } ?? "")</NotificationHubJob></content></entry>
        """
    }

    /// A line as `RegistrationDescription.Serialize()` writes one.
    static func line(_ type: String, _ fields: String) -> String {
        "<\(type) xmlns:i=\"http://www.w3.org/2001/XMLSchema-instance\" xmlns=\"\(connect)\">\(fields)</\(type)>"
    }

    static func field(_ name: String, _ body: String) throws -> String {
        try #require(try XMLNode.parse(Data(body.utf8)).find(where: { $0 == name })).text
    }

    static func property(_ key: String, _ body: String) throws -> String? {
        let properties = try XMLNode.parse(Data(body.utf8)).find(where: { $0 == "OutputProperties" })
        return properties?.children.first { $0.child("Key")?.text == key }?.child("Value")?.text
    }

    /// Posts a job and returns its id.
    static func start(_ client: some TestClientProtocol, _ type: String, importFileUri: String? = nil) async throws -> String {
        let response = try await client.execute(
            uri: "/myhub/jobs?api-version=2015-01", method: .post, headers: atom, body: ByteBuffer(string: job(type, importFileUri: importFileUri)))
        #expect(response.status == .created, "\(response.text)")
        return try field("JobId", response.text)
    }

    static func read(_ client: some TestClientProtocol, _ id: String) async throws -> String {
        let response = try await client.execute(uri: "/myhub/jobs/\(id)?api-version=2015-01", method: .get, headers: manage)
        #expect(response.status == .ok, "\(response.text)")
        return response.text
    }

    static func file(_ client: some TestClientProtocol, _ id: String, _ name: String) async throws -> [String] {
        let response = try await client.execute(uri: "/myhub/jobs/\(id)/\(name)", method: .get, headers: manage)
        #expect(response.status == .ok)
        return response.text.split(separator: "\n").map(String.init)
    }

    @Test("an upload imports line by line, Output.txt and Failed.txt say what became of each line, and the job reads as Azure's")
    func uploadedImport() async throws {
        let fixture = try await Fixture()
        try await fixture.app.test(.router) { client in
            let id = try await Self.start(client, "ImportCreateRegistrations")
            let waiting = try await Self.read(client, id)
            #expect(try Self.field("Status", waiting) == "Started")
            let input = [
                Self.line(
                    "AppleRegistrationDescription", "<RegistrationId>r1</RegistrationId><Tags>Sports,News</Tags><DeviceToken>AA01</DeviceToken>"),
                "this is not XML",
                "",
                // Azure's export form: the base element with `i:type`.
                """
                <RegistrationDescription xmlns:i="http://www.w3.org/2001/XMLSchema-instance" i:type="GcmRegistrationDescription" \
                xmlns="\(Self.connect)"><Tags>Sports</Tags><GcmRegistrationId>gcm-2</GcmRegistrationId></RegistrationDescription>
                """,
                Self.line("AppleRegistrationDescription", "<RegistrationId>installation.x</RegistrationId><DeviceToken>AA02</DeviceToken>"),
                Self.line("AppleRegistrationDescription", "<RegistrationId>r1</RegistrationId><DeviceToken>AA03</DeviceToken>"),
                Self.line(
                    "AppleTemplateRegistrationDescription",
                    "<RegistrationId>t1</RegistrationId><DeviceToken>AA04</DeviceToken><BodyTemplate>{\"aps\":{\"alert\":\"$(m)\"}}</BodyTemplate>"),
                Self.line("BrowserRegistrationDescription", "<Endpoint>https://127.0.0.1/steal</Endpoint><P256DH>k</P256DH><Auth>a</Auth>"),
                Self.line("AppleRegistrationDescription", "<DeviceToken>" + String(repeating: "A", count: 300_000) + "</DeviceToken>"),
                Self.line("AppleRegistrationDescription", "<DeviceToken>" + String(repeating: "A", count: 3_000) + "</DeviceToken>"),
            ].joined(separator: "\n")
            let uploaded = try await client.execute(
                uri: "/myhub/jobs/\(id)/input", method: .put, headers: Self.manage, body: ByteBuffer(string: input))
            #expect(uploaded.status == .ok, "\(uploaded.text)")
            let again = try await client.execute(uri: "/myhub/jobs/\(id)/input", method: .put, headers: Self.manage, body: ByteBuffer(string: "x"))
            #expect(again.status == .conflict)
            #expect(try await fixture.runner().runOne())

            let done = try await Self.read(client, id)
            #expect(try Self.field("Status", done) == "Completed")
            #expect(try Self.field("Progress", done) == "100.00")
            let left = try FileManager.default.contentsOfDirectory(atPath: fixture.files.jobDirectory(hub: "myhub", id: id).path)
            #expect(Set(left) == ["Output.txt", "Failed.txt"], "the uploaded input goes when its job ends")
            #expect(try Self.property("SucceededCount", done) == "3")
            #expect(try Self.property("FailedCount", done) == "6")
            #expect(try Self.property("OutputFilePath", done) == "http://localhost/myhub/jobs/\(id)/output")
            // Azure's element names, namespace and DataContract order.
            let job = try #require(try XMLNode.parse(Data(done.utf8)).find(where: { $0 == "NotificationHubJob" }))
            #expect(
                job.children.map(\.name) == [
                    "JobId", "Progress", "Type", "Status", "OutputContainerUri", "OutputProperties", "CreatedAt", "UpdatedAt",
                ])
            #expect(done.contains("<NotificationHubJob xmlns=\"\(Self.connect)\""))
            #expect(done.contains("xmlns:d3p1=\"http://schemas.microsoft.com/2003/10/Serialization/Arrays\""))

            let output = try await Self.file(client, id, "output")
            #expect(output.count == 3)
            #expect(output.first == "1,r1")
            #expect(output.contains { $0.hasPrefix("4,") } && output.contains("7,t1"))
            let failed = try await Self.file(client, id, "failed")
            #expect(failed.count == 6, "\(failed)")
            #expect(failed[0].hasPrefix("2,BadRequest,body: not well-formed XML"))
            #expect(failed[1] == "5,Forbidden,RegistrationId: ids starting with installation. belong to installations")
            #expect(failed[2] == "6,Conflict,registration r1 exists")
            #expect(failed[3].hasPrefix("8,BadRequest,Endpoint:"), "\(failed[3])")
            #expect(failed[4] == "9,BadRequest,the line is longer than 262144 bytes")
            #expect(failed[5] == "10,BadRequest,AppleRegistrationDescription.DeviceToken: is longer than 2048 bytes")
            let r1 = try #require(try await fixture.store.registration(hub: "myhub", id: "r1"))
            #expect(r1.handle == "AA01" && Set(r1.tags) == ["Sports", "News"])
            #expect(try await fixture.store.registration(hub: "myhub", id: "t1")?.template?.body == "{\"aps\":{\"alert\":\"$(m)\"}}")

            let listed = try await client.execute(uri: "/myhub/jobs", method: .get, headers: Self.manage)
            #expect(listed.status == .ok && listed.text.contains("<JobId>\(id)</JobId>"))
        }
    }

    @Test("an export writes one description a line, which imports again; update, upsert and delete name registrations")
    func exportAndReimport() async throws {
        let fixture = try await Fixture()
        try await fixture.app.test(.router) { client in
            for index in 0..<7 {
                var registration = Registration(
                    registrationId: "e\(index)", hub: "myhub", format: index % 2 == 0 ? .apple : .fcmv1, handle: "handle-\(index)",
                    tags: ["Sports", "user-\(index)"], updatedAt: Date())
                if index == 3 { registration.template = Template(name: "two lines", body: "{\"aps\":\r\n{\"alert\":\"$(a)\"}}") }
                _ = try await fixture.store.upsertRegistration(registration, ifMatch: nil)
            }
            let installation = Installation(installationId: "device-1", platform: .apns, pushChannel: "CAFE")
            _ = try await fixture.store.upsertInstallation(installation, hub: "myhub")

            let export = try await Self.start(client, "ExportRegistrations")
            #expect(try await fixture.runner().runOne())
            let done = try await Self.read(client, export)
            #expect(try Self.field("Status", done) == "Completed")
            #expect(try Self.property("SucceededCount", done) == "7", "an installation's registrations are not exported")
            let lines = try await Self.file(client, export, "output")
            #expect(lines.count == 7)
            let read = try lines.map { try RegistrationDescription.parseLine(Data($0.utf8), hub: "myhub") }
            #expect(read.map(\.registrationId) == (0..<7).map { "e\($0)" })
            #expect(read[3].template?.body == "{\"aps\":\r\n{\"alert\":\"$(a)\"}}", "line breaks survive as character references")

            // The export, changed, goes back in as an update: every line names its registration.
            let changed = lines.map { $0.replacingOccurrences(of: "<Tags>Sports,", with: "<Tags>Weather,") }
            try
                (changed.joined(separator: "\n") + "\n"
                + Self.line("AppleRegistrationDescription", "<RegistrationId>nope</RegistrationId><DeviceToken>1</DeviceToken>"))
                .write(to: fixture.files.hubDirectory("myhub").appendingPathComponent("changed.txt"), atomically: true, encoding: .utf8)
            let update = try await Self.start(client, "ImportUpdateRegistrations", importFileUri: "changed.txt")
            #expect(try await fixture.runner().runOne())
            #expect(try Self.property("SucceededCount", try await Self.read(client, update)) == "7")
            #expect(try await Self.file(client, update, "failed") == ["8,NotFound,registration nope not found"])
            let e2 = try #require(try await fixture.store.registration(hub: "myhub", id: "e2"))
            #expect(e2.tags.contains("Weather") && !e2.tags.contains("Sports") && e2.version == 2)

            // Delete takes the ids; the installation's registration stays.
            try lines.prefix(3).joined(separator: "\n").write(
                to: fixture.files.hubDirectory("myhub").appendingPathComponent("gone.txt"), atomically: true, encoding: .utf8)
            let delete = try await Self.start(client, "ImportDeleteRegistrations", importFileUri: "file:gone.txt")
            #expect(try await fixture.runner().runOne())
            #expect(try await Self.file(client, delete, "output") == ["1,e0", "2,e1", "3,e2"])
            #expect(try await fixture.store.registration(hub: "myhub", id: "e0") == nil)
            #expect(try await fixture.store.registration(hub: "myhub", id: "e3") != nil)
            #expect(try await fixture.store.installation(hub: "myhub", id: "device-1") != nil)
        }
    }

    @Test("bad jobs are refused with the field named; files outside the hub's directory are not read")
    func refusals() async throws {
        let fixture = try await Fixture(jobs: JobsConfiguration(maximumInputBytes: 2_048))
        let outside = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-secret-\(UUID().uuidString).txt")
        try "secret".write(to: outside, atomically: true, encoding: .utf8)
        try FileManager.default.createSymbolicLink(
            at: fixture.files.hubDirectory("myhub").appendingPathComponent("link.txt"), withDestinationURL: outside)
        try FileManager.default.createDirectory(at: fixture.files.hubDirectory("otherhub"), withIntermediateDirectories: true)
        try "x".write(to: fixture.files.hubDirectory("otherhub").appendingPathComponent("theirs.txt"), atomically: true, encoding: .utf8)
        try await fixture.app.test(.router) { client in
            func post(_ body: String) async throws -> (HTTPResponse.Status, String) {
                let response = try await client.execute(uri: "/myhub/jobs", method: .post, headers: Self.atom, body: ByteBuffer(string: body))
                return (response.status, response.text)
            }
            for (body, field) in [
                (Self.job("ImportEverything"), "NotificationHubJob.Type"),
                ("<entry xmlns=\"http://www.w3.org/2005/Atom\"><content/></entry>", "NotificationHubJob"),
                (Self.job("ImportUpsertRegistrations", importFileUri: "../otherhub/theirs.txt"), "NotificationHubJob.ImportFileUri"),
                (Self.job("ImportUpsertRegistrations", importFileUri: outside.path), "NotificationHubJob.ImportFileUri"),
                (Self.job("ImportUpsertRegistrations", importFileUri: "link.txt"), "NotificationHubJob.ImportFileUri"),
                (Self.job("ImportUpsertRegistrations", importFileUri: "missing.txt"), "NotificationHubJob.ImportFileUri"),
                (Self.job("ExportRegistrations", importFileUri: "x.txt"), "NotificationHubJob.ImportFileUri"),
            ] {
                let (status, text) = try await post(body)
                #expect(status == .badRequest, "\(body): \(text)")
                #expect(text.contains(field), "\(text)")
                #expect(!text.contains("secret"))
            }
            // Rights: Listen sees nothing; another hub's key does not reach this hub's jobs.
            let id = try await Self.start(client, "ImportUpsertRegistrations")
            let listen = try await client.execute(uri: "/myhub/jobs/\(id)", method: .get, headers: IngressFixture.listenAccess)
            #expect(listen.status == .unauthorized || listen.status == .forbidden)
            let other = try await client.execute(
                uri: "/otherhub/jobs/\(id)", method: .get,
                headers: [.authorization: IngressFixture.token("/otherhub", key: String(repeating: "o", count: 44))])
            #expect(other.status == .notFound)
            // The input limit: 413, and the job still waits for an input.
            let large = try await client.execute(
                uri: "/myhub/jobs/\(id)/input", method: .put, headers: Self.manage, body: ByteBuffer(string: String(repeating: "x", count: 4_096)))
            #expect(large.status == .contentTooLarge)
            #expect(try Self.field("Status", try await Self.read(client, id)) == "Started")
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: fixture.files.jobDirectory(hub: "myhub", id: id).path)
            #expect(leftovers.isEmpty, "\(leftovers)")
            // An export takes no input; at most 8 jobs of a hub wait or run.
            let export = try await Self.start(client, "ExportRegistrations")
            let input = try await client.execute(
                uri: "/myhub/jobs/\(export)/input", method: .put, headers: Self.manage, body: ByteBuffer(string: "x"))
            #expect(input.status == .conflict)
            for _ in 0..<6 { _ = try await Self.start(client, "ImportCreateRegistrations") }
            let ninth = try await client.execute(
                uri: "/myhub/jobs", method: .post, headers: Self.atom, body: ByteBuffer(string: Self.job("ImportCreateRegistrations")))
            #expect(ninth.status == .conflict, "\(ninth.text)")
            let missing = try await client.execute(uri: "/myhub/jobs/nope", method: .get, headers: Self.manage)
            #expect(missing.status == .notFound)
        }
    }

    @Test("a job stopped after a chunk goes on from its position: nothing written twice, even what an uncommitted chunk left in the files")
    func resumes() async throws {
        let fixture = try await Fixture()
        let lines =
            (1...10).map {
                Self.line(
                    "AppleRegistrationDescription", "<RegistrationId>x\($0)</RegistrationId><Tags>Sports</Tags><DeviceToken>T\($0)</DeviceToken>")
            } + ["broken"]
        try lines.joined(separator: "\n").write(
            to: fixture.files.hubDirectory("myhub").appendingPathComponent("in.txt"), atomically: true, encoding: .utf8)
        try await fixture.app.test(.router) { client in
            let id = try await Self.start(client, "ImportUpsertRegistrations", importFileUri: "in.txt")
            // The first runner dies after its second chunk is committed.
            struct Died: Error {}
            let chunks = Counter()
            #expect(
                try await fixture.runner { _ in
                    if chunks.increment() == 2 { throw Died() }
                }.runOne())
            let stopped = try await Self.read(client, id)
            #expect(try Self.field("Status", stopped) == "Running")
            // Its back-off passes (as a dead ingress's lease runs out): another ingress takes
            // the job over and, here, lets it go at once.
            _ = try #require(try await fixture.store.claimJob(runner: "clock", hubs: ["myhub"], lease: 1, now: Date().addingTimeInterval(3_600)))
            try await fixture.store.releaseJob(hub: "myhub", id: id, runner: "clock")
            #expect(try Self.property("SucceededCount", stopped) == "6")
            // A chunk that was written to the files but never committed (the process died in
            // between) leaves lines past the committed length; they must go.
            let output = fixture.files.output(hub: "myhub", id: id)
            let handle = try FileHandle(forWritingTo: output)
            try handle.seekToEnd()
            try handle.write(contentsOf: Data("7,x7\n8,x8\n".utf8))
            try handle.close()
            #expect(try await fixture.runner().runOne())
            let done = try await Self.read(client, id)
            #expect(try Self.field("Status", done) == "Completed")
            #expect(try Self.property("SucceededCount", done) == "10" && Self.property("FailedCount", done) == "1")
            let written = try String(contentsOf: output, encoding: .utf8).split(separator: "\n").map(String.init)
            #expect(written == (1...10).map { "\($0),x\($0)" })
            #expect(try await Self.file(client, id, "failed") == ["11,BadRequest,body: not well-formed XML (line 1, column 1)"])
            for index in 1...10 { #expect(try await fixture.store.registration(hub: "myhub", id: "x\(index)")?.version == 1) }
        }
    }

    /// The store, but refusing for good any chunk that holds the registration `poison`, as
    /// PostgreSQL refuses a value too large for its index; with `attachFails`, failing to attach
    /// an input as a store that is down does, and with `attachAnswersLost`, failing that many
    /// attaches after they committed, as a connection lost before the commit's answer does.
    struct PoisonedStore: JobStore {
        let inner: SQLRegistrationStore
        var attachFails = false
        var attachAnswersLost = 0
        let attaches = Counter()

        func createJob(_ job: NotificationHubJob, inputPath: String?, inputSize: Int64, maximumUnfinished: Int) async throws -> Bool {
            try await inner.createJob(job, inputPath: inputPath, inputSize: inputSize, maximumUnfinished: maximumUnfinished)
        }
        func job(hub: String, id: String) async throws -> StoredJob? { try await inner.job(hub: hub, id: id) }
        func jobs(hub: String, limit: Int) async throws -> [StoredJob] { try await inner.jobs(hub: hub, limit: limit) }
        func attachJobInput(hub: String, id: String, path: String, size: Int64) async throws -> Bool {
            if attachFails { throw SQLError(message: "could not connect") }
            let attached = try await inner.attachJobInput(hub: hub, id: id, path: path, size: size)
            if attaches.increment() <= attachAnswersLost { throw SQLError(message: "connection lost") }
            return attached
        }
        func claimJob(runner: String, hubs: [String], lease: TimeInterval, now: Date) async throws -> StoredJob? {
            try await inner.claimJob(runner: runner, hubs: hubs, lease: lease, now: now)
        }
        func checkpointJob(hub: String, id: String, runner: String, position: JobPosition, progress: Double, lease: TimeInterval) async throws {
            try await inner.checkpointJob(hub: hub, id: id, runner: runner, position: position, progress: progress, lease: lease)
        }
        func finishJob(hub: String, id: String, runner: String, status: NotificationHubJob.Status, failure: String?) async throws {
            try await inner.finishJob(hub: hub, id: id, runner: runner, status: status, failure: failure)
        }
        func releaseJob(hub: String, id: String, runner: String) async throws { try await inner.releaseJob(hub: hub, id: id, runner: runner) }
        func deferJob(hub: String, id: String, runner: String, failure: String, maximumAttempts: Int) async throws -> Bool {
            try await inner.deferJob(hub: hub, id: id, runner: runner, failure: failure, maximumAttempts: maximumAttempts)
        }
        func removeFinishedJobs(before date: Date) async throws -> [(hub: String, id: String)] { try await inner.removeFinishedJobs(before: date) }
        func expireWaitingJobs(before date: Date) async throws -> Int { try await inner.expireWaitingJobs(before: date) }
        func countExportedRegistrations(hub: String) async throws -> Int64 { try await inner.countExportedRegistrations(hub: hub) }
        func exportPage(hub: String, after cursor: RegistrationCursor?, limit: Int) async throws -> RegistrationPage {
            try await inner.exportPage(hub: hub, after: cursor, limit: limit)
        }
        func applyImportChunk(
            hub: String, id: String, runner: String, type: NotificationHubJob.JobType, lines: [JobLine], next position: JobPosition,
            progress: Double, lease: TimeInterval, write: @escaping @Sendable ([JobLineResult]) throws -> (outputBytes: Int64, failedBytes: Int64)
        ) async throws -> JobPosition {
            if lines.contains(where: { (try? $0.registration.get().registrationId) == "poison" }) {
                throw SQLError(message: "index row size 9000 exceeds btree version 4 maximum 2704 in: INSERT INTO registrations", isPermanent: true)
            }
            // `late` fails for good after its chunk's lines went to the files: the commit fails.
            if lines.contains(where: { (try? $0.registration.get().registrationId) == "late" }) {
                return try await inner.applyImportChunk(
                    hub: hub, id: id, runner: runner, type: type, lines: lines, next: position, progress: progress, lease: lease
                ) { results in
                    _ = try write(results)
                    throw SQLError(message: "value too long in: COMMIT", isPermanent: true)
                }
            }
            return try await inner.applyImportChunk(
                hub: hub, id: id, runner: runner, type: type, lines: lines, next: position, progress: progress, lease: lease, write: write)
        }
    }

    @Test("a line the store refuses for good fails alone, with the store's reason and not its SQL; the job goes on")
    func storeRefusesALine() async throws {
        let fixture = try await Fixture()
        let lines = ["a", "b", "poison", "c", "d", "e", "late", "f"].map {
            Self.line("AppleRegistrationDescription", "<RegistrationId>\($0)</RegistrationId><DeviceToken>T\($0)</DeviceToken>")
        }
        try lines.joined(separator: "\n").write(
            to: fixture.files.hubDirectory("myhub").appendingPathComponent("in.txt"), atomically: true, encoding: .utf8)
        try await fixture.app.test(.router) { client in
            let id = try await Self.start(client, "ImportUpsertRegistrations", importFileUri: "in.txt")
            var settings = JobRunner.Settings()
            settings.chunkLines = 5
            let runner = JobRunner(
                store: PoisonedStore(inner: fixture.store), files: fixture.files, hubs: fixture.hubs, signal: JobSignal(), settings: settings,
                logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
            #expect(try await runner.runOne())
            let done = try await Self.read(client, id)
            #expect(try Self.field("Status", done) == "Completed")
            #expect(try Self.property("SucceededCount", done) == "6" && Self.property("FailedCount", done) == "2")
            // What the failed commit had written to the files went before its lines were tried again.
            #expect(try await Self.file(client, id, "output") == ["1,a", "2,b", "4,c", "5,d", "6,e", "8,f"])
            #expect(
                try await Self.file(client, id, "failed") == [
                    "3,BadRequest,the store refused it: index row size 9000 exceeds btree version 4 maximum 2704",
                    "7,BadRequest,the store refused it: value too long",
                ])
            let written = try String(contentsOf: fixture.files.output(hub: "myhub", id: id), encoding: .utf8)
            #expect(written == "1,a\n2,b\n4,c\n5,d\n6,e\n8,f\n")
            #expect(try await fixture.store.registration(hub: "myhub", id: "f") != nil)
        }
    }

    @Test("jobs take turns: one let go after its turn waits behind another hub's job, then goes on where it was")
    func turns() async throws {
        let fixture = try await Fixture()
        let lines = (1...6).map {
            Self.line("AppleRegistrationDescription", "<RegistrationId>y\($0)</RegistrationId><DeviceToken>T\($0)</DeviceToken>")
        }
        try lines.joined(separator: "\n").write(
            to: fixture.files.hubDirectory("myhub").appendingPathComponent("in.txt"), atomically: true, encoding: .utf8)
        _ = try await fixture.store.upsertRegistration(
            Registration(registrationId: "o1", hub: "otherhub", format: .apple, handle: "T", tags: [], updatedAt: Date()), ifMatch: nil)
        try await fixture.app.test(.router) { client in
            let mine = try await Self.start(client, "ImportUpsertRegistrations", importFileUri: "in.txt")
            try await Task.sleep(for: .milliseconds(5))
            let now = Date()
            let theirs = NotificationHubJob(jobId: RandomID.make(), hub: "otherhub", type: .exportRegistrations, createdAt: now, updatedAt: now)
            #expect(try await fixture.store.createJob(theirs, inputPath: nil, inputSize: 0, maximumUnfinished: 8))
            var settings = JobRunner.Settings()
            settings.chunkLines = 2
            settings.turn = .zero
            let runner = JobRunner(
                store: fixture.store, files: fixture.files, hubs: fixture.hubs, signal: JobSignal(), settings: settings,
                logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
            #expect(try await runner.runOne())
            let first = try await Self.read(client, mine)
            #expect(try Self.field("Status", first) == "Running" && Self.property("SucceededCount", first) == "2")
            // The other hub's job, untouched since it was made, comes next.
            #expect(try await runner.runOne())
            let other = try await fixture.store.job(hub: "otherhub", id: theirs.jobId)
            #expect(other?.job.status == .completed, "\(String(describing: other))")
            // A turn a chunk of two lines: the four left take two more turns, at most a few.
            for _ in 0..<4 where try await fixture.store.job(hub: "myhub", id: mine)?.job.status == .running {
                #expect(try await runner.runOne())
            }
            #expect(try await fixture.store.job(hub: "myhub", id: mine)?.job.status == .completed)
            #expect(try await Self.file(client, mine, "output") == (1...6).map { "\($0),y\($0)" })
        }
    }

    final class Counter: @unchecked Sendable {
        private var value = 0
        private let lock = NSLock()
        func increment() -> Int {
            lock.withLock {
                value += 1
                return value
            }
        }
    }

    @Test("an upload the store could not say it attached stays until the next upload removes it: retries leave one behind, not a gigabyte each")
    func unattachedInputDeleted() async throws {
        let fixture = try await Fixture(wrap: { PoisonedStore(inner: $0, attachFails: true) })
        try await fixture.app.test(.router) { client in
            let id = try await Self.start(client, "ImportCreateRegistrations")
            let directory = fixture.files.jobDirectory(hub: "myhub", id: id)
            var seen: Set<String> = []
            for _ in 0..<3 {
                let uploaded = try await client.execute(
                    uri: "/myhub/jobs/\(id)/input", method: .put, headers: Self.manage, body: ByteBuffer(string: "line\n"))
                #expect(uploaded.status == .serviceUnavailable, "\(uploaded.text)")
                let left = try FileManager.default.contentsOfDirectory(atPath: directory.path)
                #expect(left.count == 1 && !seen.contains(left[0]), "the last upload's only: \(left)")
                seen.formUnion(left)
                // An hour unwritten to: past the age at which an input is an upload that ended.
                for name in left {
                    try FileManager.default.setAttributes(
                        [.modificationDate: Date().addingTimeInterval(-3600)],
                        ofItemAtPath: directory.appendingPathComponent(name).path)
                }
            }
            #expect(try Self.field("Status", try await Self.read(client, id)) == "Started", "still waiting for its input")
        }
    }

    @Test("an upload whose attach committed though the store's answer was lost is the job's input: kept, answered 200, and imported")
    func attachedInputKept() async throws {
        let fixture = try await Fixture(wrap: { PoisonedStore(inner: $0, attachAnswersLost: 1) })
        try await fixture.app.test(.router) { client in
            let id = try await Self.start(client, "ImportCreateRegistrations")
            let line = Self.line("AppleRegistrationDescription", "<RegistrationId>kept</RegistrationId><DeviceToken>AA01</DeviceToken>")
            let uploaded = try await client.execute(
                uri: "/myhub/jobs/\(id)/input", method: .put, headers: Self.manage, body: ByteBuffer(string: line))
            #expect(uploaded.status == .ok, "\(uploaded.text)")
            let input = try #require(try await fixture.store.job(hub: "myhub", id: id)?.inputPath)
            #expect(FileManager.default.fileExists(atPath: input), "the attached input is still there")
            #expect(try await fixture.runner().runOne())
            #expect(try Self.field("Status", try await Self.read(client, id)) == "Completed")
            #expect(try await fixture.store.registration(hub: "myhub", id: "kept") != nil)
        }
    }
}
