import Foundation
import Logging
import PushKafka
import PushMetrics
import PushModel
import PushProviders
import ServiceLifecycle
import Synchronization
import Tracing

/// Settings of a worker.
public struct WorkerSettings: Sendable {
    public var platform: Platform
    public var topics: PushTopics
    /// Targets being delivered at most; intake waits while the window is full. About as many
    /// again may wait for Kafka to acknowledge their results (`DeliveryWindow`).
    public var window = 2_000
    /// Most targets of the small batches one poll fetched that are worked together, as one
    /// run: their pushes written and flushed together, their results published in one call
    /// (`KafkaConsumer.processInRuns`). Below `window`, so a run never waits for room it holds.
    public var runTargets = 500
    /// Retries of one target inside one pass, before the rest of its batch is handed back.
    public var retriesInPlace = 3
    /// How long a target may wait for retries inside one pass.
    public var retryBudget: Duration = .seconds(10)
    /// Passes of a batch (the dispatcher's and each hand-back) before a target ends with its last answer.
    public var maximumAttempts = 8
    /// The first backoff; it doubles per retry, with jitter, up to `maximumBackoff`.
    public var baseBackoff: Duration = .milliseconds(200)
    public var maximumBackoff: Duration = .seconds(60)
    /// How long after enqueue a notification without `expiresAt` expires (Azure NH: 30 minutes).
    public var defaultExpiry: TimeInterval = 30 * 60
    /// How long working a batch may keep failing (before its pushes went out) before it is
    /// dead-lettered; publishing finished work is retried without a limit.
    public var recordBudget = RetryBudget()

    public init(platform: Platform, topics: PushTopics) {
        self.platform = platform
        self.topics = topics
    }
}

/// One platform's worker: consumes DeliveryBatches, fills each target's payload, delivers
/// through the provider with retries, and publishes a ResultBatch (and a hand-back batch of
/// what must wait) before it marks the batch's record done.
public final class DeliveryWorker: Service, Sendable {
    let consumer: KafkaConsumer
    let producer: KafkaProducer
    let provider: any PushProvider
    let settings: WorkerSettings
    let logger: Logger
    let window: DeliveryWindow
    let metrics: WorkerMetrics
    /// Set at graceful shutdown: targets waiting for a retry are handed back at once.
    let draining = Draining()

    public init(consumer: KafkaConsumer, producer: KafkaProducer, provider: any PushProvider, settings: WorkerSettings, logger: Logger) {
        self.consumer = consumer
        self.producer = producer
        self.provider = provider
        self.settings = settings
        self.logger = logger
        window = DeliveryWindow(limit: settings.window)
        metrics = WorkerMetrics(platform: settings.platform)
    }

    public func run() async throws {
        // Pushes not yet written when shutdown begins are not sent: they are handed back
        // (`SendingStop`, `PNSAnswer.stopped`).
        await SendingStop.$current.withValue(draining.sending) {
            await runConsuming()
        }
        logger.info("worker stopped", metadata: ["pushhub.platform": "\(settings.platform.rawValue)"])
    }

    private func runConsuming() async {
        await withGracefulShutdownHandler {
            await consumer.processInRuns(
                maximumWeight: min(settings.runTargets, max(1, settings.window / 2)), budget: settings.recordBudget, logger: logger,
                admit: { record, mayWait in await self.admit(record, mayWait: mayWait) },
                weight: { work in self.runWeight(work) },
                giveUp: { record, work, reason in
                    let hub = (try? work.decoded.get())?.hub ?? RecordRejection.hub(of: record)
                    try await RecordRejection.reject(
                        record, hub: hub, reason: reason, topics: self.settings.topics, producer: self.producer, logger: self.logger)
                },
                run: { records in try await self.process(records) },
                { record, work in try await self.process(record, work) })
        } onGracefulShutdown: {
            self.draining.start()
        }
    }

    /// One batch record's work: the batch as decoded, and the records it ends with once worked
    /// (kept, so a retry only publishes again and never delivers twice).
    final class BatchWork: Sendable {
        let decoded: Result<DeliveryBatch, WireError>
        /// The room it takes in the window: its targets.
        let size: Int
        let outgoing = Mutex<[KafkaOutgoingRecord]?>(nil)
        /// A batch whose run went on without it: its targets' state after the run's round, to
        /// be finished alone.
        let unfinished = Mutex<Rounds?>(nil)
        /// Whether its room moved to the publishing part of the window (`publishing(_:)`).
        let publishing = Atomic<Bool>(false)

        init(_ decoded: Result<DeliveryBatch, WireError>) {
            self.decoded = decoded
            size = (try? decoded.get())?.targets.count ?? 1
        }
    }

