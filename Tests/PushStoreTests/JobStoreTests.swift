import Foundation
import PushModel
import PushStore
import Testing

/// Import and export jobs in the store, on SQLite and PostgreSQL: a chunk's registration writes
/// and the job's position commit together, and only for the runner holding the lease.
@Suite("Job store")
struct JobStoreTests {
    static func registration(_ id: String, hub: String, tags: [String], handle: String = "token") -> Registration {
        Registration(registrationId: id, hub: hub, format: .apple, handle: handle, tags: tags, updatedAt: Date())
    }

    static func line(_ number: Int64, _ registration: Registration) -> JobLine {
        JobLine(line: number, registration: .success(registration))
    }

    /// A job of `type` for `fixture`'s hub, claimed by a runner of its own.
    static func claimed(_ type: NotificationHubJob.JobType, fixture: StoreFixture) async throws -> (SQLRegistrationStore, StoredJob, String) {
        let store = try #require(fixture.store as? SQLRegistrationStore)
        let now = Date()
        let job = NotificationHubJob(jobId: RandomID.make(), hub: fixture.hub, type: type, createdAt: now, updatedAt: now)
        #expect(try await store.createJob(job, inputPath: "/dev/null", inputSize: 0, maximumUnfinished: 8))
        let runner = RandomID.make()
        let stored = try #require(try await store.claimJob(runner: runner, hubs: [fixture.hub], lease: 60, now: Date()))
        #expect(stored.job.jobId == job.jobId)
        #expect(stored.job.status == .running)
        return (store, stored, runner)
    }

    /// Applies `lines` and returns each line's outcome as `id` or `Kind: reason`.
    static func apply(
        _ lines: [JobLine], type: NotificationHubJob.JobType, store: SQLRegistrationStore, job: StoredJob, runner: String,
        position: JobPosition = JobPosition()
    ) async throws -> (outcomes: [Int64: String], position: JobPosition) {
        let seen = ResultBox()
        let next = try await store.applyImportChunk(
            hub: job.job.hub, id: job.job.jobId, runner: runner, type: type, lines: lines, next: position, progress: 50, lease: 60
        ) { results in
            seen.set(results)
            return (Int64(results.count), 0)
        }
        var outcomes: [Int64: String] = [:]
        for result in seen.get() {
            switch result.outcome {
            case .success(let id): outcomes[result.line] = id
            case .failure(let failure): outcomes[result.line] = "\(failure.kind): \(failure.reason)"
            }
        }
        return (outcomes, next)
    }

    final class ResultBox: @unchecked Sendable {
        private var results: [JobLineResult] = []
        private let lock = NSLock()
        func set(_ results: [JobLineResult]) { lock.withLock { self.results = results } }
        func get() -> [JobLineResult] { lock.withLock { results } }
    }

    @Test("create, upsert, update and delete chunks write what each line asks, tag rows kept, failures per line", arguments: StoreKind.available)
    func chunkSemantics(kind: StoreKind) async throws {
        let fixture = try await StoreFixture.make(kind)
        let hub = fixture.hub
        let (store, job, runner) = try await Self.claimed(.importCreateRegistrations, fixture: fixture)
        // Create: ids given are taken, a missing one is issued, an existing one is a conflict.
        _ = try await store.upsertRegistration(Self.registration("existing", hub: hub, tags: ["Old"]), ifMatch: nil)
        let created = try await Self.apply(
            [
                Self.line(1, Self.registration("a", hub: hub, tags: ["Sports", "News"])),
                Self.line(2, Self.registration("", hub: hub, tags: ["Sports"])),
                Self.line(3, Self.registration("existing", hub: hub, tags: ["Sports"])),
                JobLine(line: 4, registration: .failure(.init("BadRequest", "not XML"))),
            ], type: .importCreateRegistrations, store: store, job: job, runner: runner)
        #expect(created.outcomes[1] == "a")
        let issued = try #require(created.outcomes[2])
        #expect(issued.hasSuffix("-1") && issued != "a")
        #expect(created.outcomes[3] == "Conflict: registration existing exists")
        #expect(created.outcomes[4] == "BadRequest: not XML")
        #expect(created.position.succeeded == 2 && created.position.failed == 2)
        let sports = try await store.registrations(hub: hub, matching: .tagExpression(.tag("Sports")), after: nil, limit: 10)
        #expect(Set(sports.registrations.map(\.registrationId)) == ["a", issued])
        #expect(try await store.registration(hub: hub, id: "existing")?.tags == ["Old"])

        // Upsert: an existing id is replaced where it is, its tag rows changed; the same id
        // twice in a chunk ends as the last line, two versions on.
        let before = try #require(
            try await store.registrations(hub: hub, matching: .all, after: nil, limit: 10).registrations.first {
                $0.registrationId == "a"
            })
        let upserted = try await Self.apply(
            [
                Self.line(1, Self.registration("a", hub: hub, tags: ["News", "Weather"], handle: "token-2")),
                Self.line(2, Self.registration("b", hub: hub, tags: ["Sports"])),
                Self.line(3, Self.registration("b", hub: hub, tags: ["Politics"])),
                Self.line(4, Self.registration("installation.x", hub: hub, tags: [])),
            ], type: .importUpsertRegistrations, store: store, job: job, runner: runner, position: created.position)
        #expect(upserted.outcomes[1] == "a" && upserted.outcomes[2] == "b" && upserted.outcomes[3] == "b")
        #expect(upserted.outcomes[4] == "Forbidden: ids starting with installation. belong to installations")
        let a = try #require(try await store.registration(hub: hub, id: "a"))
        #expect(a.handle == "token-2" && a.tags == ["News", "Weather"] && a.version == before.version + 1)
        let b = try #require(try await store.registration(hub: hub, id: "b"))
        #expect(b.tags == ["Politics"] && b.version == 2)
        let sportsAfter = try await store.registrations(hub: hub, matching: .tagExpression(.tag("Sports")), after: nil, limit: 10)
        #expect(sportsAfter.registrations.map(\.registrationId) == [issued], "a left Sports, b's Sports line was replaced")
        let weather = try await store.registrations(hub: hub, matching: .tagExpression(.tag("Weather")), after: nil, limit: 10)
        #expect(weather.registrations.map(\.registrationId) == ["a"])
        // `a` kept its place: a listing meets it where it was.
        let order = try await store.registrations(hub: hub, matching: .all, after: nil, limit: 10).registrations.map(\.registrationId)
        #expect(order.first == "existing" && order.dropFirst().first == "a", "\(order)")
        #expect(upserted.position.succeeded == 5 && upserted.position.failed == 3)

