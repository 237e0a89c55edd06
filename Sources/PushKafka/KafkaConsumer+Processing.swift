import Logging
import ServiceLifecycle
import Synchronization

/// A failure that will happen again the same way for this record (it breaks a limit, the
/// store refuses the query for its shape): processing gives up on the record at once.
public struct PermanentFailure: Error, Sendable, CustomStringConvertible {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}

/// How long a record may keep failing with transient errors before it is given up: once it was
/// tried `attempts` times and `duration` has passed (both), so a short outage of the store or
/// Kafka is waited out rather than dead-lettering everything in flight. Backoff doubles from
/// `firstBackoff` to `maximumBackoff`.
public struct RetryBudget: Sendable {
    public var attempts = 10
    public var duration: Duration = .seconds(300)
    public var firstBackoff: Duration = .milliseconds(100)
    public var maximumBackoff: Duration = .seconds(10)

    public init(
        attempts: Int = 10, duration: Duration = .seconds(300), firstBackoff: Duration = .milliseconds(100), maximumBackoff: Duration = .seconds(10)
    ) {
        self.attempts = attempts
        self.duration = duration
        self.firstBackoff = firstBackoff
        self.maximumBackoff = maximumBackoff
    }
}

/// A record let into processing: what its work needs, and what frees its room once it ends.
public struct AdmittedRecord<Item: Sendable>: Sendable {
    public var item: Item
    public var release: @Sendable () async -> Void

    public init(_ item: Item, release: @escaping @Sendable () async -> Void = {}) {
        self.item = item
        self.release = release
    }
}

/// Thrown by a processing body whose work is done and kept, when only publishing it failed
/// (Kafka away): retried with backoff for as long as it takes, never counted against the
/// budget, since giving the record up would throw finished work away.
public struct PublishPending: Error, Sendable, CustomStringConvertible {
    public var underlying: any Error
    public init(_ underlying: any Error) { self.underlying = underlying }
    public var description: String { "publishing finished work: \(underlying)" }
}

/// Thrown by a processing body that leaves its record for the partition's next owner (shutdown
/// came before it could finish): the record is neither retried nor marked done.
public struct RecordLeftUnfinished: Error, Sendable {
    public init() {}
}

extension KafkaConsumer {
    /// Runs `body` on each record until graceful shutdown, at most `maximum` records at a time.
    /// See the other `processEach`, which this one is with one slot per record as admission.
    public func processEach(
        maximum: Int = 1, budget: RetryBudget = RetryBudget(), logger: Logger,
        giveUp: @escaping @Sendable (KafkaRecord, String) async throws -> Void,
        _ body: @escaping @Sendable (KafkaRecord) async throws -> Void
    ) async {
        let slots = AdmissionSlots(maximum)
        await processEach(
            budget: budget, logger: logger,
            admit: { _ in
                await slots.take()
                return AdmittedRecord((), release: { await slots.give() })
            },
            giveUp: { record, _, reason in try await giveUp(record, reason) }, { record, _ in try await body(record) })
    }

    /// Runs `body` on each record until graceful shutdown and marks a record done only after it
    /// was handled (offsets are committed only past records that are all done, so completion
    /// out of order is safe).
    ///
    /// Each record passes `admit` first, one at a time in offset order: it waits there while the
    /// caller has no room (and may pause the partitions meanwhile), and returns what the
    /// record's work needs, with what frees its room when the record ends.
    ///
    /// A `body` that throws `PermanentFailure`, or keeps throwing past `budget`, hands the
    /// record to `giveUp` with the reason (which dead-letters it), so no record holds its
    /// partition for ever; other errors are retried with capped backoff. A `giveUp` that
    /// throws (Kafka away) is retried the same way. A body that throws `PublishPending` is
    /// retried without a budget. A body or give-up that throws `RecordLeftUnfinished`,
    /// or a task that is cancelled, leaves the record for the partition's next owner, never
    /// skipped. At graceful shutdown no new record is started and those started are finished.
    /// Repeated failures are logged at most once per 10 s per kind, with a count of those not
    /// logged.
    public func processEach<Item: Sendable>(
        budget: RetryBudget = RetryBudget(), logger: Logger,
        admit: @escaping @Sendable (KafkaRecord) async -> AdmittedRecord<Item>,
        giveUp: @escaping @Sendable (KafkaRecord, Item, String) async throws -> Void,
        _ body: @escaping @Sendable (KafkaRecord, Item) async throws -> Void
    ) async {
        let limiter = LogLimiter()
        await withDiscardingTaskGroup { group in
            for await record in records.cancelOnGracefulShutdown() {
                let admitted = await admit(record)
                group.addTask {
                    await self.process(record, admitted.item, budget: budget, limiter: limiter, logger: logger, giveUp: giveUp, body)
                    await admitted.release()
                }
            }
        }
    }