    /// Batches whose pushes all ended and whose records are made: their room moves to the
    /// window's publishing part while Kafka acknowledges the records, so the next batches are
    /// delivered meanwhile. Holding it instead emptied the PNS connections every few
    /// milliseconds: the batches in the window all waited for their acknowledgements at once.
    func publishing(_ works: some Sequence<BatchWork>) async {
        let moved = works.reduce(0) { sum, work in work.publishing.exchange(true, ordering: .relaxed) ? sum : sum + work.size }
        if moved > 0 { await window.startPublishing(moved) }
    }

    /// Lets a batch in once the window has room for its targets. Meanwhile intake waits:
    /// librdkafka keeps its bounded prefetch (`prefetchBytes`) ahead and no more. Pausing the
    /// partitions instead threw that prefetch away, to be fetched again at each resume.
    /// With `mayWait` false, nil at once instead when the window has no room now.
    func admit(_ record: KafkaRecord, mayWait: Bool) async -> AdmittedRecord<BatchWork>? {
        if !mayWait, await window.isFull { return nil }
        let work = BatchWork(Result { () throws(WireError) in try WireCoding.decode(DeliveryBatch.self, from: record.value) })
        let size = work.size
        if mayWait {
            await window.waitForRoom()
            await window.take(size)
        } else {
            // Checked and taken in one step: the window may have filled since (a batch woke).
            guard await window.takeIfRoom(size) else { return nil }
        }
        return AdmittedRecord(work, release: { await self.window.give(size, publishing: work.publishing.load(ordering: .relaxed)) })
    }

    /// Works one record and publishes its results (and hand-back); the consume loop marks it
    /// done after, and retries a failed publish. At shutdown an unpublished record is left for
    /// the next owner of the partition.
    func process(_ record: KafkaRecord, _ work: BatchWork) async throws {
        var outgoing = work.outgoing.withLock { $0 }
        if outgoing == nil {
            // A batch let in after shutdown began is not started: the next owner does it. One
            // its run left after the first round went out is finished (its retries handed back).
            let started = work.unfinished.withLock { $0 } != nil
            if draining.isStarted, !started { throw RecordLeftUnfinished() }
            do {
                guard let made = try await traced(record, { try await self.work(record, work) }) else { throw RecordLeftUnfinished() }
                work.outgoing.withLock { $0 = made }
                outgoing = made
            } catch let error as PermanentFailure {
                throw error
            } catch {
                if draining.isStarted, !started { throw RecordLeftUnfinished() }
                throw error
            }
        }
        // Its room moves now, made here or by its run (which does it too; it moves once).
        await publishing(CollectionOfOne(work))
        guard let outgoing, !outgoing.isEmpty else { return }
        let failure: KafkaError?
        do {
            try await producer.sendAllAcknowledged(outgoing)
            failure = nil
        } catch {
            failure = error
        }
        guard let failure else { return }
        // At shutdown the record is left for the next owner; otherwise publishing is retried
        // for as long as it takes, since the pushes went out.
        if draining.isStarted { throw RecordLeftUnfinished() }
        throw PublishPending(failure)
    }

    /// How much of a run a batch takes: its targets. Nil, so that it is worked alone, when
    /// it will not be worked as it stands (it does not decode, it is another platform's, it
    /// waits for its not-before time), and when tracing, which gives each batch a span.
    func runWeight(_ work: BatchWork) -> Int? {
        guard !TraceHeaders.isActive, case .success(let batch) = work.decoded, batch.platform == settings.platform else { return nil }
        if let notBefore = batch.notBefore, notBefore > Date() { return nil }
        return batch.targets.count
    }

