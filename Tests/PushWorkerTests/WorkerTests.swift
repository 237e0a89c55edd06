import Foundation
import Logging
import PushModel
import PushProviders
import Synchronization
import Testing

@testable import PushKafka
@testable import PushWorker

/// The worker engine without a cluster or a PNS: its window, its retries in place and its
/// hand-backs, against a provider that answers from a script. (The Kafka handles exist but are
/// never used: nothing here reaches a broker.)
@Suite("Worker engine", .timeLimit(.minutes(2)))
struct WorkerTests {
    /// Answers each handle's deliveries from its script, the last answer repeating.
    final class ScriptedProvider: PushProvider {
        let platform = Platform.apns
        let scripts: [String: [PNSAnswer]]
        let calls = Mutex<[String: Int]>([:])
        /// How many pushes each `deliverAll` carried.
        let rounds = Mutex<[Int]>([])

        init(_ scripts: [String: [PNSAnswer]]) { self.scripts = scripts }

        func deliverAll(_ deliveries: [PNSDelivery]) async -> [PNSAnswer] {
            rounds.withLock { $0.append(deliveries.count) }
            var answers: [PNSAnswer] = []
            for delivery in deliveries { answers.append(await deliver(delivery)) }
            return answers
        }

        func deliver(_ delivery: PNSDelivery) async -> PNSAnswer {
            let index = calls.withLock { calls -> Int in
                defer { calls[delivery.handle, default: 0] += 1 }
                return calls[delivery.handle, default: 0]
            }
            let script = scripts[delivery.handle] ?? [PNSAnswer(.delivered, status: 200)]
            return script[min(index, script.count - 1)]
        }

        func count(_ handle: String) -> Int { calls.withLock { $0[handle] ?? 0 } }
    }

    static let logger = Logger(label: "pushhub.tests") { _ in SwiftLogNoOpLogHandler() }
    static let topics = PushTopics(prefix: "unit.")
    static let throttled = PNSAnswer(.throttled(retryAfter: .zero), status: 429, reason: "TooManyRequests")

    static func worker(
        _ provider: ScriptedProvider, deliveryTimeout: Duration = .seconds(30), adjust: (inout WorkerSettings) -> Void = { _ in }
    ) throws -> DeliveryWorker {
        var settings = WorkerSettings(platform: .apns, topics: topics)
        settings.baseBackoff = .milliseconds(1)
        adjust(&settings)
        // Handles on a port where nothing listens: created, never used.
        let consumer = try KafkaConsumer.make(
            configuration: KafkaConsumerConfiguration(bootstrapServers: ["127.0.0.1:1"], groupID: "unit"), topics: [topics.deliveries(.apns)],
            logger: logger)
        var producerConfiguration = KafkaProducerConfiguration(bootstrapServers: ["127.0.0.1:1"])
        producerConfiguration.deliveryTimeout = deliveryTimeout
        let producer = try KafkaProducer.make(configuration: producerConfiguration, logger: logger)
        return DeliveryWorker(consumer: consumer, producer: producer, provider: provider, settings: settings, logger: logger)
    }

    static func batch(_ handles: [String], attempt: Int = 1, expiresAt: Date? = nil) -> DeliveryBatch {
        DeliveryBatch(
            notificationId: UUID().uuidString.lowercased(), hub: "myhub", platform: .apns, kind: .native, format: .apple, body: #"{"aps":{}}"#,
            expiresAt: expiresAt, enqueuedAt: Date(), attempt: attempt, targets: handles.map { .init(registrationId: "r-\($0)", handle: $0) })
    }

    static func end(_ worker: DeliveryWorker, _ handle: String, in batch: DeliveryBatch) async -> DeliveryWorker.TargetEnd {
        var alone = batch
        alone.targets = batch.targets.filter { $0.handle == handle }
        return await Self.ends(worker, alone)[0]
    }

    /// A batch's ends, worked by itself as the worker works it.
    static func ends(_ worker: DeliveryWorker, _ batch: DeliveryBatch) async -> [DeliveryWorker.TargetEnd] {
        await worker.deliverAll([DeliveryWorker.Lane(batch, record: nil, settings: worker.settings)])[0]
    }

    /// How a target ended, in a few words: its handle, then its outcome and calls, `expired`
    /// and its calls, `handed back` or `unsent`.
    static func described(_ end: DeliveryWorker.TargetEnd) -> String {
        switch end {
        case .final(let target, let answer, let calls): "\(target.handle) \(answer.classification.finalOutcome.rawValue) \(calls)"
        case .expired(let target, let calls): "\(target.handle) expired \(calls)"
        case .handBack(let target, _, _): "\(target.handle) handed back"
        case .unsent(let target): "\(target.handle) unsent"
        }
    }