    /// `processEach`, with the records one poll fetched handed to `run` together: each run
    /// (records in offset order, their `weight`s summing to at most `maximumWeight`) goes to
    /// a task of its own, so work that costs per call (a flush to a PNS, a wait for Kafka's
    /// acknowledgement, a hand-over between threads) is paid once for many small records.
    ///
    /// A record whose `weight` is nil, and a run of one, go through `body` alone as in
    /// `processEach`. Records are admitted one at a time in offset order as there. `admit` is
    /// asked not to wait (`mayWait` false) while a run is pending: when it would, the run
    /// starts first, so a run never waits on room it holds itself.
    ///
    /// `run` says, for each of its records, whether it finished it: those are marked done at
    /// once; the others go through `body` alone, each in a task of its own, with the retries,
    /// budget and dead letters of `processEach`, so `body` must go on from where `run` left the
    /// record (and not do again what it did). A run that throws is taken apart the same way;
    /// one that throws `RecordLeftUnfinished` leaves all its records to the partition's next
    /// owner. After graceful shutdown began, the rest of a poll's records are not started.
    public func processInRuns<Item: Sendable>(
        maximumWeight: Int, budget: RetryBudget = RetryBudget(), logger: Logger,
        admit: @escaping @Sendable (KafkaRecord, _ mayWait: Bool) async -> AdmittedRecord<Item>?,
        weight: @escaping @Sendable (Item) -> Int?,
        giveUp: @escaping @Sendable (KafkaRecord, Item, String) async throws -> Void,
        run: @escaping @Sendable ([(record: KafkaRecord, item: Item)]) async throws -> [Bool],
        _ body: @escaping @Sendable (KafkaRecord, Item) async throws -> Void
    ) async {
        let limiter = LogLimiter()
        await withDiscardingTaskGroup { group in
            for await records in recordGroups(maximum: configuration.fetchBatchSize).cancelOnGracefulShutdown() {
                var pending: [(record: KafkaRecord, admitted: AdmittedRecord<Item>)] = []
                var pendingWeight = 0
                /// Starts the pending run, if any, in a task of its own.
                func startPending() {
                    guard !pending.isEmpty else { return }
                    let started = pending
                    group.addTask { await self.processRun(started, budget: budget, limiter: limiter, logger: logger, giveUp: giveUp, run: run, body) }
                    pending = []
                    pendingWeight = 0
                }
                for record in records {
                    if Task.isShuttingDownGracefully || Task.isCancelled { break }
                    var admission = await admit(record, pending.isEmpty)
                    if admission == nil {
                        // No room now: what is pending starts before this record waits for room.
                        startPending()
                        admission = await admit(record, true)
                    }
                    guard let admitted = admission else { continue }
                    guard let weight = weight(admitted.item) else {
                        group.addTask {
                            await self.process(record, admitted.item, budget: budget, limiter: limiter, logger: logger, giveUp: giveUp, body)
                            await admitted.release()
                        }
                        continue
                    }
                    if pendingWeight + weight > maximumWeight { startPending() }
                    pending.append((record, admitted))
                    pendingWeight += weight
                    // A full run starts at once, not after the next record's admission.
                    if pendingWeight >= maximumWeight { startPending() }
                }
                startPending()
            }
        }
    }

    private func processRun<Item: Sendable>(
        _ records: [(record: KafkaRecord, admitted: AdmittedRecord<Item>)], budget: RetryBudget, limiter: LogLimiter, logger: Logger,
        giveUp: @escaping @Sendable (KafkaRecord, Item, String) async throws -> Void,
        run: @escaping @Sendable ([(record: KafkaRecord, item: Item)]) async throws -> [Bool],
        _ body: @escaping @Sendable (KafkaRecord, Item) async throws -> Void
    ) async {
        var finished = Array(repeating: false, count: records.count)
        if records.count > 1, !Task.isCancelled {
            do {
                let said = try await run(records.map { ($0.record, $0.admitted.item) })
                if said.count == records.count { finished = said }
            } catch is RecordLeftUnfinished {
                for each in records { await each.admitted.release() }
                return
            } catch {
                Self.logTakenApart("run", topic: records[0].record.topic, count: records.count, error: error, limiter: limiter, logger: logger)
            }
        }
        for (each, done) in zip(records, finished) where done {
            markDone(each.record)
            await each.admitted.release()
        }
        // The rest alone, side by side: one that waits (a retry, Kafka away) holds no other.
        await withDiscardingTaskGroup { group in
            for (each, done) in zip(records, finished) where !done {
                group.addTask {
                    await self.process(each.record, each.admitted.item, budget: budget, limiter: limiter, logger: logger, giveUp: giveUp, body)
                    await each.admitted.release()
                }
            }
        }
    }