    /// Works a run of batches together (`runWeight` let each in): the first round of all their
    /// pushes in one provider call, then the results and hand-backs of the batches it ended
    /// published in one call. A batch with targets to retry in place or renew is left to be
    /// finished alone, from where the round left it (`BatchWork.unfinished`), so it never holds
    /// its run's other batches or their room; so is one whose records were not acknowledged,
    /// with only those kept to publish again. Says, per batch, whether it is finished.
    func process(_ run: [(record: KafkaRecord, item: BatchWork)]) async throws -> [Bool] {
        let unworked = run.indices.filter { run[$0].item.outgoing.withLock { $0 } == nil && run[$0].item.unfinished.withLock { $0 } == nil }
        if !unworked.isEmpty {
            if draining.isStarted || Task.isCancelled { throw RecordLeftUnfinished() }
            var lanes: [Lane] = []
            lanes.reserveCapacity(unworked.count)
            for index in unworked { lanes.append(Lane(try checked(run[index].item.decoded), record: run[index].record, settings: settings)) }
            var rounds = prepare(lanes)
            await deliver(&rounds, once: true)
            metrics.runs.increment()
            metrics.batchesInRuns.increment(by: lanes.count)
            for (number, index) in unworked.enumerated() {
                let work = run[index].item
                if rounds.hasEnded(lane: number) {
                    do {
                        let made = try outgoing(of: lanes[number], ends: rounds.ends(ofLane: number))
                        work.outgoing.withLock { $0 = made }
                    } catch {
                        // Its pushes went out: it is finished alone from where it stands (its
                        // records made again, with the record's retries), never sent again.
                        // (Thrown from here, the error left the run's later batches with
                        // neither state, and they were delivered again.)
                        work.unfinished.withLock { $0 = rounds.lane(number) }
                    }
                } else {
                    let rest = rounds.lane(number)
                    work.unfinished.withLock { $0 = rest }
                }
            }
        }
        await publishing(run.lazy.map(\.item).filter { work in work.outgoing.withLock { $0 != nil } })
        var outgoing: [KafkaOutgoingRecord] = []
        var owners: [Int] = []
        for (index, (_, work)) in run.enumerated() {
            for record in work.outgoing.withLock({ $0 }) ?? [] {
                outgoing.append(record)
                owners.append(index)
            }
        }
        var finished = run.map { $0.item.outgoing.withLock { $0 } != nil }
        guard !outgoing.isEmpty else { return finished }
        var failed: [Int: [KafkaOutgoingRecord]] = [:]
        for (offset, result) in await producer.sendAll(outgoing).enumerated() {
            if case .failure = result { failed[owners[offset], default: []].append(outgoing[offset]) }
        }
        for (index, records) in failed {
            run[index].item.outgoing.withLock { $0 = records }
            finished[index] = false
        }
        return finished
    }

    /// Runs a batch's work in a span under the context its record carries, when tracing: its
    /// results and hand-back carry the span on, and its PNS calls are spans under it.
    private func traced(_ record: KafkaRecord, _ body: () async throws -> [KafkaOutgoingRecord]?) async throws -> [KafkaOutgoingRecord]? {
        guard TraceHeaders.isActive else { return try await body() }
        return try await withSpan("pushhub.deliver", context: TraceHeaders.context(of: record), ofKind: .consumer) { span in
            span.attributes["pushhub.platform"] = settings.platform.rawValue
            return try await body()
        }
    }

    /// PNS calls traced a batch at most: the first, and those that did not deliver.
    static let pnsSpansPerBatch = 8

    /// The records a batch ends with: its results and the hand-back of what must wait. `nil`
    /// when shutdown came before the batch's not-before time (the record stays unfinished).
    func work(_ record: KafkaRecord, _ work: BatchWork) async throws -> [KafkaOutgoingRecord]? {
        guard var rest = work.unfinished.withLock({ $0 }) else { return try await self.work(record, work.decoded) }
        // Left by its run after the first round: the rounds go on from there.
        await deliver(&rest, once: false)
        return try outgoing(of: rest.lanes[0], ends: rest.ends(ofLane: 0))
    }

    func work(_ record: KafkaRecord, _ decoded: Result<DeliveryBatch, WireError>) async throws -> [KafkaOutgoingRecord]? {
        let batch = try checked(decoded)
        var lane = Lane(batch, record: record, settings: settings)
        if let notBefore = batch.notBefore, notBefore > Date() {
            if notBefore >= lane.expiresAt {
                // It may not be sent before it expires: its targets expire now, without a wait.
                lane.expiresAt = Date()
            } else {
                // A waiting batch gives its targets' room to others; how many may wait is bounded.
                // A hand-back waits at most `maximumBackoff`; a later time (not a worker's) waits
                // no longer, so that a record cannot hold its partition's progress for ever.
                let wait = min(notBefore.timeIntervalSinceNow, settings.maximumBackoff.seconds)
                await window.sleep(batch.targets.count)
                let rested = await draining.sleep(for: .milliseconds(Int(wait * 1000)))
                await window.wake(batch.targets.count)
                guard rested else { return nil }
            }
        }
        return try outgoing(of: lane, ends: await deliverAll([lane])[0])
    }

    /// The batch a record holds, when this worker can work it; otherwise why it never will.
    func checked(_ decoded: Result<DeliveryBatch, WireError>) throws -> DeliveryBatch {
        let batch: DeliveryBatch
        switch decoded {
        case .success(let decoded): batch = decoded
        case .failure(let error): throw PermanentFailure(error.description)
        }
        guard batch.platform == settings.platform else {
            throw PermanentFailure("platform: \(batch.platform.rawValue) batch on the \(settings.platform.rawValue) worker's topic")
        }
        return batch
    }

    /// A batch as it is worked: what its targets' pushes and results share.
    struct Lane: Sendable {
        let batch: DeliveryBatch
        /// Its record's key, which a hand-back keeps.
        let key: Data?
        let enqueuedAt: Date
        var expiresAt: Date
        let renderer: TemplateRenderer

