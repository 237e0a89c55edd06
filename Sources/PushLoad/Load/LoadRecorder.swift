import Foundation
import Histogram
import PushModel
import Synchronization

/// Everything a load run measures, from any task: sends and registrations as they are answered,
/// and results as they arrive from `pushhub.results`. Times are seconds since the run started.
public final class LoadRecorder: Sendable {
    private let state: Mutex<LoadMeasurements>
    private let started = ContinuousClock.now

    public init() { state = Mutex(LoadMeasurements()) }

    /// Seconds since the run started.
    public func now() -> Double { (ContinuousClock.now - started).seconds }

    /// A send the hub accepted (HTTP 201, or Kafka's acknowledgement), `latency` seconds after it
    /// was due: the schedule's time, so a slow answer delays the sends behind it without hiding.
    public func sendAccepted(notificationId: String, latency: Double) {
        let at = now()
        state.withLock { state in
            state.sendsAttempted += 1
            state.sendsAccepted += 1
            state.acceptLatency.recordMicroseconds(latency)
            state.timeline.add(at) { $0.accepted += 1 }
            state.track(notificationId, at: at)
        }
    }

    public func sendFailed(kind: String) {
        let at = now()
        state.withLock { state in
            state.sendsAttempted += 1
            state.sendsFailed += 1
            state.errors[kind, default: 0] += 1
            state.timeline.add(at) { $0.errors[kind, default: 0] += 1 }
        }
    }

    public func registered(latency: Double) {
        let at = now()
        state.withLock { state in
            state.registrationsAttempted += 1
            state.registered += 1
            state.registerLatency.recordMicroseconds(latency)
            state.timeline.add(at) { $0.registered += 1 }
        }
    }

    public func registrationFailed(kind: String) {
        let at = now()
        state.withLock { state in
            state.registrationsAttempted += 1
            state.registrationsFailed += 1
            state.errors[kind, default: 0] += 1
            state.timeline.add(at) { $0.errors[kind, default: 0] += 1 }
        }
    }

    /// A record of `pushhub.results`; results of notifications this run did not send are
    /// ignored, those that come before their send's answer wait for it.
    public func result(_ batch: ResultSummary) {
        let at = now()
        state.withLock { state in state.apply(batch, at: at) }
    }

    /// Whether every accepted send has all its results (or was rejected).
    public var isComplete: Bool { state.withLock { $0.incomplete == 0 } }

    /// What was measured so far. Without `perNotification` the per-send tracking is left out,
    /// which makes the copy cheap (the progress line takes one every second).
    public func snapshot(perNotification: Bool = true) -> LoadMeasurements {
        state.withLock { state in
            var copy = state
            copy.closeSecond()
            if !perNotification {
                copy.notifications = [:]
                copy.early = [:]
            }
            return copy
        }
    }
}

/// What a load run has measured so far.
public struct LoadMeasurements: Sendable {
    /// From when a send was due to its acceptance, in microseconds.
    public var acceptLatency = Histogram<UInt64>(highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: .three)
    /// From when a registration was due to its answer, in microseconds.
    public var registerLatency = Histogram<UInt64>(highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: .three)
    /// From a send's acceptance to a target's result (the PNS's answer), in milliseconds.
    public var endToEnd = Histogram<UInt64>(highestTrackableValue: 3_600_000, numberOfSignificantValueDigits: .three)
    public var sendsAttempted = 0
    public var sendsAccepted = 0
    public var sendsFailed = 0
    public var registrationsAttempted = 0
    public var registered = 0
    public var registrationsFailed = 0
    /// Results by outcome.
    public var outcomes: [String: Int] = [:]
    /// Failures by kind: HTTP statuses, transport errors, and outcomes other than delivered with
    /// the PNS's reason.
    public var errors: [String: Int] = [:]
    public var timeline = Timeline()
    /// Per platform (as results name it): results, deliveries and end-to-end latency.
    public var platforms: [String: PlatformMeasurements] = [:]
    /// End-to-end latencies of the results of the second `openSecond`, for its percentiles.
    var secondLatency = Histogram<UInt64>(highestTrackableValue: 3_600_000, numberOfSignificantValueDigits: .two)
    var openSecond: Int?
    /// Targets the dispatcher reported for the sends so far.
    public var expectedResults = 0
    public var results = 0
    public var firstResultAt: Double?
    public var lastResultAt: Double?
    /// Accepted sends still waiting for their dispatch summary or some results.
    public var incomplete = 0

    struct Tracked {
        var expected: Int?
        var received = 0
        var rejected = false
        var isComplete: Bool { rejected || expected.map { received >= $0 } ?? false }
    }

    var notifications: [String: Tracked] = [:]
    /// Results for ids not (yet) known: kept until their send is answered, dropped after a minute.
    var early: [String: [(batch: ResultSummary, at: Double)]] = [:]

    mutating func track(_ id: String, at: Double) {
        guard notifications[id] == nil else { return }
        notifications[id] = Tracked()
        firstAccepted = firstAccepted ?? id
        incomplete += 1
        if let waiting = early.removeValue(forKey: id) {
            for (batch, arrived) in waiting { apply(batch, at: arrived) }
        }
    }