    /// Runs `body` on groups of records (at most `maximum`, those one poll fetched) one group
    /// at a time until graceful shutdown, so work that costs per call (a store transaction) is
    /// paid once per group. A group that fails in any way is taken apart: each of its records
    /// goes through `body` alone, with the retries, budget and dead letters of `processEach`,
    /// so one bad record costs its group a second pass, never its neighbours.
    public func processGroups(
        maximum: Int, budget: RetryBudget = RetryBudget(), logger: Logger,
        giveUp: @escaping @Sendable (KafkaRecord, String) async throws -> Void,
        _ body: @escaping @Sendable ([KafkaRecord]) async throws -> Void
    ) async {
        let limiter = LogLimiter()
        for await group in recordGroups(maximum: maximum).cancelOnGracefulShutdown() {
            if group.count > 1 {
                do {
                    try await body(group)
                    for record in group { markDone(record) }
                    continue
                } catch {
                    if Task.isCancelled { return }
                    Self.logTakenApart("group", topic: group[0].topic, count: group.count, error: error, limiter: limiter, logger: logger)
                }
            }
            for record in group {
                await process(
                    record, (), budget: budget, limiter: limiter, logger: logger, giveUp: { record, _, reason in try await giveUp(record, reason) },
                    { record, _ in try await body([record]) })
            }
        }
    }

    /// Says, at most once per interval for each kind, that a group or run of records failed
    /// and is taken apart.
    private static func logTakenApart(_ kind: String, topic: String, count: Int, error: any Error, limiter: LogLimiter, logger: Logger) {
        guard let suppressed = limiter.shouldLog("\(topic) \(kind) taken apart \(type(of: error))") else { return }
        logger.debug(
            "a \(kind) of records failed; each is processed alone",
            metadata: [
                "kafka.topic": "\(topic)", "pushhub.records": "\(count)", "pushhub.error": "\(error)", "pushhub.not_logged": "\(suppressed)",
            ])
    }

    private func process<Item: Sendable>(
        _ record: KafkaRecord, _ item: Item, budget: RetryBudget, limiter: LogLimiter, logger: Logger,
        giveUp: @Sendable (KafkaRecord, Item, String) async throws -> Void, _ body: @Sendable (KafkaRecord, Item) async throws -> Void
    ) async {
        var delay = budget.firstBackoff
        let clock = ContinuousClock()
        let started = clock.now
        var attempts = 0
        var givingUp: String?
        while !Task.isCancelled {
            do {
                if let reason = givingUp {
                    try await giveUp(record, item, reason)
                } else {
                    attempts += 1
                    try await body(record, item)
                }
                markDone(record)
                return
            } catch is RecordLeftUnfinished {
                return
            } catch {
                if givingUp == nil, !(error is PublishPending) {
                    if let permanent = error as? PermanentFailure {
                        givingUp = permanent.reason
                        continue
                    }
                    if attempts >= budget.attempts && clock.now - started >= budget.duration {
                        givingUp = "gave up after \(attempts) attempts over \(clock.now - started): \(error)"
                        continue
                    }
                }
                let kind = givingUp == nil ? "record not processed, will retry" : "record could not be given up, will retry"
                if let suppressed = limiter.shouldLog("\(record.topic) \(kind) \(type(of: error))") {
                    logger.error(
                        "\(kind)",
                        metadata: [
                            "kafka.topic": "\(record.topic)", "kafka.offset": "\(record.offset)",
                            "pushhub.notification_id": "\(record.keyString ?? "")",
                            "pushhub.error": "\(error)", "pushhub.retry_in": "\(delay)", "pushhub.attempt": "\(attempts)",
                            "pushhub.not_logged": "\(suppressed)",
                        ])
                }
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, budget.maximumBackoff)
            }
        }
    }
}

/// A counting semaphore for records in flight; waiters are served in order.
actor AdmissionSlots {
    private var free: Int
    private var waiters: [CheckedContinuation<Void, Never>] = []

    init(_ count: Int) { free = max(1, count) }

    func take() async {
        if free > 0 {
            free -= 1
            return
        }
        await withCheckedContinuation { waiters.append($0) }
    }

    func give() {
        if waiters.isEmpty {
            free += 1
        } else {
            waiters.removeFirst().resume()
        }
    }
}

/// Lets one line per key through every `interval`, and counts those held back.
public final class LogLimiter: Sendable {
    private let interval: Duration
    private let state = Mutex<[String: (last: ContinuousClock.Instant, held: Int)]>([:])

    public init(interval: Duration = .seconds(10)) {
        self.interval = interval
    }

    /// The number of lines held back since the last one for `key` when this one may be
    /// logged; nil when it is to be held back.
    public func shouldLog(_ key: String) -> Int? {
        let now = ContinuousClock.now
        return state.withLock { entries in
            if let entry = entries[key], now - entry.last < interval {
                entries[key] = (entry.last, entry.held + 1)
                return nil
            }
            let held = entries[key]?.held ?? 0
            if entries.count > 1000 { entries.removeAll() }
            entries[key] = (now, 0)
            return held
        }
    }
}