        var targets: [DeliveryBatch.Target] { batch.targets }

        init(_ batch: DeliveryBatch, record: KafkaRecord?, settings: WorkerSettings) {
            self.batch = batch
            key = record?.key
            enqueuedAt = batch.enqueuedAt ?? record?.timestampMilliseconds.map { Date(timeIntervalSince1970: Double($0) / 1000) } ?? Date()
            expiresAt = batch.expiresAt ?? enqueuedAt.addingTimeInterval(settings.defaultExpiry)
            let properties = batch.kind == .template ? (try? TemplateProperties.parse(batch.body)) ?? [:] : [:]
            renderer = TemplateRenderer(properties: properties)
        }
    }

    /// A worked batch's records: its results, and the hand-back of what must wait.
    func outgoing(of lane: Lane, ends: [TargetEnd]) throws -> [KafkaOutgoingRecord] {
        let batch = lane.batch
        let dwellMs = max(0, Int(Date().timeIntervalSince(lane.enqueuedAt) * 1000))
        var results: [DeliveryResult] = []
        var handBack: [DeliveryBatch.Target] = []
        var unsent: [DeliveryBatch.Target] = []
        var wait = Duration.zero
        var lastAnswer: PNSAnswer?
        for end in ends {
            switch end {
            case .final(let target, let answer, let calls):
                let outcome = answer.classification.finalOutcome
                results.append(
                    DeliveryResult(
                        registrationId: target.registrationId, handle: target.handle, outcome: outcome, pnsStatus: answer.status,
                        pnsReason: (answer.reason ?? Self.reason(answer.classification))?.utf8Prefix(Self.maximumReason),
                        attempts: batch.attempt - 1 + calls, dwellMs: dwellMs))
            case .expired(let target, let calls):
                results.append(
                    DeliveryResult(
                        registrationId: target.registrationId, handle: target.handle, outcome: .expired, pnsReason: "expiresAt passed",
                        attempts: batch.attempt - 1 + calls, dwellMs: dwellMs))
            case .handBack(let target, let after, let answer):
                handBack.append(target)
                wait = max(wait, after)
                lastAnswer = answer ?? lastAnswer
            case .unsent(let target):
                unsent.append(target)
            }
        }
        // Counted by runs of one outcome: one counter update a run, not one a target.
        var run: (outcome: Outcome, count: Int)?
        for result in results {
            if run?.outcome == result.outcome {
                run!.count += 1
            } else {
                if let run { metrics.outcomes[run.outcome]?.increment(by: run.count) }
                run = (result.outcome, 1)
            }
        }
        if let run { metrics.outcomes[run.outcome]?.increment(by: run.count) }
        metrics.handedBack.increment(by: handBack.count + unsent.count)
        var outgoing: [KafkaOutgoingRecord] = []
        if !results.isEmpty {
            // In more than one record when they would not fit one (long handles and ids): each
            // target counts once however its results are cut.
            for value in try WireCoding.encodeInParts(
                results,
                { results in
                    ResultBatch(notificationId: batch.notificationId, hub: batch.hub, platform: batch.platform, results: results)
                })
            {
                outgoing.append(
                    KafkaOutgoingRecord(
                        topic: settings.topics.results, key: batch.notificationId, value: value, headers: TraceHeaders.headers(), sticky: true))
            }
        }
        // What was tried goes back as the next attempt, after its wait; what was never sent, as
        // the same attempt, at once.
        for (targets, attempt, wait, answer) in [(handBack, batch.attempt + 1, wait, lastAnswer), (unsent, batch.attempt, .zero, .stopped)]
        where !targets.isEmpty {
            var next = batch
            next.attempt = attempt
            next.notBefore = Date().addingTimeInterval(wait.seconds)
            next.enqueuedAt = lane.enqueuedAt
            next.expiresAt = lane.expiresAt
            for value in try WireCoding.encodeInParts(
                targets,
                { targets in
                    var part = next
                    part.targets = targets
                    return part
                })
            {
                outgoing.append(
                    KafkaOutgoingRecord(
                        topic: settings.topics.deliveries(settings.platform), key: lane.key, value: value, headers: TraceHeaders.headers()))
            }
            logger.info(
                "targets handed back",
                metadata: [
                    "pushhub.notification_id": "\(batch.notificationId)", "pushhub.targets": "\(targets.count)",
                    "pushhub.attempt": "\(next.attempt)",
                    "pushhub.pns_status": "\(answer?.status.map(String.init) ?? "-")",
                    "pushhub.pns_reason": "\(answer?.reason?.utf8Prefix(300) ?? "-")",
                ])
        }
        return outgoing
    }

