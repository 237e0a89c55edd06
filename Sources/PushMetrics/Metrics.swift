import Foundation
import PushModel
import Synchronization

/// PushHub's metrics, in the Prometheus text format (0.0.4): counters, gauges and histograms,
/// each a family of series told apart by labels. One registry per process (`shared`); series
/// are made once and kept by their users, so the hot path is one atomic add.
public final class MetricsRegistry: Sendable {
    public static let shared = MetricsRegistry()

    enum Kind: String, Sendable { case counter, gauge, histogram }

    struct Family: Sendable {
        var kind: Kind
        var help: String
        var series: [String: Series] = [:]
    }

    enum Series: Sendable {
        case counter(Counter)
        case gauge(Gauge)
        case histogram(Histogram)
    }

    private let families = Mutex<[String: Family]>([:])

    public init() {}

    public func counter(_ name: String, help: String, labels: [String: String] = [:]) -> Counter {
        series(name, .counter, help, labels) { .counter(Counter()) }.counter!
    }

    public func gauge(_ name: String, help: String, labels: [String: String] = [:]) -> Gauge {
        series(name, .gauge, help, labels) { .gauge(Gauge()) }.gauge!
    }

    /// `buckets` are upper bounds in seconds (or the unit the name says).
    public func histogram(_ name: String, help: String, labels: [String: String] = [:], buckets: [Double] = Histogram.latencyBuckets) -> Histogram {
        series(name, .histogram, help, labels) { .histogram(Histogram(buckets: buckets)) }.histogram!
    }

    private func series(_ name: String, _ kind: Kind, _ help: String, _ labels: [String: String], make: () -> Series) -> Series {
        let key = Self.labelText(labels)
        return families.withLock { families in
            var family = families[name] ?? Family(kind: kind, help: help)
            precondition(family.kind == kind, "metric \(name) registered as \(family.kind) and \(kind)")
            if let existing = family.series[key] { return existing }
            let made = make()
            family.series[key] = made
            families[name] = family
            return made
        }
    }

    /// The exposition text of every series.
    public func render() -> String {
        let snapshot = families.withLock { $0 }
        var text = ""
        for (name, family) in snapshot.sorted(by: { $0.key < $1.key }) {
            text += "# HELP \(name) \(family.help)\n# TYPE \(name) \(family.kind.rawValue)\n"
            for (labels, series) in family.series.sorted(by: { $0.key < $1.key }) {
                switch series {
                case .counter(let counter): text += "\(name)\(labels) \(counter.value)\n"
                case .gauge(let gauge): text += "\(name)\(labels) \(gauge.value)\n"
                case .histogram(let histogram): text += histogram.render(name: name, labels: labels)
                }
            }
        }
        return text
    }

    /// `{a="1",b="2"}`, names sorted, values escaped; empty without labels. The key a series is found by, looked up on every count,
    /// so it is built in one string without Foundation.
    static func labelText(_ labels: [String: String]) -> String {
        guard !labels.isEmpty else { return "" }
        var text = "{"
        for (index, label) in labels.sorted(by: { $0.key < $1.key }).enumerated() {
            if index > 0 { text += "," }
            text += label.key
            text += "=\""
            text += escape(label.value)
            text += "\""
        }
        text += "}"
        return text
    }

