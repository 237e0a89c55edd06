import Foundation
import InMemoryTracing
import PushDispatcher
import PushKafka
import PushModel
import PushStore
import PushTestSupport
import Testing
import Tracing

@Suite("Dispatcher", .timeLimit(.minutes(2)))
struct DispatcherTests {
    /// 40 registrations: platform by index, tags from bits, every fifth a template registration.
    static func seed(_ store: any RegistrationStore) async throws -> [Registration] {
        var registrations: [Registration] = []
        for index in 0..<40 {
            var tags: [String] = []
            if index % 2 == 0 { tags.append("Sports") }
            if index % 3 == 0 { tags.append("Politics") }
            let format: NativeFormat = [.apple, .fcmv1, .windows, .browser][index % 4]
            let registration = Registration(
                registrationId: "r\(index)", hub: "myhub", format: format, handle: "handle-\(index)",
                webPush: format == .browser ? WebPushKeys(p256dh: "p\(index)", auth: "a\(index)") : nil, tags: tags,
                template: index % 5 == 0
                    ? Template(name: "t", body: #"{"alert":"$(messageParam)"}"#, headers: ["X-WNS-Type": "wns/toast"], expiry: "0") : nil,
                updatedAt: Date())
            registrations.append(try await store.upsertRegistration(registration, ifMatch: nil))
        }
        return registrations
    }

    @Test("a native send to a tag expression reaches exactly the native registrations of its platform that match")
    func tagExpressionTargeting() async throws {
        let fixture = try await DispatcherFixture()
        let registrations = try await Self.seed(fixture.store)
        let request = DispatcherFixture.request(.tags("Sports && !Politics"))
        try await fixture.send(request)
        let summary = try #require(await fixture.summary(request.notificationId))
        let expected = registrations.filter {
            $0.format == .apple && $0.template == nil && TagExpression.and(.tag("Sports"), .not(.tag("Politics"))).matches(Set($0.tags))
        }
        #expect(summary.dispatched == Dictionary(uniqueKeysWithValues: Platform.allCases.map { ($0, $0 == .apns ? expected.count : 0) }))
        let batches = await fixture.batches(request.notificationId)
        #expect(batches.allSatisfy { $0.platform == .apns && $0.kind == .native && $0.format == .apple && $0.body == request.body })
        #expect(Set(batches.flatMap(\.targets).compactMap(\.registrationId)) == Set(expected.map(\.registrationId)))
    }

    @Test("a SendRequest produced twice is dispatched once; one the ingress published again on purpose is dispatched again")
    func producedTwice() async throws {
        let fixture = try await DispatcherFixture(settings: { $0.requestsInFlight = 1 })
        _ = try await Self.seed(fixture.store)
        let request = DispatcherFixture.request(.tags("Sports"))
        try await fixture.send(request)
        #expect(await fixture.summary(request.notificationId) != nil)
        // A producer that retried: the same request, a second record.
        try await fixture.send(request)
        // Recovery's republish, after it: taken, so the send can finish.
        try await fixture.send(request, headers: [KafkaHeader(key: Dispatcher.republishedHeader, value: "recovery")])
        let deadline = ContinuousClock.now + .seconds(30)
        var summaries: [ResultBatch] = []
        while ContinuousClock.now < deadline {
            summaries = await fixture.collected.results.filter { $0.notificationId == request.notificationId && $0.dispatched != nil }
            if summaries.count >= 2 { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        // One at a time and in order: the duplicate came between the two and made nothing (a
        // third summary would follow the second at once).
        try await Task.sleep(for: .milliseconds(1500))
        summaries = await fixture.collected.results.filter { $0.notificationId == request.notificationId && $0.dispatched != nil }
        #expect(summaries.count == 2)
        let targets = summaries[0].dispatched?.values.reduce(0, +) ?? 0
        #expect(targets > 0)
        #expect(await fixture.batches(request.notificationId).flatMap(\.targets).count == 2 * targets)
    }

    @Test("the trace context a SendRequest carries is its dispatch span's parent; each batch carries a span of its own, the summary the dispatch's")
    func traced() async throws {
        let tracer = InMemoryTracer()
        try await withTracer(tracer) {
            let fixture = try await DispatcherFixture(settings: { $0.batchSize = 2 })
            _ = try await Self.seed(fixture.store)
            let request = DispatcherFixture.request(.tags("Sports"))
            try await fixture.send(
                request,
                headers: [
                    KafkaHeader(key: InMemoryTracer.traceIDKey, value: "trace-1"), KafkaHeader(key: InMemoryTracer.spanIDKey, value: "accept-1"),
                ])
            let summary = try #require(await fixture.summary(request.notificationId))
            let targets = summary.dispatched?.values.reduce(0, +) ?? 0
            #expect(targets >= 2)
            let deadline = ContinuousClock.now + .seconds(10)
            while tracer.finishedSpans.filter({ $0.operationName == "pushhub.dispatch" }).isEmpty, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            let spans = tracer.finishedSpans
            let dispatch = try #require(spans.first { $0.operationName == "pushhub.dispatch" })
            #expect(dispatch.traceID == "trace-1" && dispatch.parentSpanID == "accept-1", "under the context the record carried")
            let batches = spans.filter { $0.operationName == "pushhub.dispatch.batch" }
            #expect(batches.count == (targets + 1) / 2, "one span a batch of two")
            #expect(batches.allSatisfy { $0.traceID == "trace-1" && $0.parentSpanID == dispatch.spanID })
            let records = await fixture.collected.headers[request.notificationId] ?? []
            let carried = records.filter { $0.topic != fixture.topics.results }.map { headers in
                headers.headers.first { $0.key == InMemoryTracer.spanIDKey }.flatMap { $0.value.map { String(decoding: $0, as: UTF8.self) } }
            }
            #expect(Set(carried.compactMap { $0 }) == Set(batches.map(\.spanID)), "each batch record carries its own span")
            let summaryRecord = try #require(records.first { $0.topic == fixture.topics.results })
            #expect(
                summaryRecord.headers.contains(KafkaHeader(key: InMemoryTracer.spanIDKey, value: dispatch.spanID)), "the summary carries the dispatch"
            )
        }
    }

    @Test("a template send reaches every template registration, on every platform, with its template")
    func templateRouting() async throws {
        let fixture = try await DispatcherFixture()
        let registrations = try await Self.seed(fixture.store)
        let request = DispatcherFixture.request(.broadcast, format: .template, body: #"{"messageParam":"Breaking"}"#)
        try await fixture.send(request)
        let summary = try #require(await fixture.summary(request.notificationId))
        let templates = registrations.filter { $0.template != nil }
        #expect(summary.dispatched?.values.reduce(0, +) == templates.count)
        let batches = await fixture.batches(request.notificationId)
        #expect(batches.allSatisfy { $0.kind == .template && $0.format == nil })
        let targets = batches.flatMap(\.targets)
        #expect(Set(targets.compactMap(\.registrationId)) == Set(templates.map(\.registrationId)))
        #expect(targets.allSatisfy { $0.template?.body == #"{"alert":"$(messageParam)"}"# && $0.template?.expiry == "0" })
        let webPush = batches.filter { $0.platform == .webpush }.flatMap(\.targets)
        #expect(webPush.allSatisfy { $0.webPush != nil }, "Web Push targets carry their keys")
    }

    @Test("a broadcast to 1,200 registrations comes in batches of at most 500, on the platform's topic")
    func broadcastBatches() async throws {
        let fixture = try await DispatcherFixture()
        try await fixture.store.importRegistrations(
            (0..<1_200).map {
                Registration(registrationId: "b\($0)", hub: "myhub", format: .gcm, handle: "token-\($0)", tags: [], updatedAt: Date())
            })
        let request = DispatcherFixture.request(.broadcast, format: .gcm, body: #"{"data":{"m":"hi"}}"#)
        try await fixture.send(request)
        let summary = try #require(await fixture.summary(request.notificationId))
        #expect(summary.dispatched?[.fcm] == 1_200)
        let batches = await fixture.batches(request.notificationId)
        #expect(batches.map(\.targets.count).sorted() == [200, 500, 500])
        #expect(Set(batches.flatMap(\.targets).map(\.handle)).count == 1_200)
        #expect(await fixture.collected.batchTopics.allSatisfy { $0 == fixture.topics.deliveries(.fcm) })
    }

    @Test(
        "a broadcast larger than the embedded cluster keeps in a partition waits for the workers, and none of its batches is dropped")
    func backlogBound() async throws {
        let fixture = try await DispatcherFixture(partitions: 1) { $0.workerGroups[.fcm] = "late-workers" }
        // 12,000 registrations with 600-byte handles: about 7.5 MB of batches on one partition,
        // past the 5 MiB a partition of librdkafka's embedded cluster keeps.
        let handles = Set((0..<12_000).map { "\($0)-" + String(repeating: "h", count: 600) })
        try await fixture.store.importRegistrations(
            handles.sorted().enumerated().map { index, handle in
                Registration(registrationId: "big\(index)", hub: "myhub", format: .fcmv1, handle: handle, tags: [], updatedAt: Date())
            })
        let request = DispatcherFixture.request(.broadcast, format: .fcmv1, body: #"{"message":{"data":{"m":"hi"}}}"#)
        try await fixture.send(request)
        // No worker yet: the dispatcher stops near its bound (2 MiB on the partition). It gets
        // there within seconds, later on a loaded machine; then it stays there.
        let started = ContinuousClock.now
        while await fixture.collected.deliveryBytes <= 512 << 10, ContinuousClock.now - started < .seconds(30) {
            try await Task.sleep(for: .milliseconds(100))
        }
        try await Task.sleep(for: .seconds(3))
        let early = await fixture.collected.deliveryBytes
        #expect(early > 512 << 10, "the dispatcher produced up to its bound: \(early) bytes")
        #expect(early < 4 << 20, "the dispatcher waited for the workers: \(early) bytes produced")
        #expect(await fixture.summary(request.notificationId, timeout: .zero) == nil)

        // The workers arrive late, from the partition's start, and mark each batch done.
        let worker = try DispatcherFixture.consumer(fixture.cluster, group: "late-workers", topics: [fixture.topics.deliveries(.fcm)])
        // Records stop arriving once the partition is read; closing the consumer ends the wait.
        let stop = Task {
            try await Task.sleep(for: .seconds(60))
            await worker.close()
        }
        defer { stop.cancel() }
        var reached: Set<String> = []
        for await record in worker.records {
            if let batch = try? WireCoding.decode(DeliveryBatch.self, from: record.value), batch.notificationId == request.notificationId {
                reached.formUnion(batch.targets.map(\.handle))
            }
            worker.markDone(record)
            if reached.count == handles.count { break }
        }
        #expect(reached.count == handles.count, "every target reached the late workers: \(reached.count) of \(handles.count)")
        #expect(reached.isSubset(of: handles))
        let summary = try #require(await fixture.summary(request.notificationId))
        #expect(summary.dispatched?[.fcm] == handles.count)
        #expect(await fixture.collected.deliveryBytes > 5 << 20, "more went through the partition than it keeps")
    }

    @Test("direct handles and installation ids")
    func directAndInstallations() async throws {
        let fixture = try await DispatcherFixture()
        _ = try await fixture.store.upsertInstallation(
            Installation(installationId: "phone", platform: .apns, pushChannel: "inst-token", templates: ["t": .init(body: "{}")]), hub: "myhub")
        let direct = DispatcherFixture.request(.handles([DirectHandle(platform: .apns, handle: "direct-token")]))
        let installations = DispatcherFixture.request(.installationIds(["phone", "missing"]))
        try await fixture.send(direct)
        try await fixture.send(installations)
        #expect(await fixture.summary(direct.notificationId)?.dispatched?[.apns] == 1)
        #expect(await fixture.batches(direct.notificationId).first?.targets == [DeliveryBatch.Target(registrationId: nil, handle: "direct-token")])
        #expect(await fixture.summary(installations.notificationId)?.dispatched?[.apns] == 1, "the native registration only, not the template")
        #expect(await fixture.batches(installations.notificationId).first?.targets.first?.handle == "inst-token")
    }

    @Test("no target: a summary of zeros")
    func noTarget() async throws {
        let fixture = try await DispatcherFixture()
        let request = DispatcherFixture.request(.tags("nobody"))
        try await fixture.send(request)
        #expect(await fixture.summary(request.notificationId)?.dispatched == Dictionary(uniqueKeysWithValues: Platform.allCases.map { ($0, 0) }))
        #expect(await fixture.batches(request.notificationId).isEmpty)
    }

    @Test(
        "records it cannot use go to the dead-letter topic with the reason, and it goes on",
        arguments: [
            ("not json", "not a JSON object"),
            (#"{"schema":"pushhub.send-request.v9"}"#, "unknown schema"),
            (
                #"{"schema":"pushhub.send-request.v1","notificationId":"5f0c8f7e-3b7a-4a53-9d1e-2b8c4f6a9e10","hub":"otherhub","audience":{"broadcast":true},"format":"apple","body":"{}","enqueuedAt":"2026-11-21T08:00:00Z"}"#,
                "no hub named otherhub"
            ),
            (
                #"{"schema":"pushhub.send-request.v1","notificationId":"5f0c8f7e-3b7a-4a53-9d1e-2b8c4f6a9e10","hub":"myhub","audience":{"tags":"a && (b"},"format":"apple","body":"{}","enqueuedAt":"2026-11-21T08:00:00Z"}"#,
                "audience.tags"
            ),
        ])
    func deadLetters(_ text: String, _ reason: String) async throws {
        let fixture = try await DispatcherFixture()
        let key = UUID().uuidString.lowercased()
        try await fixture.sendRaw(key: key, text)
        let good = DispatcherFixture.request(.broadcast)
        try await fixture.send(good)
        #expect(await fixture.summary(good.notificationId) != nil, "the dispatcher went on")
        let rejected = try #require(await fixture.summary(key))
        #expect(rejected.results?.first?.outcome == .rejected)
        #expect(rejected.results?.first?.pnsReason?.contains(reason) == true, "\(String(describing: rejected.results))")
        let dead = try #require(await fixture.deadLetter(key))
        #expect(dead.value == Data(text.utf8), "the original bytes")
        #expect(dead.header("pushhub-error").map { String(decoding: $0, as: UTF8.self) }?.contains(reason) == true)
        #expect(dead.header("pushhub-source-topic") == Data(fixture.topics.requests.utf8))
    }

    @Test("a SendRequest produced straight into Kafka meets the hub API's limits: a body past its platform's, headers that are not HTTP's")
    func producedRequestsMeetTheLimits() async throws {
        let fixture = try await DispatcherFixture()
        let large = DispatcherFixture.request(.broadcast, body: #"{"aps":{"alert":""# + String(repeating: "x", count: 5_000) + #""}}"#)
        var manyHeaders = DispatcherFixture.request(.broadcast)
        manyHeaders.headers = Dictionary(uniqueKeysWithValues: (0..<65).map { ("apns-x-\($0)", "v") })
        var longValue = DispatcherFixture.request(.broadcast)
        longValue.headers = ["apns-topic": String(repeating: "t", count: 5_000)]
        for (request, reason) in [
            (large, "more than the 4096 bytes apple notifications may have"), (manyHeaders, "at most 64 headers"),
            (longValue, "a header value is at most 4096 bytes"),
        ] {
            // Encoding checks nothing: as another service's producer would write it.
            try await fixture.send(request)
            let rejected = try #require(await fixture.summary(request.notificationId))
            #expect(rejected.results?.first?.outcome == .rejected)
            #expect(rejected.results?.first?.pnsReason?.contains(reason) == true, "\(String(describing: rejected.results))")
            #expect(await fixture.batches(request.notificationId).isEmpty)
        }
    }

    @Test("a reason that quotes a huge record is cut to 4 KiB by bytes, so the dead letter and the rejected result can always be produced")
    func hugeReasonsCut() async throws {
        let fixture = try await DispatcherFixture()
        // One Character of 800 KB: a letter and 400,000 combining accents. Quoted whole, the
        // reason made a dead letter (header and the value's first 256 KiB) over Kafka's 1 MB.
        let schema = "a" + String(repeating: "\u{301}", count: 400_000)
        let key = UUID().uuidString.lowercased()
        try await fixture.sendRaw(key: key, #"{"schema":"\#(schema)"}"#)
        let dead = try #require(await fixture.deadLetter(key, timeout: .seconds(60)))
        let header = try #require(dead.header("pushhub-error"))
        #expect(header.count <= RecordRejection.maximumReason && header.count > 4_000, "\(header.count) bytes")
        #expect(String(data: header, encoding: .utf8) != nil, "cut between scalars")
        let rejected = try #require(await fixture.summary(key))
        #expect((rejected.results?.first?.pnsReason?.utf8.count ?? .max) <= RecordRejection.maximumReason)
        let good = DispatcherFixture.request(.broadcast)
        try await fixture.send(good)
        #expect(await fixture.summary(good.notificationId) != nil, "the dispatcher went on")
    }

    @Test("a batch too large for one Kafka record is cut in parts within the limit, and every target goes once")
    func largeBatchesCut() async throws {
        let fixture = try await DispatcherFixture()
        // Templates of 2,500 bytes: 500 targets a batch would make a record of 1.3 MB, which
        // Kafka refuses (librdkafka's message.max.bytes is 1,000,000), for ever.
        let body = #"{"aps":{"alert":"$(message)","pad":""# + String(repeating: "p", count: 2_500) + #""}}"#
        for index in 0..<600 {
            _ = try await fixture.store.upsertInstallation(
                Installation(
                    installationId: "big-\(index)", platform: .apns, pushChannel: String(repeating: "0", count: 60) + String(format: "%04d", index),
                    templates: ["t": .init(body: body)]), hub: "myhub")
        }
        let request = DispatcherFixture.request(.broadcast, format: .template, body: #"{"message":"hi"}"#)
        try await fixture.send(request)
        let summary = try #require(await fixture.summary(request.notificationId, timeout: .seconds(60)))
        #expect(summary.dispatched?[.apns] == 600)
        let batches = await fixture.batches(request.notificationId)
        #expect(batches.map(\.targets.count).reduce(0, +) == 600)
        #expect(Set(batches.flatMap { $0.targets.compactMap(\.registrationId) }).count == 600)
        #expect(batches.count >= 4, "the first 500 cut in parts: \(batches.map(\.targets.count))")
        for batch in batches { #expect(try WireCoding.encode(batch).count <= WireCoding.maximumRecordBytes) }
    }

    @Test("a handle or installation named twice is one target: its send expects one result for it")
    func repeatsAreOneTarget() async throws {
        let fixture = try await DispatcherFixture()
        _ = try await fixture.store.upsertInstallation(
            Installation(installationId: "phone", platform: .apns, pushChannel: "inst-token"), hub: "myhub")
        let handles = DispatcherFixture.request(
            .handles([
                DirectHandle(platform: .apns, handle: "one"), DirectHandle(platform: .apns, handle: "two"),
                DirectHandle(platform: .apns, handle: "one"),
            ]))
        let installations = DispatcherFixture.request(.installationIds(["phone", "phone"]))
        try await fixture.send(handles)
        try await fixture.send(installations)
        #expect(await fixture.summary(handles.notificationId)?.dispatched?[.apns] == 2)
        #expect(await fixture.batches(handles.notificationId).flatMap(\.targets).map(\.handle) == ["one", "two"])
        #expect(await fixture.summary(installations.notificationId)?.dispatched?[.apns] == 1)
        #expect(await fixture.batches(installations.notificationId).flatMap(\.targets).count == 1)
    }

    @Test("a refused record whose key is no notification id has its rejected result under `unknown`, not under the key")
    func rejectedUnderUnknown() async throws {
        let fixture = try await DispatcherFixture()
        // Another service's key: not a UUID, long, with a control character.
        let key = "not-an-id-\u{1}" + String(repeating: "k", count: 3000)
        try await fixture.sendRaw(key: key, "{not json")
        let rejected = try #require(await fixture.summary("unknown"))
        #expect(rejected.results?.first?.outcome == .rejected)
        #expect(await fixture.deadLetter(key) != nil)
        #expect(await fixture.summary(key, timeout: .zero) == nil)
    }

    static func requestJSON(tags: String, id: String = "5f0c8f7e-3b7a-4a53-9d1e-2b8c4f6a9e10") -> String {
        #"{"schema":"pushhub.send-request.v1","notificationId":"\#(id)","hub":"myhub","audience":{"tags":"\#(tags)"},"format":"apple","body":"{}","enqueuedAt":"2026-11-21T08:00:00Z"}"#
    }

    @Test("poison records on one partition are dead-lettered at once, and the ordinary sends between them are dispatched on time")
    func poisonDoesNotStall() async throws {
        let fixture = try await DispatcherFixture(wrap: RefusingStore.wrapping)
        var poison: [String] = []
        var ordinary: [String] = []
        for index in 0..<80 {
            let id = UUID().uuidString.lowercased()
            switch index % 8 {
            case 0:
                ordinary.append(id)
                try await fixture.sendRaw(key: id, Self.requestJSON(tags: "Sports", id: id), partition: 0)
            case 1:
                // Within the parser's limits, but the store refuses the query (as SQLite did with
                // "parser stack overflow"): permanent, not retried.
                poison.append(id)
                try await fixture.sendRaw(key: id, Self.requestJSON(tags: RefusingStore.refusedTag, id: id), partition: 0)
            default:
                // Past the limits: 1,200 negations, 6,000 parentheses, 34 operators, JSON nested 10,000 deep.
                poison.append(id)
                let kinds = [
                    Self.requestJSON(tags: String(repeating: "!", count: 1200) + "Sports", id: id),
                    Self.requestJSON(tags: String(repeating: "(", count: 6000) + "a" + String(repeating: ")", count: 6000), id: id),
                    Self.requestJSON(tags: (0..<34).map { "t\($0)" }.joined(separator: " || "), id: id),
                    String(repeating: "[", count: 10_000),
                ]
                try await fixture.sendRaw(key: id, kinds[index % kinds.count], partition: 0)
            }
        }
        let started = ContinuousClock.now
        for id in ordinary { #expect(await fixture.summary(id)?.dispatched != nil, "ordinary send \(id) dispatched") }
        #expect(ContinuousClock.now - started < .seconds(30), "the ordinary sends were not held behind the poison")
        for id in poison {
            let rejected = await fixture.summary(id)
            #expect(rejected?.results?.first?.outcome == .rejected, "\(id)")
        }
        // Each poison names its limit in the outcome.
        var reasons = Set<String>()
        for id in poison { if let reason = await fixture.summary(id)?.results?.first?.pnsReason { reasons.insert(reason) } }
        for limit in ["nest at most 16 deep", "at most 4096 bytes", "at most 32 operators", "JSON nests at most 32"] {
            #expect(reasons.contains { $0.contains(limit) }, "a poison record's reason names \(limit)")
        }
        let refused = try #require(await fixture.summary(poison[0]))
        #expect(
            refused.results?.first?.pnsReason?.contains("the store refused the audience's query") == true, "\(String(describing: refused.results))")
        #expect(await fixture.deadLetter(poison[0]) != nil)
        #expect(await RefusingStore.attempts.count(RefusingStore.refusedTag) == 10, "each refused query was tried once, not again")
    }

    @Test("a store that fails for a while is retried and the send then dispatched; one that keeps failing is dead-lettered after the budget")
    func transientStoreFailures() async throws {
        let fixture = try await DispatcherFixture(
            wrap: RefusingStore.wrapping,
            budget: RetryBudget(attempts: 4, duration: .zero, firstBackoff: .milliseconds(20), maximumBackoff: .milliseconds(100)))
        let flaky = DispatcherFixture.request(.tags(RefusingStore.flakyTag))
        try await fixture.send(flaky)
        #expect(await fixture.summary(flaky.notificationId)?.dispatched != nil, "dispatched once the store came back")
        let down = DispatcherFixture.request(.tags(RefusingStore.downTag))
        try await fixture.send(down)
        let rejected = try #require(await fixture.summary(down.notificationId))
        #expect(rejected.results?.first?.pnsReason?.hasPrefix("gave up after 4 attempts") == true, "\(String(describing: rejected.results))")
        #expect(await RefusingStore.attempts.count(RefusingStore.downTag) == 4)
    }
}

/// The SQLite store, except for three tags: `refused-query` is refused as SQLite refuses a
/// statement it cannot compile, `store-down` fails as an unreachable store does, and
/// `store-flaky` fails so twice and then works.
enum RefusingStore {
    static let refusedTag = "refused-query"
    static let downTag = "store-down"
    static let flakyTag = "store-flaky"
    static let attempts = Attempts()

    actor Attempts {
        var counts: [String: Int] = [:]
        func add(_ tag: String) -> Int {
            counts[tag, default: 0] += 1
            return counts[tag]!
        }
        func count(_ tag: String) -> Int { counts[tag] ?? 0 }
    }

    struct Unreachable: Error {}

    static func wrapping(_ inner: any RegistrationStore) -> any RegistrationStore {
        InterceptedStore(inner: inner) { read in
            guard case .registrations(_, .tagExpression(.tag(let tag))) = read, [refusedTag, downTag, flakyTag].contains(tag) else { return }
            let attempt = await attempts.add(tag)
            switch tag {
            case refusedTag: throw SQLError(message: "parser stack overflow", isPermanent: true)
            case downTag: throw Unreachable()
            default: if attempt <= 2 { throw Unreachable() }
            }
        }
    }
}