    enum TargetEnd: Sendable {
        case final(DeliveryBatch.Target, PNSAnswer, calls: Int)
        case expired(DeliveryBatch.Target, calls: Int)
        case handBack(DeliveryBatch.Target, after: Duration, answer: PNSAnswer?)
        /// Never sent this pass: shutdown came before it was written (`PNSAnswer.stopped`).
        /// Handed back at the same attempt.
        case unsent(DeliveryBatch.Target)
    }

    /// The targets of one or more batches: their payloads, then the provider in rounds, all of
    /// a round's pushes sent together. What is retried in place waits for the longest backoff
    /// of its round; what runs past the retries in place or the retry budget is handed back.
    /// Each lane's ends are in its targets' order.
    func deliverAll(_ lanes: [Lane]) async -> [[TargetEnd]] {
        var rounds = prepare(lanes)
        await deliver(&rounds, once: false)
        return lanes.indices.map { rounds.ends(ofLane: $0) }
    }

    /// Where the targets of some batches stand between rounds: their pushes, how each ended,
    /// and what the next round sends. Targets are numbered across the lanes.
    struct Rounds: Sendable {
        var lanes: [Lane]
        /// Each target's lane, and each lane's first target.
        var laneOf: [Int] = []
        var first: [Int] = []
        var ends: [TargetEnd?] = []
        var deliveries: [PNSDelivery?] = []
        /// The targets the next round sends.
        var round: [Int] = []
        var calls: [Int] = []
        var renewed: [Bool] = []
        /// How long each lane waits before its next round: the longest backoff of its retries.
        var pause: [Duration] = []
        /// PNS spans each lane may still make.
        var spansLeft: [Int] = []
        /// When the first round went: retries in place end within the budget from it.
        var started = ContinuousClock.now

        func target(_ index: Int) -> DeliveryBatch.Target { lanes[laneOf[index]].targets[index - first[laneOf[index]]] }

        func indices(ofLane number: Int) -> Range<Int> { first[number]..<first[number] + lanes[number].targets.count }

        func hasEnded(lane number: Int) -> Bool { indices(ofLane: number).allSatisfy { ends[$0] != nil } }

        func ends(ofLane number: Int) -> [TargetEnd] { indices(ofLane: number).map { ends[$0]! } }

        /// One lane's part, as rounds of its own.
        func lane(_ number: Int) -> Rounds {
            let range = indices(ofLane: number)
            var rest = Rounds(lanes: [lanes[number]])
            rest.laneOf = Array(repeating: 0, count: range.count)
            rest.first = [0]
            rest.ends = Array(ends[range])
            rest.deliveries = Array(deliveries[range])
            rest.round = round.filter { range.contains($0) }.map { $0 - range.lowerBound }
            rest.calls = Array(calls[range])
            rest.renewed = Array(renewed[range])
            rest.pause = [pause[number]]
            rest.spansLeft = [spansLeft[number]]
            rest.started = started
            return rest
        }
    }

    /// The lanes' pushes made, every target in the first round.
    func prepare(_ lanes: [Lane]) -> Rounds {
        var rounds = Rounds(lanes: lanes)
        let count = lanes.reduce(0) { $0 + $1.targets.count }
        rounds.laneOf.reserveCapacity(count)
        for (number, lane) in lanes.enumerated() {
            rounds.first.append(rounds.laneOf.count)
            rounds.laneOf.append(contentsOf: repeatElement(number, count: lane.targets.count))
        }
        rounds.ends = Array(repeating: nil, count: count)
        rounds.deliveries = Array(repeating: nil, count: count)
        rounds.round.reserveCapacity(count)
        for (number, lane) in lanes.enumerated() {
            var renderings = BatchRenderings()
            for (offset, target) in lane.targets.enumerated() {
                let index = rounds.first[number] + offset
                switch Self.prepare(target, of: lane.batch, renderer: lane.renderer, expiresAt: lane.expiresAt, renderings: &renderings) {
                case .success(let delivery):
                    rounds.deliveries[index] = delivery
                    rounds.round.append(index)
                case .failure(let problem): rounds.ends[index] = .final(target, PNSAnswer(.payloadRejected, reason: problem.description), calls: 0)
                }
            }
        }
        rounds.calls = Array(repeating: 0, count: count)
        rounds.renewed = Array(repeating: false, count: count)
        rounds.pause = Array(repeating: .zero, count: lanes.count)
        // PNS spans, a lane's decided once: none when not tracing.
        let tracing = TraceHeaders.isActive && InstrumentationContext.current != nil
        rounds.spansLeft = Array(repeating: tracing ? Self.pnsSpansPerBatch : 0, count: lanes.count)
        return rounds
    }

