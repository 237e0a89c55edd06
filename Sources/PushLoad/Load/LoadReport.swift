import Foundation
import Histogram
import PushModel
import PushOps

/// What a load run measured, as written to its JSON report; `html()` renders it with plots.
public struct LoadReport: Codable, Sendable {
    /// A latency distribution in milliseconds (HdrHistogram, 3 significant digits).
    public struct Latency: Codable, Sendable, Equatable {
        public var count: Int
        public var mean: Double
        public var p50: Double
        public var p90: Double
        public var p99: Double
        public var p999: Double
        public var max: Double
        /// The whole distribution: value at each percentile, for plots.
        public var curve: [Point]

        public struct Point: Codable, Sendable, Equatable {
            public var percentile: Double
            public var ms: Double
        }

        static let curvePercentiles: [Double] = [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 97.5, 99, 99.5, 99.75, 99.9, 99.95, 99.99, 99.999, 100]

        init?(_ histogram: Histogram<UInt64>, unitsPerMillisecond: Double) {
            guard histogram.totalCount > 0 else { return nil }
            func ms(_ percentile: Double) -> Double { thousandths(Double(histogram.valueAtPercentile(percentile)) / unitsPerMillisecond) }
            count = Int(histogram.totalCount)
            mean = thousandths(histogram.mean / unitsPerMillisecond)
            p50 = ms(50)
            p90 = ms(90)
            p99 = ms(99)
            p999 = ms(99.9)
            max = thousandths(Double(histogram.max) / unitsPerMillisecond)
            let highest = max
            curve = Self.curvePercentiles.map { Point(percentile: $0, ms: $0 == 100 ? highest : ms($0)) }
        }
    }

    public struct Settings: Codable, Sendable {
        public var scenario: LoadScenario
        public var via: LoadVia
        public var url: String
        public var hub: String
        public var devices: Int
        public var users: Int
        public var prefix: String
        public var platforms: String
        public var tags: String
        public var rate: Double?
        public var duration: Double?
        public var audience: LoadAudience?
        public var format: LoadFormat?
        public var tagExpression: String?
        public var registerRate: Double?
        public var concurrency: Int
        public var drainTimeout: Double
    }

    public struct Sends: Codable, Sendable {
        public var attempted: Int
        public var accepted: Int
        public var failed: Int
        /// Accepted sends over the sending phase.
        public var acceptedPerSecond: Double
    }

    public struct Registrations: Codable, Sendable {
        public var attempted: Int
        public var succeeded: Int
        public var failed: Int
        public var perSecond: Double
    }

    public struct Results: Codable, Sendable {
        /// Targets the dispatcher reported for the accepted sends.
        public var expected: Int
        public var received: Int
        public var missing: Int
        /// Accepted sends whose dispatch summary never came.
        public var undispatchedSends: Int
        public var byOutcome: [String: Int]
        /// Delivered results over the time from the first send to the last result.
        public var deliveredPerSecond: Double
        /// Seconds from the first send to the last result.
        public var lastResultSeconds: Double?
        /// Whether every accepted send got all its results.
        public var complete: Bool
        /// Broadcast: seconds from the send until the hub API said Completed (every outcome recorded).
        public var outcomesRecordedSeconds: Double?
    }

    public var startedAt: Date
    /// The whole run, Kafka set-up and draining included.
    public var seconds: Double
    /// How long each phase (register, send) took.
    public var phaseSeconds: [String: Double]
    public var timedOut: Bool
    public var settings: Settings
    public var sends: Sends?
    public var registrations: Registrations?
    public var acceptLatencyMs: Latency?
    public var registerLatencyMs: Latency?
    /// From a send's acceptance to each target's result (the PNS's answer).
    public var endToEndLatencyMs: Latency?
    public var results: Results?
    /// Failures by kind, outcomes other than delivered among them.
    public var errors: [String: Int]
    /// Counts per second of the run.
    public var timeline: [Timeline.Second]
    /// Results per platform, when results came.
    public var platforms: [PlatformResults]?

    /// One platform's results.
    public struct PlatformResults: Codable, Sendable {
        public var platform: String
        public var results: Int
        public var delivered: Int
        /// Deliveries over the span from the platform's first result to its last.
        public var deliveredPerSecond: Double
        public var endToEndLatencyMs: Latency?
    }