    @Test("retried in place: throttling twice, then delivered, is one final answer after three calls")
    func retriesInPlace() async throws {
        let provider = ScriptedProvider(["a": [Self.throttled, Self.throttled, PNSAnswer(.delivered, status: 200)]])
        let worker = try Self.worker(provider)
        guard case .final(_, let answer, let calls) = await Self.end(worker, "a", in: Self.batch(["a"])) else {
            Issue.record("not final")
            return
        }
        #expect(answer.classification == .delivered && calls == 3)
    }

    @Test("an expired provider token is sent again at once, one call more, within the same budget")
    func renewedToken() async throws {
        let expired = PNSAnswer(.renewToken, status: 403, reason: "ExpiredProviderToken")
        let provider = ScriptedProvider(["a": [expired, PNSAnswer(.delivered, status: 200)]])
        let worker = try Self.worker(provider) { $0.baseBackoff = .seconds(30) }
        let started = ContinuousClock.now
        guard case .final(_, let answer, let calls) = await Self.end(worker, "a", in: Self.batch(["a"])) else {
            Issue.record("not final")
            return
        }
        #expect(answer.classification == .delivered && calls == 2)
        #expect(ContinuousClock.now - started < .seconds(5), "no backoff before the resend")
    }

    @Test("a renewed token that is refused again ends the target as misconfigured after two calls, never retried")
    func renewedTokenRefused() async throws {
        let unauthorized = PNSAnswer(.renewToken, status: 401, reason: "UNAUTHENTICATED")
        let provider = ScriptedProvider(["a": [unauthorized]])
        let worker = try Self.worker(provider)
        guard case .final(_, let answer, let calls) = await Self.end(worker, "a", in: Self.batch(["a"])) else {
            Issue.record("not final")
            return
        }
        #expect(answer.classification == .misconfigured(.credentialsRefused("UNAUTHENTICATED")) && calls == 2)
        #expect(answer.classification.finalOutcome == .failed && provider.count("a") == 2)
    }

    @Test("a batch goes to the provider in rounds: all its targets at once, then only those retried; each ends in its own way")
    func rounds() async throws {
        let provider = ScriptedProvider([
            "a": [Self.throttled, PNSAnswer(.delivered, status: 200)],
            "b": [PNSAnswer(.invalidHandle, status: 410, reason: "Unregistered")],
            "c": [PNSAnswer(.renewToken, status: 403, reason: "ExpiredProviderToken"), PNSAnswer(.delivered, status: 200)],
        ])
        let worker = try Self.worker(provider)
        let batch = Self.batch(["a", "b", "c", "d"])
        let ends = await Self.ends(worker, batch)
        let outcomes = ends.map(Self.described)
        #expect(outcomes == ["a delivered 2", "b invalidHandle 1", "c delivered 2", "d delivered 1"])
        #expect(provider.rounds.withLock { $0 } == [4, 2], "one call with every target, then one with the two sent again")
    }

    @Test("batches worked together: one call a round for all of them; each batch's attempt, expiry and order kept in its own ends")
    func lanes() async throws {
        let provider = ScriptedProvider(["a1": [Self.throttled, PNSAnswer(.delivered, status: 200)], "a3": [Self.throttled], "b1": [Self.throttled]])
        let worker = try Self.worker(provider) { $0.retriesInPlace = 1 }
        let first = Self.batch(["a1", "a2", "a3"])
        let last = Self.batch(["b1"], attempt: 8)
        let expired = Self.batch(["c1"], expiresAt: Date().addingTimeInterval(-1))
        let lanes = [first, last, expired].map { DeliveryWorker.Lane($0, record: nil, settings: worker.settings) }
        let ends = await worker.deliverAll(lanes).map { lane in lane.map(Self.described) }
        #expect(ends == [["a1 delivered 2", "a2 delivered 1", "a3 handed back"], ["b1 throttled 2"], ["c1 expired 0"]])
        #expect(provider.rounds.withLock { $0 } == [4, 3], "one call with the batches' four pushes, then one with the three sent again")
        #expect(provider.count("c1") == 0)
    }