    /// Runs `rounds` until every target ended, or, with `once`, one round (its retries' pause
    /// kept, not waited).
    func deliver(_ rounds: inout Rounds, once: Bool) async {
        var sent = false
        while !rounds.round.isEmpty {
            if once && sent { return }
            let pause = rounds.round.reduce(Duration.zero) { max($0, rounds.pause[rounds.laneOf[$1]]) }
            if pause > .zero {
                guard await draining.sleep(for: pause) else {
                    for index in rounds.round { rounds.ends[index] = .handBack(rounds.target(index), after: .zero, answer: nil) }
                    rounds.round = []
                    return
                }
            }
            for number in rounds.pause.indices { rounds.pause[number] = .zero }
            let now = Date()
            if rounds.lanes.contains(where: { now >= $0.expiresAt }) {
                rounds.round = rounds.round.filter { index in
                    guard now >= rounds.lanes[rounds.laneOf[index]].expiresAt else { return true }
                    rounds.ends[index] = .expired(rounds.target(index), calls: rounds.calls[index])
                    return false
                }
                if rounds.round.isEmpty { return }
            }
            let tracing = rounds.spansLeft.contains { $0 > 0 }
            let roundStart = tracing ? DefaultTracerClock.now : DefaultTracerClock.Timestamp(nanosecondsSinceEpoch: 0)
            // The round's pushes are moved out, not copied (seven retains and releases a push):
            // those sent again are put back where they are.
            let sending = rounds.round.map { rounds.deliveries[$0].take()! }
            let answers = await provider.deliverAll(sending)
            sent = true
            var again: [Int] = []
            var latencies = Histogram.Tally(metrics.latency)
            defer { latencies.record() }
            for (position, (index, answer)) in zip(rounds.round, answers).enumerated() {
                if answer.classification != .delivered, answer == .stopped {
                    // Not sent (shutdown came before it was written): no call, no span. Sent
                    // earlier in this pass, it goes back as the next attempt.
                    let target = rounds.target(index)
                    rounds.ends[index] = rounds.calls[index] == 0 ? .unsent(target) : .handBack(target, after: .zero, answer: nil)
                    continue
                }
                rounds.calls[index] += 1
                let number = rounds.laneOf[index]
                if rounds.spansLeft[number] > 0, index == rounds.first[number] || answer.classification != .delivered {
                    let batch = rounds.lanes[number].batch
                    // The round's requests went together: each span covers the round, its own
                    // time an attribute. No handle or token goes in a span.
                    rounds.spansLeft[number] -= 1
                    let span = startSpan("pushhub.pns", ofKind: .client, at: roundStart)
                    span.attributes["pushhub.platform"] = batch.platform.rawValue
                    span.attributes["pushhub.attempt"] = batch.attempt - 1 + rounds.calls[index]
                    if let status = answer.status { span.attributes["http.response.status_code"] = status }
                    if let latency = answer.latency {
                        span.attributes["pushhub.pns_latency_ms"] = Int(latency.wholeMilliseconds)
                    }
                    if answer.classification != .delivered {
                        span.setStatus(SpanStatus(code: .error, message: answer.reason ?? Self.reason(answer.classification)))
                    }
                    span.end()
                }
                if let latency = answer.latency { latencies.observe(latency) }
                if answer.classification == .delivered {
                    // Nearly every answer: ends here, with nothing more to decide.
                    rounds.ends[index] = .final(rounds.target(index), answer, calls: rounds.calls[index])
                    continue
                }
                let target = rounds.target(index)
                let calls = rounds.calls[index]
                let attempt = rounds.lanes[number].batch.attempt
                let retryAfter: Duration?
                switch answer.classification {
                case .throttled(let after), .retry(let after): retryAfter = after
                case .renewToken:
                    // The provider renewed its token: send again at once, once, whatever the
                    // retries so far. A renewed token refused too means the credentials are wrong.
                    guard !rounds.renewed[index] else {
                        let refused = Misconfiguration.credentialsRefused(answer.reason ?? "the renewed token was refused")
                        rounds.ends[index] = .final(
                            target, PNSAnswer(.misconfigured(refused), status: answer.status, reason: answer.reason), calls: calls)
                        continue
                    }
                    rounds.renewed[index] = true
                    again.append(index)
                    rounds.deliveries[index] = sending[position]
                    continue
                default:
                    rounds.ends[index] = .final(target, answer, calls: calls)
                    continue
                }
                let backoff = retryAfter ?? jittered(settings.baseBackoff * (1 << min(attempt - 1 + calls - 1, 16)))
                let wait = min(backoff, settings.maximumBackoff)
                if calls > settings.retriesInPlace || ContinuousClock.now - rounds.started + wait > settings.retryBudget || draining.isStarted {
                    rounds.ends[index] =
                        attempt >= settings.maximumAttempts
                        ? .final(target, answer, calls: calls) : .handBack(target, after: wait, answer: answer)
                    continue
                }
                metrics.retries.increment()
                again.append(index)
                rounds.deliveries[index] = sending[position]
                rounds.pause[number] = max(rounds.pause[number], wait)
            }
            rounds.round = again
        }
    }