    /// A label value as the text format writes it: backslash, double quote and newline escaped.
    static func escape(_ value: String) -> String {
        guard value.utf8.contains(where: { $0 == UInt8(ascii: "\\") || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\n") }) else { return value }
        var escaped = ""
        escaped.reserveCapacity(value.utf8.count + 8)
        for character in value.unicodeScalars {
            switch character {
            case "\\": escaped += "\\\\"
            case "\"": escaped += "\\\""
            case "\n": escaped += "\\n"
            default: escaped.unicodeScalars.append(character)
            }
        }
        return escaped
    }
}

extension MetricsRegistry.Series {
    var counter: Counter? { if case .counter(let c) = self { c } else { nil } }
    var gauge: Gauge? { if case .gauge(let g) = self { g } else { nil } }
    var histogram: Histogram? { if case .histogram(let h) = self { h } else { nil } }
}

/// Series found by a key of their user's, made once through the registry and kept. A lookup
/// in the registry builds its labels' text; a path that counts each request or record and
/// cannot keep its series as a property (its labels vary) keeps them here.
public final class SeriesCache<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private let made = Mutex<[Key: Value]>([:])

    public init() {}

    /// The series of `key`, made by `make` the first time (the registry gives two makers of
    /// the same labels one series).
    public func series(_ key: Key, make: () -> Value) -> Value {
        if let known = made.withLock({ $0[key] }) { return known }
        let value = make()
        made.withLock { $0[key] = value }
        return value
    }
}

public final class Counter: Sendable {
    private let count = Atomic<Int>(0)
    public func increment(by amount: Int = 1) { count.add(amount, ordering: .relaxed) }
    public var value: Int { count.load(ordering: .relaxed) }
}

public final class Gauge: Sendable {
    private let current = Atomic<Int>(0)
    public func set(_ value: Int) { current.store(value, ordering: .relaxed) }
    public func add(_ amount: Int) { current.add(amount, ordering: .relaxed) }
    public var value: Int { current.load(ordering: .relaxed) }
}

public final class Histogram: Sendable {
    /// 1 ms to 10 s.
    public static let latencyBuckets: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    let buckets: [Double]
    fileprivate let state: Mutex<(counts: [Int], sum: Double, count: Int)>

    init(buckets: [Double]) {
        self.buckets = buckets.sorted()
        state = Mutex((Array(repeating: 0, count: buckets.count), 0, 0))
    }

    /// The bucket `value` falls in; nil past the last.
    func bucket(of value: Double) -> Int? { buckets.firstIndex { value <= $0 } }

    public func observe(_ value: Double) {
        let index = bucket(of: value)
        state.withLock {
            if let index { $0.counts[index] += 1 }
            $0.sum += value
            $0.count += 1
        }
    }

    public func observe(_ duration: Duration) {
        observe(duration.seconds)
    }

    /// Observations counted locally and added to their histogram in one step (`record`): a
    /// batch's hundreds of latencies take its lock once, not once each.
    public struct Tally {
        private let histogram: Histogram
        private var counts: [Int]
        private var sum = 0.0
        private var count = 0

        public init(_ histogram: Histogram) {
            self.histogram = histogram
            counts = Array(repeating: 0, count: histogram.buckets.count)
        }

        public mutating func observe(_ duration: Duration) {
            let value = duration.seconds
            if let index = histogram.bucket(of: value) { counts[index] += 1 }
            sum += value
            count += 1
        }

        /// Adds what was observed to the histogram, and starts counting again.
        public mutating func record() {
            guard count > 0 else { return }
            let (counts, sum, count) = (self.counts, self.sum, self.count)
            histogram.state.withLock {
                for index in counts.indices { $0.counts[index] += counts[index] }
                $0.sum += sum
                $0.count += count
            }
            for index in self.counts.indices { self.counts[index] = 0 }
            self.sum = 0
            self.count = 0
        }
    }

    func render(name: String, labels: String) -> String {
        let (counts, sum, count) = state.withLock { $0 }
        let inner = labels.isEmpty ? "" : String(labels.dropFirst().dropLast()) + ","
        var text = ""
        var cumulative = 0
        for (bound, bucketCount) in zip(buckets, counts) {
            cumulative += bucketCount
            text += "\(name)_bucket{\(inner)le=\"\(bound)\"} \(cumulative)\n"
        }
        text += "\(name)_bucket{\(inner)le=\"+Inf\"} \(count)\n"
        text += "\(name)_sum\(labels) \(sum)\n\(name)_count\(labels) \(count)\n"
        return text
    }
}