    @Test(
        "pushes a stopping worker left unsent go back at the same attempt, in a record of their own; one sent earlier in the pass goes back as the next"
    )
    func unsentAtShutdown() async throws {
        let provider = ScriptedProvider(["a": [PNSAnswer.stopped], "b": [Self.throttled, PNSAnswer.stopped]])
        let worker = try Self.worker(provider)
        let batch = Self.batch(["a", "b", "c"], attempt: 3)
        let lane = DeliveryWorker.Lane(batch, record: nil, settings: worker.settings)
        let ends = await worker.deliverAll([lane])[0]
        #expect(ends.map(Self.described) == ["a unsent", "b handed back", "c delivered 1"])
        let records = try worker.outgoing(of: lane, ends: ends)
        let handBacks = try records.filter { $0.topic == Self.topics.deliveries(.apns) }.map {
            try WireCoding.decode(DeliveryBatch.self, from: $0.value)
        }
        let attempts = Dictionary(uniqueKeysWithValues: handBacks.map { ($0.targets.map(\.handle), $0.attempt) })
        #expect(attempts == [["b"]: 4, ["a"]: 3], "\(attempts)")
        let results = try records.filter { $0.topic == Self.topics.results }.map { try WireCoding.decode(ResultBatch.self, from: $0.value) }
        #expect(results.flatMap { $0.results ?? [] }.map(\.handle) == ["c"])
    }

    @Test("a token renewal is resent once even when the retries in place are used up")
    func renewalPastRetries() async throws {
        let provider = ScriptedProvider([
            "a": [Self.throttled, PNSAnswer(.renewToken, status: 401, reason: "UNAUTHENTICATED"), PNSAnswer(.delivered, status: 200)]
        ])
        let worker = try Self.worker(provider) { $0.retriesInPlace = 1 }
        guard case .final(_, let answer, let calls) = await Self.end(worker, "a", in: Self.batch(["a"])) else {
            Issue.record("not final")
            return
        }
        #expect(answer.classification == .delivered && calls == 3)
    }

    @Test("past the retries in place a target is handed back with the last answer; on the last attempt it ends with it")
    func handBackAndLastAttempt() async throws {
        let provider = ScriptedProvider(["a": [Self.throttled]])
        let worker = try Self.worker(provider) { $0.retriesInPlace = 2 }
        guard case .handBack(_, _, let answer) = await Self.end(worker, "a", in: Self.batch(["a"])) else {
            Issue.record("not handed back")
            return
        }
        #expect(answer?.status == 429)
        #expect(provider.count("a") == 3, "the first call and two retries")

        guard case .final(_, let last, _) = await Self.end(worker, "a", in: Self.batch(["a"], attempt: 8)) else {
            Issue.record("the 8th attempt must end")
            return
        }
        #expect(last.classification == .throttled(retryAfter: .zero) && last.classification.finalOutcome == .throttled)
    }

    @Test("never retried: a dead handle ends at its first answer; past expiresAt nothing is sent")
    func neverRetried() async throws {
        let provider = ScriptedProvider(["dead": [PNSAnswer(.invalidHandle, status: 410, reason: "Unregistered")]])
        let worker = try Self.worker(provider)
        guard case .final(_, let answer, let calls) = await Self.end(worker, "dead", in: Self.batch(["dead"])) else {
            Issue.record("not final")
            return
        }
        #expect(answer.classification == .invalidHandle && calls == 1)
        guard case .expired(_, let none) = await Self.end(worker, "late", in: Self.batch(["late"], expiresAt: Date().addingTimeInterval(-1))) else {
            Issue.record("not expired")
            return
        }
        #expect(none == 0 && provider.count("late") == 0)
    }