    /// The most bytes of a PNS's words a result carries (a device's own Web Push endpoint
    /// chooses them); the store keeps 500.
    static let maximumReason = 1024

    /// Between half and all of `duration`, so retries of many targets spread out.
    func jittered(_ duration: Duration) -> Duration {
        duration / 2 + duration / 2 * Double.random(in: 0...1)
    }

    public struct PayloadProblem: Error, CustomStringConvertible { public var description: String }

    /// The PNS call for one target: the batch's payload, or the target's template rendered
    /// (once for all the batch's targets that share it, through `renderings`). Public for
    /// `pushhub bench allocations`, which counts what a batch costs on the worker's path.
    public static func prepare(
        _ target: DeliveryBatch.Target, of batch: DeliveryBatch, renderer: TemplateRenderer, expiresAt: Date, renderings: inout BatchRenderings
    ) -> Result<PNSDelivery, PayloadProblem> {
        var delivery = PNSDelivery(
            hub: batch.hub, notificationId: batch.notificationId, handle: target.handle, webPush: target.webPush,
            format: batch.format ?? batch.platform.templateFormat, body: batch.body, headers: batch.headers, expiresAt: expiresAt)
        guard batch.kind == .template, let template = target.template else { return .success(delivery) }
        let rendered: BatchRenderings.Rendered
        switch renderings.rendering(template, platform: batch.platform, renderer: renderer) {
        case .success(let value): rendered = value
        case .failure(let problem): return .failure(problem)
        }
        delivery.body = rendered.body
        delivery.collapseVariant = rendered.collapseVariant
        for (name, value) in rendered.headers { delivery.headers[name] = value }
        if rendered.isLegacyFCM { delivery.format = .gcm }
        return .success(delivery)
    }

    static func reason(_ classification: PNSClassification) -> String? {
        switch classification {
        case .misconfigured(let problem): problem.description
        case .unknown(let reason): reason
        case .throttled: "throttled"
        case .retry: "retries exhausted"
        default: nil
        }
    }
}

/// The worker's series: deliveries by outcome, PNS latency, retries and hand-backs.
struct WorkerMetrics: Sendable {
    let outcomes: [Outcome: Counter]
    let latency: Histogram
    let retries: Counter
    let handedBack: Counter
    /// Runs worked, and the batches in them (`DeliveryWorker.process(_:)` of a run).
    let runs: Counter
    let batchesInRuns: Counter

    init(platform: Platform, metrics: MetricsRegistry = .shared) {
        let labels = ["platform": platform.rawValue]
        outcomes = Dictionary(
            uniqueKeysWithValues: Outcome.allCases.map { outcome in
                (
                    outcome,
                    metrics.counter(
                        "pushhub_deliveries_total", help: "Targets that ended, by platform and outcome.",
                        labels: labels.merging(["outcome": outcome.rawValue]) { $1 })
                )
            })
        latency = metrics.histogram("pushhub_pns_request_duration_seconds", help: "Time a PNS took to answer, by platform.", labels: labels)
        retries = metrics.counter("pushhub_pns_retries_total", help: "Retried PNS requests, by platform.", labels: labels)
        handedBack = metrics.counter(
            "pushhub_targets_handed_back_total", help: "Targets handed back to wait for a later pass, by platform.", labels: labels)
        runs = metrics.counter(
            "pushhub_worker_runs_total", help: "Runs of small batches from one poll worked together, by platform.", labels: labels)
        batchesInRuns = metrics.counter(
            "pushhub_worker_run_batches_total", help: "Batches worked in runs with others, by platform.", labels: labels)
    }
}

/// Graceful shutdown seen by sleeping retries.
final class Draining: Sendable {
    /// The flag itself, which the PNS client reads too: `run` binds it for the deliveries.
    let sending = SendingStop()

    var isStarted: Bool { sending.isStopped }

    func start() { sending.stop() }

    /// Sleeps `duration` in short steps; `false` when shutdown began meanwhile.
    func sleep(for duration: Duration) async -> Bool {
        let deadline = ContinuousClock.now + duration
        while ContinuousClock.now < deadline {
            if isStarted || Task.isCancelled { return false }
            try? await Task.sleep(for: min(.milliseconds(50), deadline - ContinuousClock.now))
        }
        return !isStarted
    }
}