        // Update and delete name existing registrations; missing ones fail alone.
        let updated = try await Self.apply(
            [Self.line(1, Self.registration("missing", hub: hub, tags: [])), Self.line(2, Self.registration("b", hub: hub, tags: ["Sports"]))],
            type: .importUpdateRegistrations, store: store, job: job, runner: runner)
        #expect(updated.outcomes[1] == "NotFound: registration missing not found")
        #expect(updated.outcomes[2] == "b")
        #expect(try await store.registration(hub: hub, id: "b")?.tags == ["Sports"])
        let deleted = try await Self.apply(
            [Self.line(1, Self.registration("b", hub: hub, tags: [])), Self.line(2, Self.registration("b", hub: hub, tags: []))],
            type: .importDeleteRegistrations, store: store, job: job, runner: runner)
        #expect(deleted.outcomes[1] == "b")
        #expect(deleted.outcomes[2] == "NotFound: registration b not found", "deleted by the line before")
        #expect(try await store.registration(hub: hub, id: "b") == nil)
        let sportsLast = try await store.registrations(hub: hub, matching: .tagExpression(.tag("Sports")), after: nil, limit: 10)
        #expect(sportsLast.registrations.map(\.registrationId) == [issued])
    }

    @Test("a runner whose lease ran out and was taken over writes nothing; the new one goes on from the position", arguments: StoreKind.available)
    func leaseTakeover(kind: StoreKind) async throws {
        let fixture = try await StoreFixture.make(kind)
        let (store, job, first) = try await Self.claimed(.importUpsertRegistrations, fixture: fixture)
        var position = JobPosition()
        position.inputOffset = 100
        position.line = 3
        let applied = try await Self.apply(
            [Self.line(1, Self.registration("one", hub: fixture.hub, tags: []))], type: .importUpsertRegistrations, store: store, job: job,
            runner: first, position: position)
        #expect(applied.position.inputOffset == 100 && applied.position.outputBytes == 1)
        // Nobody takes a job whose lease holds.
        #expect(try await store.claimJob(runner: "second", hubs: [fixture.hub], lease: 60, now: Date()) == nil)
        // Past the lease another runner takes it, with the position the first committed.
        let taken = try #require(try await store.claimJob(runner: "second", hubs: [fixture.hub], lease: 60, now: Date().addingTimeInterval(120)))
        #expect(taken.position == applied.position)
        await #expect(throws: JobLeaseLost.self) {
            _ = try await Self.apply(
                [Self.line(2, Self.registration("two", hub: fixture.hub, tags: []))], type: .importUpsertRegistrations, store: store, job: job,
                runner: first, position: applied.position)
        }
        #expect(try await store.registration(hub: fixture.hub, id: "two") == nil, "the refused chunk was rolled back")
        await #expect(throws: JobLeaseLost.self) {
            try await store.finishJob(hub: fixture.hub, id: job.job.jobId, runner: first, status: .completed, failure: nil)
        }
        try await store.finishJob(hub: fixture.hub, id: job.job.jobId, runner: "second", status: .completed, failure: nil)
        let done = try #require(try await store.job(hub: fixture.hub, id: job.job.jobId))
        #expect(done.job.status == .completed && done.job.progress == 100 && done.job.succeeded == 1)
    }

    @Test("a failure that may pass lets the job go for a back-off; tries in a row without progress end it Failed", arguments: StoreKind.available)
    func backOff(kind: StoreKind) async throws {
        let fixture = try await StoreFixture.make(kind)
        let (store, job, runner) = try await Self.claimed(.importUpsertRegistrations, fixture: fixture)
        #expect(try await store.deferJob(hub: fixture.hub, id: job.job.jobId, runner: runner, failure: "busy", maximumAttempts: 3) == false)
        #expect(try await store.claimJob(runner: "r2", hubs: [fixture.hub], lease: 60, now: Date()) == nil, "5 s of back-off first")
        let again = try #require(try await store.claimJob(runner: "r2", hubs: [fixture.hub], lease: 60, now: Date().addingTimeInterval(6)))
        #expect(again.job.jobId == job.job.jobId)
        // Progress clears the tries.
        _ = try await Self.apply(
            [Self.line(1, Self.registration("p", hub: fixture.hub, tags: []))], type: .importUpsertRegistrations, store: store, job: again,
            runner: "r2")
        #expect(try await store.deferJob(hub: fixture.hub, id: job.job.jobId, runner: "r2", failure: "busy", maximumAttempts: 3) == false)
        let third = try #require(try await store.claimJob(runner: "r3", hubs: [fixture.hub], lease: 60, now: Date().addingTimeInterval(6)))
        // A checkpoint that moves nothing (an export's count, a renewed lease) keeps the tries.
        try await store.checkpointJob(hub: fixture.hub, id: job.job.jobId, runner: "r3", position: third.position, progress: 0, lease: 60)
        #expect(try await store.deferJob(hub: fixture.hub, id: job.job.jobId, runner: "r3", failure: "busy", maximumAttempts: 3) == false)
        _ = try #require(try await store.claimJob(runner: "r4", hubs: [fixture.hub], lease: 60, now: Date().addingTimeInterval(11)))
        #expect(try await store.deferJob(hub: fixture.hub, id: job.job.jobId, runner: "r4", failure: "busy", maximumAttempts: 3))
        let failed = try #require(try await store.job(hub: fixture.hub, id: job.job.jobId))
        #expect(failed.job.status == .failed && failed.job.failure == "3 tries in a row failed; the last: busy")
        #expect(try await store.claimJob(runner: "r5", hubs: [fixture.hub], lease: 60, now: Date().addingTimeInterval(3_600)) == nil)
        // A finished job is never taken again, whatever its lease said.
        await #expect(throws: JobLeaseLost.self) {
            try await store.finishJob(hub: fixture.hub, id: job.job.jobId, runner: "r4", status: .completed, failure: nil)
        }
    }

    @Test("a hub has at most so many unfinished jobs; an upload attaches once", arguments: StoreKind.available)
    func limitsAndInput(kind: StoreKind) async throws {
        let fixture = try await StoreFixture.make(kind)
        let store = try #require(fixture.store as? SQLRegistrationStore)
        let now = Date()
        var ids: [String] = []
        for _ in 0..<3 {
            let job = NotificationHubJob(jobId: RandomID.make(), hub: fixture.hub, type: .importUpsertRegistrations, createdAt: now, updatedAt: now)
            #expect(try await store.createJob(job, inputPath: nil, inputSize: 0, maximumUnfinished: 3))
            ids.append(job.jobId)
        }
        let fourth = NotificationHubJob(jobId: RandomID.make(), hub: fixture.hub, type: .exportRegistrations, createdAt: now, updatedAt: now)
        #expect(try await store.createJob(fourth, inputPath: nil, inputSize: 0, maximumUnfinished: 3) == false)
        // Waiting for input, none can run.
        #expect(try await store.claimJob(runner: "r", hubs: [fixture.hub], lease: 60, now: Date()) == nil)
        #expect(try await store.attachJobInput(hub: fixture.hub, id: ids[0], path: "/tmp/in", size: 10))
        #expect(try await store.attachJobInput(hub: fixture.hub, id: ids[0], path: "/tmp/other", size: 10) == false)
        let claimed = try #require(try await store.claimJob(runner: "r", hubs: [fixture.hub], lease: 60, now: Date()))
        #expect(claimed.job.jobId == ids[0] && claimed.inputPath == "/tmp/in" && claimed.inputSize == 10)
        #expect(try await store.attachJobInput(hub: fixture.hub, id: ids[0], path: "/tmp/late", size: 1) == false, "it runs already")
        #expect(try await store.jobs(hub: fixture.hub, limit: 10).count == 3)
        // Imports that never got an input end Failed after a while, and stop counting.
        _ = try await store.expireWaitingJobs(before: Date().addingTimeInterval(-60))
        #expect(try await store.job(hub: fixture.hub, id: ids[1])?.job.status == .started, "made a moment ago")
        #expect(try await store.expireWaitingJobs(before: Date().addingTimeInterval(60)) >= 2)
        let expired = try #require(try await store.job(hub: fixture.hub, id: ids[1]))
        #expect(expired.job.status == .failed && expired.job.failure == "no input came within a day")
        #expect(try await store.createJob(fourth, inputPath: nil, inputSize: 0, maximumUnfinished: 3))
    }
}
