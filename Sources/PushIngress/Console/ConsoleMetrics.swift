import Foundation
import PushMetrics
import PushModel
import PushOps
import PushProviders
import Synchronization

/// The figures the console's overview and live charts show, read from the processes' own
/// metrics: this process's registry, and the `/metrics` endpoints configured in
/// `console.metrics`. Samples are taken when a page asks, at most one every two seconds,
/// and the last ten minutes are kept.
final class ConsoleMetrics: Sendable {
    /// What one reading of every endpoint held.
    struct Sample: Sendable {
        var at: Date
        /// `pushhub_deliveries_total`, summed by platform.
        var deliveries: [String: Double] = [:]
        /// `pushhub_pns_request_duration_seconds_bucket`, summed by platform and upper bound.
        var latencyBuckets: [String: [Double: Double]] = [:]
        /// `pushhub_kafka_consumer_lag`, summed by topic.
        var lag: [String: Double] = [:]
        /// Endpoints that did not answer, with why.
        var unreachable: [String] = []
    }

    let endpoints: [String]
    private let registry: MetricsRegistry
    private let http: PNSHTTPClient?
    /// One client for the process, made when a console first reads another process: it lives
    /// as long as the process (a client must be shut down before it goes).
    static let client = PNSHTTPClient(connections: 1, maximumInFlight: 16, requestTimeout: .seconds(2), connectTimeout: .seconds(1))
    private let samples = Mutex<[Sample]>([])
    /// One reading at a time: a page that asks meanwhile gets the samples there are.
    private let sampling = Mutex(false)
    /// Samples are this far apart at least.
    static let spacing: TimeInterval = 2
    static let kept = 300

    init(endpoints: [String], registry: MetricsRegistry = .shared) {
        self.endpoints = endpoints
        self.registry = registry
        http = endpoints.isEmpty ? nil : Self.client
    }

    /// The samples so far, a new one taken first when the last is old enough.
    func current(now: Date = Date()) async -> [Sample] {
        if let last = samples.withLock({ $0.last }), now.timeIntervalSince(last.at) < Self.spacing {
            return samples.withLock { $0 }
        }
        let first = sampling.withLock { busy in
            defer { busy = true }
            return !busy
        }
        guard first else { return samples.withLock { $0 } }
        defer { sampling.withLock { $0 = false } }
        var sample = Sample(at: now)
        Self.add(registry.render(), to: &sample)
        if let http {
            await withTaskGroup(of: (String, Result<String, any Error>).self) { group in
                for endpoint in endpoints {
                    group.addTask {
                        do {
                            let answer = try await http.send(.GET, endpoint, headers: [], body: nil, bodyLimit: Self.bodyLimit)
                            guard answer.status == 200 else { return (endpoint, .failure(EndpointFailure(description: "HTTP \(answer.status)"))) }
                            return (endpoint, .success(String(decoding: answer.body, as: UTF8.self)))
                        } catch {
                            return (endpoint, .failure(error))
                        }
                    }
                }
                for await (endpoint, result) in group {
                    switch result {
                    case .success(let text): Self.add(text, to: &sample)
                    case .failure: sample.unreachable.append(endpoint)
                    }
                }
            }
        }
        return samples.withLock { samples in
            // Another request may have sampled meanwhile: the newer one stays.
            if let last = samples.last, last.at >= sample.at { return samples }
            samples.append(sample)
            if samples.count > Self.kept { samples.removeFirst(samples.count - Self.kept) }
            return samples
        }
    }

    struct EndpointFailure: Error, CustomStringConvertible {
        var description: String
    }

    static let bodyLimit = 4 << 20
    /// Lines of one exposition read at most.
    static let lineLimit = 200_000
    /// A figure past this (or not finite) is not one PushHub wrote: it is skipped, so no sum
    /// overflows and no chart is asked to draw it.
    static let valueLimit = 1e15
    /// Topics kept per sample at most.
    static let topicLimit = 64
    static let platforms = Set(Platform.allCases.map(\.rawValue))