/// How many targets are in flight (being delivered, or their results being published), and how
/// many handed-back batches wait for their not-before time (they hold no room meanwhile, but
/// only `sleepingLimit` may wait).
actor DeliveryWindow {
    let limit: Int
    let sleepingLimit: Int
    private var inFlight = 0
    /// Targets of batches whose pushes ended, while their records are published.
    private var publishing = 0
    private var sleeping = 0
    private var waiters: [CheckedContinuation<Void, Never>] = []

    init(limit: Int, sleepingLimit: Int = 64) {
        self.limit = limit
        self.sleepingLimit = sleepingLimit
    }

    var isFull: Bool { inFlight >= limit || publishing >= limit || sleeping >= sleepingLimit }

    /// The targets each part holds.
    var held: (delivering: Int, publishing: Int) { (inFlight, publishing) }

    /// Batches waiting for room.
    var waiting: Int { waiters.count }

    func waitForRoom() async {
        while isFull { await withCheckedContinuation { waiters.append($0) } }
    }

    func take(_ count: Int) { inFlight += count }

    /// `take`, when the window has room now; false, taking nothing, when it is full.
    func takeIfRoom(_ count: Int) -> Bool {
        guard !isFull else { return false }
        inFlight += count
        return true
    }

    func give(_ count: Int) {
        inFlight -= count
        wakeWaiters()
    }

    /// Targets whose results wait for Kafka's acknowledgement leave the delivering part for the
    /// publishing part, which bounds them apart: intake waits while either is full, so at most
    /// about twice `limit` targets are held.
    func startPublishing(_ count: Int) {
        inFlight -= count
        publishing += count
        wakeWaiters()
    }

    /// A batch is done: its room is given back to the part that held it.
    func give(_ count: Int, publishing wasPublishing: Bool) {
        if wasPublishing {
            publishing -= count
            wakeWaiters()
        } else {
            give(count)
        }
    }

    /// A batch starts waiting for its not-before time.
    func sleep(_ count: Int) {
        sleeping += 1
        give(count)
    }

    /// It stops waiting and takes its room again (the window may run over by what wakes at once).
    func wake(_ count: Int) {
        sleeping -= 1
        take(count)
        wakeWaiters()
    }

    private func wakeWaiters() {
        guard !isFull else { return }
        let ready = waiters
        waiters = []
        for waiter in ready { waiter.resume() }
    }
}

/// A batch's templates as rendered for its targets. Targets usually share their template
/// (every device of an app registers the same one), and the properties are the batch's: a
/// template with the same bytes as the one before is not rendered again. Rendering was a ninth of the
/// APNs worker's CPU in a template broadcast when it was done for every target.
public struct BatchRenderings: Sendable {
    /// What a template makes of the batch's properties.
    public struct Rendered: Sendable {
        var body: String
        /// The template's headers rendered, and `apns-expiration` from its expiry.
        var headers: [String: String]
        /// An FCM body without `message`: the legacy (gcm) format.
        var isLegacyFCM: Bool
        /// `CollapseKey.variant(of:)` the template.
        var collapseVariant: String
    }

    public typealias Problem = DeliveryWorker.PayloadProblem

    /// The last template rendered, and what it made.
    private var last: (template: Template, rendered: Result<Rendered, Problem>)?

    public init() {}

    mutating func rendering(_ template: Template, platform: Platform, renderer: TemplateRenderer) -> Result<Rendered, Problem> {
        // Compared by bytes (a digest of each target's template to look up the last was 4 % of
        // the WNS worker's CPU in a template broadcast).
        if let last, last.template.hasSameBytes(as: template) { return last.rendered }
        let rendered = Self.render(template, variant: CollapseKey.variant(of: template), platform: platform, renderer: renderer)
        last = (template, rendered)
        return rendered
    }

    private static func render(_ template: Template, variant: String, platform: Platform, renderer: TemplateRenderer) -> Result<
        Rendered, Problem
    > {
        var rendered = Rendered(body: "", headers: [:], isLegacyFCM: false, collapseVariant: variant)
        do {
            rendered.body = try renderer.render(template.body, as: platform == .wns ? .xml : .json)
            for (name, value) in template.headers ?? [:] { rendered.headers[name] = try renderer.render(value: value) }
            if let expiry = template.expiry {
                let text = try renderer.render(value: expiry)
                if platform == .apns, !text.isEmpty {
                    guard let seconds = Template.expirationSeconds(text) else {
                        return .failure(Problem(description: "template expiry: \(text.prefix(64)) is not a time from 1970 to 9999"))
                    }
                    rendered.headers["apns-expiration"] = String(seconds)
                }
            }
        } catch {
            return .failure(Problem(description: "template: \(error)"))
        }
        if platform == .fcm, let object = JSONLimits.dictionary(Data(rendered.body.utf8)), object["message"] == nil {
            rendered.isLegacyFCM = true
        }
        return .success(rendered)
    }
}