    /// Whether the run did what it set out to: no failed request, every result in, no time-out.
    public var passed: Bool { problems.isEmpty }

    /// What kept the run from passing, each as a sentence.
    public var problems: [String] {
        var problems: [String] = []
        let failed = (sends?.failed ?? 0) + (registrations?.failed ?? 0)
        if failed > 0 { problems.append("\(failed) request(s) failed") }
        if let results, !results.complete {
            problems.append("\(results.missing) result(s) missing, \(results.undispatchedSends) send(s) never dispatched")
        }
        if timedOut { problems.append("stopped at --timeout") }
        return problems
    }

    init(
        settings: LoadSettings, startedAt: Date, seconds: Double, phaseStart: Double, phaseSeconds: [String: Double],
        outcomesRecordedSeconds: Double? = nil, measurements m: LoadMeasurements, timedOut: Bool
    ) {
        let scenario = settings.scenario
        let sending = scenario != .register
        self.startedAt = startedAt
        self.seconds = thousandths(seconds)
        self.phaseSeconds = phaseSeconds.mapValues(thousandths)
        self.timedOut = timedOut
        self.settings = Settings(
            scenario: scenario, via: settings.via, url: settings.url, hub: settings.hub, devices: settings.population.devices,
            users: settings.population.users, prefix: settings.population.prefix, platforms: settings.population.platforms.description,
            tags: settings.population.tags.description,
            rate: [.send, .mixed].contains(scenario) ? settings.rate : nil, duration: [.send, .mixed].contains(scenario) ? settings.duration : nil,
            audience: scenario == .send ? settings.audience : nil, format: sending ? settings.format : nil,
            tagExpression: [.send, .mixed].contains(scenario) ? settings.tagExpression : nil,
            registerRate: [.register, .mixed].contains(scenario)
                ? (settings.registerRate ?? (scenario == .mixed ? max(1, settings.rate / 10) : nil)) : nil,
            concurrency: settings.concurrency, drainTimeout: settings.drainTimeout)
        let sendSeconds = phaseSeconds["send"] ?? 0
        sends =
            sending
            ? Sends(
                attempted: m.sendsAttempted, accepted: m.sendsAccepted, failed: m.sendsFailed,
                acceptedPerSecond: Self.rate(m.sendsAccepted, sendSeconds)) : nil
        let registerSeconds = phaseSeconds["register"] ?? sendSeconds
        registrations =
            m.registrationsAttempted > 0 || scenario == .register
            ? Registrations(
                attempted: m.registrationsAttempted, succeeded: m.registered, failed: m.registrationsFailed,
                perSecond: Self.rate(m.registered, registerSeconds))
            : nil
        acceptLatencyMs = Latency(m.acceptLatency, unitsPerMillisecond: 1000)
        registerLatencyMs = Latency(m.registerLatency, unitsPerMillisecond: 1000)
        endToEndLatencyMs = Latency(m.endToEnd, unitsPerMillisecond: 1)
        if sending {
            let last = m.lastResultAt.map { thousandths($0 - phaseStart) }
            results = Results(
                expected: m.expectedResults, received: m.results, missing: m.missingResults, undispatchedSends: m.undispatched, byOutcome: m.outcomes,
                deliveredPerSecond: Self.rate(m.outcomes["delivered"] ?? 0, last ?? 0), lastResultSeconds: last,
                complete: m.incomplete == 0, outcomesRecordedSeconds: outcomesRecordedSeconds.map(thousandths))
        }
        errors = m.errors
        timeline = m.timeline.seconds
        let measured = m.platforms.sorted { $0.key < $1.key }.map { name, p in
            PlatformResults(
                platform: name, results: p.results, delivered: p.delivered,
                deliveredPerSecond: Self.rate(p.delivered, max(1, (p.lastResultAt ?? 0) - (p.firstResultAt ?? 0))),
                endToEndLatencyMs: Latency(p.endToEnd, unitsPerMillisecond: 1))
        }
        platforms = measured.isEmpty ? nil : measured
    }