    @Test("a batch ends as its results and one hand-back of what must wait, with the next attempt and a not-before time")
    func resultsAndHandBack() async throws {
        let provider = ScriptedProvider(["slow": [Self.throttled], "dead": [PNSAnswer(.invalidHandle, status: 410)]])
        let worker = try Self.worker(provider) { $0.retriesInPlace = 1 }
        let batch = Self.batch(["ok", "slow", "dead"])
        let record = KafkaRecord(
            topic: Self.topics.deliveries(.apns), partition: 0, offset: 7, key: Data("k".utf8), value: try WireCoding.encode(batch), headers: [],
            timestampMilliseconds: nil, generation: 0)
        let outgoing = try #require(try await worker.work(record, .success(batch)))
        #expect(outgoing.count == 2)
        let results = try WireCoding.decode(ResultBatch.self, from: try #require(outgoing.first { $0.topic == Self.topics.results }).value)
        #expect(
            Dictionary(uniqueKeysWithValues: (results.results ?? []).map { ($0.handle!, $0.outcome) }) == ["ok": .delivered, "dead": .invalidHandle])
        let handedBack = try WireCoding.decode(
            DeliveryBatch.self, from: try #require(outgoing.first { $0.topic == Self.topics.deliveries(.apns) }).value)
        #expect(handedBack.targets.map(\.handle) == ["slow"])
        #expect(handedBack.attempt == 2 && handedBack.notBefore != nil && handedBack.expiresAt != nil)
    }

    /// A task waiting for room in `window` (full), returned once its wait has begun, so that
    /// what frees room next is what wakes it.
    static func waiter(on window: DeliveryWindow) async -> Task<Bool, Never> {
        let woke = Task {
            await window.waitForRoom()
            return true
        }
        let deadline = ContinuousClock.now + .seconds(30)
        while await window.waiting == 0, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(1)) }
        #expect(await window.waiting == 1, "the waiter waits")
        return woke
    }

    @Test("the window: full at its limit, room again when targets end; waiting batches count against their own limit")
    func window() async {
        let window = DeliveryWindow(limit: 10, sleepingLimit: 2)
        await window.take(10)
        #expect(await window.isFull)
        let woke = await Self.waiter(on: window)
        await window.give(4)
        #expect(await woke.value, "a waiter wakes once there is room")
        #expect(await !window.isFull)
        // Two batches sleeping out their not-before time give their room back, but no more may sleep.
        await window.sleep(3)
        await window.sleep(3)
        #expect(await window.isFull, "the sleeping limit")
        await window.wake(3)
        #expect(await !window.isFull)
    }

    @Test("the window's publishing part: ended batches give their delivering room to the next while their results are published, bounded apart")
    func publishingPart() async {
        let window = DeliveryWindow(limit: 10)
        await window.take(6)
        await window.take(4)
        #expect(await window.isFull)
        let woke = await Self.waiter(on: window)
        await window.startPublishing(6)
        #expect(await woke.value, "a waiter wakes once a batch's pushes ended")
        #expect(await window.held == (4, 6))
        await window.take(6)
        await window.startPublishing(4)
        #expect(await window.held == (6, 10))
        #expect(await window.isFull, "the publishing part is full: intake waits")
        await window.give(6, publishing: true)
        #expect(await !window.isFull)
        await window.give(6, publishing: false)
        await window.give(4, publishing: true)
        #expect(await window.held == (0, 0))
    }

    @Test("while Kafka has not acknowledged a batch's records, its room is in the publishing part: worked in a run, and alone")
    func roomWhilePublishing() async throws {
        // The producer reaches no broker: publishing fails after its delivery time-out.
        let worker = try Self.worker(ScriptedProvider([:]), deliveryTimeout: .seconds(1)) { $0.window = 1_000 }
        let records = try [["a", "b", "c"], ["d", "e"], ["f"]].enumerated().map { offset, handles in
            KafkaRecord(
                topic: Self.topics.deliveries(.apns), partition: 0, offset: Int64(offset), key: nil,
                value: try WireCoding.encode(Self.batch(handles)), headers: [], timestampMilliseconds: nil, generation: 0)
        }
        var admitted: [AdmittedRecord<DeliveryWorker.BatchWork>] = []
        for record in records { admitted.append(try #require(await worker.admit(record, mayWait: true))) }
        #expect(await worker.window.held == (6, 0))
        func held(becomes wanted: (Int, Int)) async -> (Int, Int) {
            let deadline = ContinuousClock.now + .seconds(10)
            var now = await worker.window.held
            while now != wanted, ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(5))
                now = await worker.window.held
            }
            return now
        }
        let (first, second, third) = (admitted[0], admitted[1], admitted[2])
        let run = Task { try await worker.process([(records[0], first.item), (records[1], second.item)]) }
        #expect(await held(becomes: (1, 5)) == (1, 5), "the run's batches wait for Kafka in the publishing part")
        #expect(try await run.value == [false, false], "nothing was acknowledged")
        let alone = Task { try await worker.process(records[2], third.item) }
        #expect(await held(becomes: (0, 6)) == (0, 6), "so does a batch worked alone")
        await #expect(throws: PublishPending.self) { try await alone.value }
        // A record whose publishing is tried again keeps its room where it is.
        await #expect(throws: PublishPending.self) { try await worker.process(records[0], first.item) }
        #expect(await worker.window.held == (0, 6))
        for each in admitted { await each.release() }
        #expect(await worker.window.held == (0, 0))
    }

    @Test("an admitted batch's room moves to publishing once, and its release gives it back to the part that holds it")
    func admittedRoom() async throws {
        let worker = try Self.worker(ScriptedProvider([:])) { $0.window = 1_000 }
        func record(_ handles: [String]) throws -> KafkaRecord {
            KafkaRecord(
                topic: Self.topics.deliveries(.apns), partition: 0, offset: 1, key: nil, value: try WireCoding.encode(Self.batch(handles)),
                headers: [], timestampMilliseconds: nil, generation: 0)
        }
        let published = try #require(await worker.admit(try record(["a", "b", "c"]), mayWait: true))
        let working = try #require(await worker.admit(try record(["d", "e"]), mayWait: true))
        #expect(await worker.window.held == (5, 0))
        await worker.publishing([published.item])
        await worker.publishing([published.item, working.item].prefix(1))
        #expect(await worker.window.held == (2, 3), "moved once")
        await published.release()
        await working.release()
        #expect(await worker.window.held == (0, 0))
    }
}

