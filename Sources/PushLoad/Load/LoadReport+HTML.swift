import Foundation

extension LoadReport {
    /// A self-contained HTML page: the figures, throughput per second, and each latency
    /// distribution as an HdrHistogram percentile plot, as inline SVG.
    public func html() -> String {
        var sections: [String] = []
        let series: [(String, String, KeyPath<Timeline.Second, Int>)] = [
            ("registered/s", "#7a5195", \.registered), ("accepted/s", "#003f5c", \.accepted), ("delivered/s", "#ef5675", \.delivered),
        ]
        let lines = series.compactMap { name, color, path -> Chart.Series? in
            let points = timeline.map { (Double($0.second), Double($0[keyPath: path])) }
            return points.contains { $0.1 > 0 } ? Chart.Series(name: name, color: color, points: points) : nil
        }
        if !lines.isEmpty {
            let last = Double(max(1, timeline.count - 1))
            let ticks = Chart.ticks(upTo: last).map { ($0, Format.number($0)) }
            sections.append(
                Chart(title: "Throughput", xLabel: "seconds since the start", yLabel: "per second", series: lines, xTicks: ticks, logX: false).svg())
        }
        let latencies: [(String, String, Latency?)] = [
            ("Accept latency (due → 201 or Kafka ack)", "#003f5c", acceptLatencyMs),
            ("Registration latency (due → 200)", "#7a5195", registerLatencyMs),
            ("End-to-end latency (accepted → PNS answered)", "#ef5675", endToEndLatencyMs),
        ]
        for (title, color, latency) in latencies {
            guard let latency else { continue }
            // HdrHistogram's percentile plot: x is 1 / (1 - percentile) on a log scale.
            let points = latency.curve.filter { $0.percentile < 100 }.map { (Chart.percentileX($0.percentile), $0.ms) }
            let ticks = [0, 90, 99, 99.9, 99.99, 99.999].map { (Chart.percentileX($0), "\(Format.number($0))%") }
            sections.append(
                Chart(
                    title: title, xLabel: "percentile", yLabel: "ms", series: [.init(name: "ms", color: color, points: points)], xTicks: ticks,
                    logX: true
                ).svg())
        }
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><title>PushHub load: \(Format.escape(settings.scenario.rawValue))</title>
            <style>body{font-family:system-ui,sans-serif;margin:2em;max-width:60em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}th{text-align:left}pre{background:#f4f4f4;padding:1em;white-space:pre-wrap}</style>
            </head><body>
            <h1>PushHub load run: \(Format.escape(settings.scenario.rawValue))</h1>
            <p>Started \(Format.escape(ISO8601DateFormatter().string(from: startedAt))) against \(Format.escape(settings.url)), hub \(Format.escape(settings.hub)), sends via \(settings.via.rawValue); \(Format.number(seconds)) s in all.</p>
            <pre>\(Format.escape(summary()))</pre>
            \(latencyTable())
            \(sections.joined(separator: "\n"))
            </body></html>
            """
    }

    private func latencyTable() -> String {
        let rows = [("accept", acceptLatencyMs), ("registration", registerLatencyMs), ("end to end", endToEndLatencyMs)].compactMap { name, latency in
            latency.map { l in
                "<tr><th>\(name)</th><td>\(l.count)</td><td>\(Format.number(l.p50))</td><td>\(Format.number(l.p90))</td><td>\(Format.number(l.p99))</td><td>\(Format.number(l.p999))</td><td>\(Format.number(l.max))</td></tr>"
            }
        }
        guard !rows.isEmpty else { return "" }
        return
            "<table><tr><th>latency (ms)</th><th>count</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th></tr>\(rows.joined())</table>"
    }
}

/// A line chart as SVG.
struct Chart {
    struct Series {
        var name: String
        var color: String
        var points: [(Double, Double)]
    }

    var title: String
    var xLabel: String
    var yLabel: String
    var series: [Series]
    var xTicks: [(Double, String)]
    var logX: Bool

    static let width = 720.0, height = 320.0, left = 70.0, right = 20.0, top = 40.0, bottom = 50.0

    static func percentileX(_ percentile: Double) -> Double { 1 / max(1e-6, 1 - percentile / 100) }

    /// Round tick values from 0 to `limit`.
    static func ticks(upTo limit: Double) -> [Double] {
        guard limit > 0 else { return [0] }
        let raw = limit / 5
        let magnitude = pow(10, floor(log10(raw)))
        let step = [1.0, 2, 5, 10].map { $0 * magnitude }.first { $0 >= raw } ?? raw
        return stride(from: 0, through: limit, by: step).map { $0 }
    }

    func svg() -> String {
        let all = series.flatMap(\.points)
        let xs = (all.map(\.0) + xTicks.map(\.0))
        let minX = logX ? log10(xs.min() ?? 1) : 0
        let maxX = max(minX + 1e-9, logX ? log10(xs.max() ?? 10) : (xs.max() ?? 1))
        let yTicks = Self.ticks(upTo: max(all.map(\.1).max() ?? 1, 1e-3))
        let maxY = max(yTicks.last ?? 1, all.map(\.1).max() ?? 1)
        let plotWidth = Self.width - Self.left - Self.right, plotHeight = Self.height - Self.top - Self.bottom
        func px(_ x: Double) -> Double { Self.left + ((logX ? log10(x) : x) - minX) / (maxX - minX) * plotWidth }
        func py(_ y: Double) -> Double { Self.top + plotHeight - y / maxY * plotHeight }
        func f(_ value: Double) -> String { String(format: "%.1f", value) }
        var out = ["<figure><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(Self.width))\" height=\"\(Int(Self.height))\" font-size=\"12\">"]
        out.append("<text x=\"\(f(Self.left))\" y=\"20\" font-weight=\"bold\">\(Format.escape(title))</text>")
        for tick in yTicks {
            out.append(
                "<line x1=\"\(f(Self.left))\" x2=\"\(f(Self.width - Self.right))\" y1=\"\(f(py(tick)))\" y2=\"\(f(py(tick)))\" stroke=\"#e4e4e4\"/>")
            out.append("<text x=\"\(f(Self.left - 6))\" y=\"\(f(py(tick) + 4))\" text-anchor=\"end\">\(Format.number(tick))</text>")
        }
        for (value, label) in xTicks {
            out.append(
                "<line x1=\"\(f(px(value)))\" x2=\"\(f(px(value)))\" y1=\"\(f(Self.top))\" y2=\"\(f(Self.top + plotHeight))\" stroke=\"#e4e4e4\"/>")
            out.append("<text x=\"\(f(px(value)))\" y=\"\(f(Self.top + plotHeight + 16))\" text-anchor=\"middle\">\(Format.escape(label))</text>")
        }
        out.append("<text x=\"\(f(Self.left + plotWidth / 2))\" y=\"\(f(Self.height - 8))\" text-anchor=\"middle\">\(Format.escape(xLabel))</text>")
        out.append(
            "<text transform=\"translate(16 \(f(Self.top + plotHeight / 2))) rotate(-90)\" text-anchor=\"middle\">\(Format.escape(yLabel))</text>")
        for (index, line) in series.enumerated() {
            let path = line.points.map { "\(f(px($0.0))),\(f(py($0.1)))" }.joined(separator: " ")
            out.append(
                "<polyline fill=\"none\" stroke=\"\(line.color)\" stroke-width=\"2\" points=\"\(path)\"><title>\(Format.escape(line.name))</title></polyline>"
            )
            if series.count > 1 {
                let y = Self.top + 14 * Double(index)
                out.append(
                    "<text x=\"\(f(Self.width - Self.right - 4))\" y=\"\(f(y + 4))\" text-anchor=\"end\" fill=\"\(line.color)\">\(Format.escape(line.name))</text>"
                )
            }
        }
        out.append("</svg></figure>")
        return out.joined(separator: "\n")
    }
}