    /// Adds what the Prometheus text `text` says of the families the console reads. Lines it
    /// cannot read are skipped: an endpoint is another process, and its text is not trusted.
    static func add(_ text: String, to sample: inout Sample) {
        var lines = 0
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            lines += 1
            guard lines <= lineLimit else { return }
            guard
                line.hasPrefix("pushhub_deliveries_total") || line.hasPrefix("pushhub_pns_request_duration_seconds_bucket")
                    || line.hasPrefix("pushhub_kafka_consumer_lag"), let parsed = parse(line), parsed.value >= 0, parsed.value < valueLimit
            else { continue }
            switch parsed.name {
            case "pushhub_deliveries_total":
                // Platforms PushHub has only: a label is another process's text.
                guard let platform = parsed.labels["platform"], platforms.contains(platform) else { continue }
                sample.deliveries[platform] = min((sample.deliveries[platform] ?? 0) + parsed.value, valueLimit)
            case "pushhub_pns_request_duration_seconds_bucket":
                guard let platform = parsed.labels["platform"], platforms.contains(platform),
                    let bound = parsed.labels["le"].flatMap({ $0 == "+Inf" ? Double.infinity : Double($0) }), bound >= 0,
                    bound == .infinity || bound < 3_600
                else { continue }
                var buckets = sample.latencyBuckets[platform] ?? [:]
                guard buckets[bound] != nil || buckets.count < 64 else { continue }
                buckets[bound] = min((buckets[bound] ?? 0) + parsed.value, valueLimit)
                sample.latencyBuckets[platform] = buckets
            case "pushhub_kafka_consumer_lag":
                guard let topic = parsed.labels["topic"], topic.utf8.count <= 249, sample.lag[topic] != nil || sample.lag.count < topicLimit
                else { continue }
                sample.lag[topic] = min((sample.lag[topic] ?? 0) + parsed.value, valueLimit)
            default: continue
            }
        }
    }

    /// `name{a="1",b="2"} value`: at most 16 labels, a line of at most 2,048 bytes.
    static func parse(_ line: Substring) -> (name: String, labels: [String: String], value: Double)? {
        guard line.utf8.count <= 2_048 else { return nil }
        var labels: [String: String] = [:]
        let name: Substring
        let rest: Substring
        if let brace = line.firstIndex(of: "{") {
            name = line[..<brace]
            guard let close = line.lastIndex(of: "}"), close > brace else { return nil }
            var inside = line[line.index(after: brace)..<close]
            while !inside.isEmpty {
                guard labels.count < 16, let equals = inside.firstIndex(of: "="), inside[inside.index(after: equals)...].first == "\"" else {
                    return nil
                }
                let key = String(inside[..<equals])
                var value = ""
                var index = inside.index(equals, offsetBy: 2)
                var closed = false
                while index < inside.endIndex {
                    let character = inside[index]
                    if character == "\\" {
                        index = inside.index(after: index)
                        guard index < inside.endIndex else { return nil }
                        value.append(inside[index] == "n" ? "\n" : inside[index])
                    } else if character == "\"" {
                        closed = true
                        break
                    } else {
                        value.append(character)
                    }
                    index = inside.index(after: index)
                }
                guard closed else { return nil }
                labels[key] = value
                inside = inside[inside.index(after: index)...]
                if inside.first == "," { inside = inside.dropFirst() }
            }
            rest = line[line.index(after: close)...]
        } else {
            guard let space = line.firstIndex(of: " ") else { return nil }
            name = line[..<space]
            rest = line[space...]
        }
        guard let valueText = rest.split(separator: " ").first, let value = Double(valueText), value.isFinite else { return nil }
        return (String(name), labels, value)
    }

    /// Deliveries per second by platform, between each two samples.
    static func rates(_ samples: [Sample]) -> [String: [(Double, Double)]] {
        var series: [String: [(Double, Double)]] = [:]
        guard let start = samples.first?.at else { return series }
        for (before, after) in zip(samples, samples.dropFirst()) {
            let seconds = after.at.timeIntervalSince(before.at)
            guard seconds > 0 else { continue }
            for (platform, count) in after.deliveries {
                let rate = max(0, count - (before.deliveries[platform] ?? 0)) / seconds
                series[platform, default: []].append((after.at.timeIntervalSince(start), rate))
            }
        }
        return series
    }

    /// A latency percentile (in milliseconds) by platform, between each two samples, from the
    /// histograms' bucket counts; nothing for an interval without requests.
    static func percentiles(_ samples: [Sample], quantile: Double) -> [String: [(Double, Double)]] {
        var series: [String: [(Double, Double)]] = [:]
        guard let start = samples.first?.at else { return series }
        for (before, after) in zip(samples, samples.dropFirst()) {
            for (platform, buckets) in after.latencyBuckets {
                let earlier = before.latencyBuckets[platform] ?? [:]
                let counts = buckets.map { ($0.key, max(0, $0.value - (earlier[$0.key] ?? 0))) }.sorted { $0.0 < $1.0 }
                guard let total = counts.last?.1, total > 0 else { continue }
                let rank = quantile * total
                var lowerBound = 0.0
                var lowerCount = 0.0
                for (bound, count) in counts {
                    if count >= rank {
                        // Linear within the bucket, as Prometheus's histogram_quantile does; the
                        // open last bucket answers its lower bound.
                        let upper = bound.isFinite ? bound : lowerBound
                        let share = count > lowerCount ? (rank - lowerCount) / (count - lowerCount) : 1
                        series[platform, default: []].append((after.at.timeIntervalSince(start), (lowerBound + (upper - lowerBound) * share) * 1_000))
                        break
                    }
                    lowerBound = bound
                    lowerCount = count
                }
            }
        }
        return series
    }

    static let colors = ["#0b5394", "#b3261e", "#1b5e20", "#6a1b9a", "#8a4b00", "#00695c", "#37474f", "#ad1457", "#283593"]

    /// The live charts as inline SVG: deliveries per second, and p50 and p99 PNS latency.
    static func charts(_ samples: [Sample]) -> [String] {
        let span = max(samples.last.map { $0.at.timeIntervalSince(samples[0].at) } ?? 0, 10)
        let ticks = LineChart.ticks(upTo: span).map { ($0, LineChart.number($0)) }
        func chart(_ title: String, _ unit: String, _ series: [String: [(Double, Double)]]) -> String {
            let lines = series.sorted { $0.key < $1.key }.enumerated().map { index, entry in
                LineChart.Series(name: entry.key.isEmpty ? "all" : entry.key, color: colors[index % colors.count], points: entry.value)
            }
            return LineChart(title: title, xLabel: "seconds since the first sample", yLabel: unit, series: lines, xTicks: ticks).svg()
        }
        return [
            chart("Deliveries per second by platform", "per second", rates(samples)),
            chart("PNS latency p50 by platform", "ms", percentiles(samples, quantile: 0.5)),
            chart("PNS latency p99 by platform", "ms", percentiles(samples, quantile: 0.99)),
        ]
    }
}