@Suite("A batch's templates rendered once")
struct BatchRenderingsTests {
    @Test("targets with the same template share its rendering and collapse key; any other bytes are rendered for themselves")
    func sharedRendering() throws {
        let template = Template(body: #"{"aps":{"alert":"hello $(name)"}}"#)
        let equivalent = Template(body: #"{"aps":{"alert":"h\#u{E9}llo $(name)"}}"#)
        let decomposed = Template(body: #"{"aps":{"alert":"he\#u{301}llo $(name)"}}"#)
        let targets = [template, template, equivalent, decomposed, template].enumerated().map { index, template in
            DeliveryBatch.Target(registrationId: "r\(index)", handle: String(repeating: "a", count: 64), template: template)
        }
        let batch = DeliveryBatch(
            notificationId: UUID().uuidString.lowercased(), hub: "myhub", platform: .apns, kind: .template, body: #"{"name":"Ann"}"#,
            targets: targets)
        let renderer = TemplateRenderer(properties: ["name": "Ann"])
        var renderings = BatchRenderings()
        let deliveries = try targets.map {
            try DeliveryWorker.prepare($0, of: batch, renderer: renderer, expiresAt: Date().addingTimeInterval(60), renderings: &renderings).get()
        }
        #expect(
            deliveries.map(\.body) == [
                #"{"aps":{"alert":"hello Ann"}}"#, #"{"aps":{"alert":"hello Ann"}}"#, #"{"aps":{"alert":"h\#u{E9}llo Ann"}}"#,
                #"{"aps":{"alert":"he\#u{301}llo Ann"}}"#, #"{"aps":{"alert":"hello Ann"}}"#,
            ])
        #expect(deliveries.map { Array($0.body.utf8) }[2] != deliveries.map { Array($0.body.utf8) }[3])
        let variants = deliveries.map(\.collapseVariant)
        #expect(variants[0] == variants[1] && variants[0] == variants[4])
        #expect(Set(variants).count == 3)
    }

    @Test("templates are the same only with the same bytes in body, headers and expiry; no headers and empty headers are the same")
    func sameBytes() {
        let template = Template(body: "b", headers: ["X-A": "\u{E9}"], expiry: "1")
        var decomposedValue = template
        decomposedValue.headers = ["X-A": "e\u{301}"]
        var composedKey = template
        composedKey.headers = ["X-\u{C5}": "1"]
        var decomposedKey = template
        decomposedKey.headers = ["X-A\u{30A}": "1"]
        var otherExpiry = template
        otherExpiry.expiry = "2"
        var noExpiry = template
        noExpiry.expiry = nil
        var moreHeaders = template
        moreHeaders.headers?["X-B"] = "2"
        let named = Template(name: "t", body: "b", headers: ["X-A": "\u{E9}"], expiry: "1", tags: ["a"])
        #expect(template.hasSameBytes(as: template))
        #expect(template.hasSameBytes(as: named))
        #expect(Template(body: "b").hasSameBytes(as: Template(body: "b", headers: [:])))
        for other in [decomposedValue, otherExpiry, noExpiry, moreHeaders, Template(body: "c", headers: template.headers, expiry: "1")] {
            #expect(!template.hasSameBytes(as: other) && !other.hasSameBytes(as: template))
            #expect(CollapseKey.variant(of: template) != CollapseKey.variant(of: other))
        }
        #expect(!decomposedKey.hasSameBytes(as: composedKey))
        #expect(CollapseKey.variant(of: decomposedKey) != CollapseKey.variant(of: composedKey))
    }
}