    mutating func apply(_ batch: ResultSummary, at: Double) {
        guard var tracked = notifications[batch.notificationId] else {
            early[batch.notificationId, default: []].append((batch, at))
            if early.count > 10_000 { early = early.filter { $0.value.contains { at - $0.at < 60 } } }
            return
        }
        let wasComplete = tracked.isComplete
        if let dispatched = batch.dispatched {
            let total = dispatched.values.reduce(0, +)
            tracked.expected = (tracked.expected ?? 0) + total
            expectedResults += total
        }
        if let results = batch.results {
            let second = Timeline.index(at)
            if let open = openSecond, second > open { closeSecond() }
            openSecond = max(openSecond ?? second, second)
            var platform = batch.platform.map { platforms[$0] ?? PlatformMeasurements() }
            var failures: [String: Int] = [:]
            for result in results {
                tracked.received += 1
                self.results += 1
                outcomes[result.outcome, default: 0] += 1
                if result.outcome == "rejected" {
                    tracked.rejected = true
                } else {
                    let ms = UInt64(max(0, result.dwellMs))
                    endToEnd.recordClamped(ms)
                    secondLatency.recordClamped(ms)
                    platform?.endToEnd.recordClamped(ms)
                }
                if result.outcome != "delivered" {
                    errors["outcome \(result.outcome)" + (result.pnsReason.map { " (\($0))" } ?? ""), default: 0] += 1
                    failures["outcome \(result.outcome)", default: 0] += 1
                }
            }
            let delivered = results.count { $0.outcome == "delivered" }
            timeline.add(at) {
                $0.results += results.count
                $0.delivered += delivered
                $0.errors.merge(failures, uniquingKeysWith: +)
            }
            if var measured = platform, let name = batch.platform {
                measured.results += results.count
                measured.delivered += delivered
                measured.firstResultAt = measured.firstResultAt ?? at
                measured.lastResultAt = at
                platform = measured
                platforms[name] = measured
            }
            firstResultAt = firstResultAt ?? at
            lastResultAt = at
        }
        notifications[batch.notificationId] = tracked
        if !wasComplete && tracked.isComplete { incomplete -= 1 }
    }

    /// Writes the open second's end-to-end percentiles into the timeline.
    mutating func closeSecond() {
        guard let open = openSecond, secondLatency.totalCount > 0 else { return }
        let p50 = Double(secondLatency.valueAtPercentile(50)), p99 = Double(secondLatency.valueAtPercentile(99))
        timeline.add(Double(open)) {
            $0.endToEndP50Ms = p50
            $0.endToEndP99Ms = p99
        }
        secondLatency.reset()
        openSecond = nil
    }

    /// The first send accepted: the broadcast's.
    public var firstAccepted: String?

    /// Results still missing from sends whose dispatch summary came.
    public var missingResults: Int { notifications.values.reduce(0) { $0 + max(0, ($1.expected ?? $1.received) - $1.received) } }
    /// Accepted sends whose dispatch summary never came.
    public var undispatched: Int { notifications.values.count { $0.expected == nil && !$0.rejected } }
}

/// What one platform's results came to.
public struct PlatformMeasurements: Sendable {
    public var results = 0
    public var delivered = 0
    public var firstResultAt: Double?
    public var lastResultAt: Double?
    /// From a send's acceptance to the target's result, in milliseconds.
    public var endToEnd = Histogram<UInt64>(highestTrackableValue: 3_600_000, numberOfSignificantValueDigits: .three)
}

/// Counts per second of the run.
public struct Timeline: Sendable {
    public struct Second: Sendable, Codable, Equatable {
        public var second: Int
        public var accepted = 0
        public var registered = 0
        public var results = 0
        public var delivered = 0
        /// End-to-end latency of the second's results, when it had any.
        public var endToEndP50Ms: Double?
        public var endToEndP99Ms: Double?
        /// Failed requests and results other than delivered, by kind.
        public var errors: [String: Int] = [:]

        init(second: Int) { self.second = second }
    }

    public private(set) var seconds: [Second] = []

    static func index(_ at: Double) -> Int { min(max(0, Int(at)), 24 * 3600) }

    mutating func add(_ at: Double, _ change: (inout Second) -> Void) {
        let index = Self.index(at)
        while seconds.count <= index { seconds.append(Second(second: seconds.count)) }
        change(&seconds[index])
    }
}

/// The parts of a ResultBatch a load run reads; decoding skips the rest.
public struct ResultSummary: Decodable, Sendable {
    public struct Entry: Decodable, Sendable {
        public var outcome: String
        public var pnsReason: String?
        public var dwellMs: Int

        public init(outcome: String, pnsReason: String?, dwellMs: Int) {
            self.outcome = outcome
            self.pnsReason = pnsReason
            self.dwellMs = dwellMs
        }
    }

    public var notificationId: String
    /// The platform whose results these are (absent on a dispatch summary).
    public var platform: String?
    public var dispatched: [String: Int]?
    public var results: [Entry]?

    public init(notificationId: String, platform: String? = nil, dispatched: [String: Int]? = nil, results: [Entry]? = nil) {
        self.notificationId = notificationId
        self.platform = platform
        self.dispatched = dispatched
        self.results = results
    }
}

extension Histogram<UInt64> {
    mutating func recordMicroseconds(_ seconds: Double) {
        recordClamped(UInt64(Swift.max(0, (seconds * 1_000_000).rounded())))
    }

    /// Records `value`, or the highest trackable value for anything above it.
    mutating func recordClamped(_ value: UInt64) {
        if !record(value) { _ = record(highestTrackableValue) }
    }
}