    static func rate(_ count: Int, _ seconds: Double) -> Double {
        seconds > 0 ? (Double(count) / seconds * 10).rounded() / 10 : 0
    }

    public func json() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        return try encoder.encode(self)
    }

    /// A short summary for the terminal.
    public func summary() -> String {
        var lines = [
            "\(settings.scenario.rawValue) against \(settings.url) (hub \(settings.hub), via \(settings.via.rawValue)): \(Format.number(seconds)) s"
        ]
        if let registrations {
            lines.append(
                "registrations: \(registrations.succeeded) of \(registrations.attempted) (\(Format.number(registrations.perSecond))/s), \(registrations.failed) failed"
            )
        }
        if let latency = registerLatencyMs { lines.append("registration latency: " + latency.line) }
        if let sends {
            lines.append(
                "sends: \(sends.accepted) of \(sends.attempted) accepted (\(Format.number(sends.acceptedPerSecond))/s), \(sends.failed) failed")
        }
        if let latency = acceptLatencyMs { lines.append("accept latency: " + latency.line) }
        if let results {
            let outcomes = results.byOutcome.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            lines.append(
                "results: \(results.received) of \(results.expected) (\(outcomes.isEmpty ? "none" : outcomes)), \(Format.number(results.deliveredPerSecond)) delivered/s, last after \(results.lastResultSeconds.map { Format.number($0) } ?? "-") s"
                    + (results.complete ? "" : "; INCOMPLETE: \(results.missing) missing, \(results.undispatchedSends) sends never dispatched"))
        }
        if let latency = endToEndLatencyMs { lines.append("end-to-end latency: " + latency.line) }
        if let recorded = results?.outcomesRecordedSeconds {
            lines.append("outcomes recorded (hub API: Completed) after \(Format.number(recorded)) s")
        }
        for (kind, count) in errors.sorted(by: { $0.value > $1.value }).prefix(10) { lines.append("error: \(count) × \(kind)") }
        if timedOut { lines.append("stopped at --timeout") }
        return lines.joined(separator: "\n")
    }
}

extension LoadReport.Latency {
    var line: String {
        "p50 \(Format.number(p50)) ms, p90 \(Format.number(p90)) ms, p99 \(Format.number(p99)) ms, p99.9 \(Format.number(p999)) ms, max \(Format.number(max)) ms (\(count))"
    }
}

/// Figures in the reports keep three decimals.
func thousandths(_ value: Double) -> Double { (value * 1000).rounded() / 1000 }

enum Format {
    static func number(_ value: Double) -> String { LineChart.number(value) }

    /// Text for HTML and SVG: the XML escaping templates use.
    static func escape(_ text: String) -> String { TemplateRenderer.escapeXML(text) }
}

/// The line printed each second while a run goes on.
enum ProgressLine {
    static func render(_ now: LoadMeasurements, previous: LoadMeasurements, seconds: Double, interval: Double) -> String {
        func perSecond(_ current: Int, _ before: Int) -> String { interval > 0 ? Format.number(Double(current - before) / interval) : "-" }
        let delivered = now.outcomes["delivered"] ?? 0
        var parts = [String(format: "[%6.1fs]", seconds)]
        if now.registrationsAttempted > 0 {
            parts.append("registered \(now.registered) (\(perSecond(now.registered, previous.registered))/s)")
        }
        if now.sendsAttempted > 0 {
            parts.append("sends \(now.sendsAccepted)/\(now.sendsAttempted) (\(perSecond(now.sendsAccepted, previous.sendsAccepted))/s)")
            parts.append(
                "results \(now.results)/\(now.expectedResults) delivered \(delivered) (\(perSecond(delivered, previous.outcomes["delivered"] ?? 0))/s)"
            )
        }
        if now.acceptLatency.totalCount > 0 { parts.append("accept p99 \(Format.number(Double(now.acceptLatency.valueAtPercentile(99)) / 1000)) ms") }
        if now.endToEnd.totalCount > 0 { parts.append("e2e p99 \(now.endToEnd.valueAtPercentile(99)) ms") }
        parts.append("errors \(now.errors.values.reduce(0, +))")
        return parts.joined(separator: "  ")
    }
}
