import Foundation
import PushOps

extension LoadReport {
    /// A self-contained HTML page: a pass or fail banner, the run's settings and figures,
    /// per-platform results, throughput, latency and errors per second, and each latency
    /// distribution as an HdrHistogram percentile plot, as inline SVG.
    public func html() -> String {
        var sections: [String] = []
        // The first seconds go to connecting and joining Kafka's group: the plots start at the
        // first second anything happened.
        let active = timeline.drop { $0.accepted == 0 && $0.registered == 0 && $0.results == 0 && $0.errors.isEmpty }
        let first = Double(active.first?.second ?? 0)
        let last = Double(active.last?.second ?? 0)
        let xTicks = LineChart.ticks(from: first, upTo: max(last, first + 1)).map { ($0, Format.number($0)) }
        let series: [(String, String, KeyPath<Timeline.Second, Int>)] = [
            ("registered/s", "#7a5195", \.registered), ("accepted/s", "#003f5c", \.accepted), ("delivered/s", "#c2185b", \.delivered),
        ]
        let lines = series.compactMap { name, color, path -> LineChart.Series? in
            let points = active.map { (Double($0.second), Double($0[keyPath: path])) }
            return points.contains { $0.1 > 0 } ? LineChart.Series(name: name, color: color, points: points) : nil
        }
        if !lines.isEmpty {
            sections.append(
                LineChart(title: "Throughput", xLabel: "seconds since the start", yLabel: "per second", series: lines, xTicks: xTicks).svg())
        }
        let p50 = active.compactMap { second in second.endToEndP50Ms.map { (Double(second.second), $0) } }
        let p99 = active.compactMap { second in second.endToEndP99Ms.map { (Double(second.second), $0) } }
        if !p99.isEmpty {
            sections.append(
                LineChart(
                    title: "End-to-end latency of each second's results", xLabel: "seconds since the start", yLabel: "ms",
                    series: [.init(name: "p50", color: "#003f5c", points: p50), .init(name: "p99", color: "#c2185b", points: p99)], xTicks: xTicks
                ).svg())
        }
        let kinds = Dictionary(active.flatMap(\.errors), uniquingKeysWith: +).sorted { $0.value > $1.value }.prefix(5).map(\.key)
        if !kinds.isEmpty {
            let colors = ["#c2185b", "#e65100", "#6a1b9a", "#00695c", "#37474f"]
            let errorSeries = kinds.enumerated().map { index, kind in
                LineChart.Series(name: kind, color: colors[index], points: active.map { (Double($0.second), Double($0.errors[kind] ?? 0)) })
            }
            sections.append(
                LineChart(
                    title: "Errors per second, by kind", xLabel: "seconds since the start", yLabel: "per second", series: errorSeries, xTicks: xTicks
                )
                .svg())
        }
        let latencies: [(String, String, Latency?)] = [
            ("Accept latency (due → 201 or Kafka ack)", "#003f5c", acceptLatencyMs),
            ("Registration latency (due → 200)", "#7a5195", registerLatencyMs),
            ("End-to-end latency (accepted → PNS answered)", "#c2185b", endToEndLatencyMs),
        ]
        for (title, color, latency) in latencies {
            guard let latency else { continue }
            // HdrHistogram's percentile plot: x is 1 / (1 - percentile) on a log scale.
            let points = latency.curve.filter { $0.percentile < 100 }.map { (LineChart.percentileX($0.percentile), $0.ms) }
            let ticks = [(0.0, "0%"), (90, "90%"), (99, "99%"), (99.9, "99.9%"), (99.99, "99.99%"), (99.999, "99.999%")].map {
                (LineChart.percentileX($0.0), $0.1)
            }
            sections.append(
                LineChart(
                    title: title, xLabel: "percentile", yLabel: "ms", series: [.init(name: "ms", color: color, points: points)], xTicks: ticks,
                    logX: true
                ).svg())
        }
        let verdict =
            passed
            ? "<p class=\"verdict pass\" role=\"status\"><strong>PASS</strong>: every request answered\(results == nil ? "" : ", every result in").</p>"
            : "<p class=\"verdict fail\" role=\"status\"><strong>FAIL</strong>: \(Format.escape(problems.joined(separator: "; "))).</p>"
        let via = settings.scenario == .register ? "" : ", sends via \(settings.via.rawValue)"
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><title>PushHub load: \(Format.escape(settings.scenario.rawValue)) \(passed ? "passed" : "failed")</title>
            <style>body{font-family:system-ui,sans-serif;margin:2em;max-width:60em;color:#1a1a1a}table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;padding:.25em .6em;text-align:right}th{text-align:left}caption{text-align:left;font-weight:bold;padding:.3em 0}pre{background:#f4f4f4;padding:1em;white-space:pre-wrap}.verdict{font-size:1.3em;padding:.6em 1em;border-radius:.3em}.pass{background:#e3f2e5;color:#1b5e20;border:2px solid #2e7d32}.fail{background:#fdecea;color:#8e0000;border:2px solid #c62828}figure{margin:1em 0}</style>
            </head><body>
            <h1>PushHub load run: \(Format.escape(settings.scenario.rawValue))</h1>
            \(verdict)
            <p>Started \(Format.escape(ISO8601DateFormatter().string(from: startedAt))) against \(Format.escape(settings.url)), hub \(Format.escape(settings.hub))\(via); \(Format.number(seconds)) s in all.</p>
            \(settingsTable())
            <pre>\(Format.escape(summary()))</pre>
            \(latencyTable())
            \(platformTable())
            \(errorTable())
            \(sections.joined(separator: "\n"))
            </body></html>
            """
    }

    private func settingsTable() -> String {
        let s = settings
        var rows: [(String, String)] = [
            ("scenario", s.scenario.rawValue), ("ingress", s.url), ("hub", s.hub), ("devices", "\(s.devices)"), ("users", "\(s.users)"),
            ("platforms (%)", s.platforms), ("tags (%)", s.tags), ("concurrency", "\(s.concurrency)"),
        ]
        if s.scenario != .register { rows.insert(("sends via", s.via.rawValue), at: 3) }
        if let rate = s.rate { rows.append(("sends/s", Format.number(rate))) }
        if let duration = s.duration { rows.append(("duration (s)", Format.number(duration))) }
        if let audience = s.audience { rows.append(("audience", audience.rawValue)) }
        if let format = s.format { rows.append(("format", format.rawValue)) }
        if let tag = s.tagExpression { rows.append(("tag expression", tag)) }
        if let rate = s.registerRate { rows.append(("registrations/s", Format.number(rate))) }
        rows.append(("drain time-out (s)", Format.number(s.drainTimeout)))
        let body = rows.map { "<tr><th scope=\"row\">\(Format.escape($0.0))</th><td>\(Format.escape($0.1))</td></tr>" }.joined()
        return "<table><caption>Settings</caption>\(body)</table>"
    }

    private func latencyTable() -> String {
        let rows = [("accept", acceptLatencyMs), ("registration", registerLatencyMs), ("end to end", endToEndLatencyMs)].compactMap { name, latency in
            latency.map { "<tr><th scope=\"row\">\(name)</th>\(Self.cells($0))</tr>" }
        }
        guard !rows.isEmpty else { return "" }
        return
            "<table><caption>Latency (ms)</caption><tr><th scope=\"col\">latency</th><th scope=\"col\">count</th><th scope=\"col\">p50</th><th scope=\"col\">p90</th><th scope=\"col\">p99</th><th scope=\"col\">p99.9</th><th scope=\"col\">max</th></tr>\(rows.joined())</table>"
    }

    private func platformTable() -> String {
        guard let platforms else { return "" }
        let rows = platforms.map { p in
            "<tr><th scope=\"row\">\(Format.escape(p.platform))</th><td>\(p.results)</td><td>\(p.delivered)</td><td>\(Format.number(p.deliveredPerSecond))</td>"
                + (p.endToEndLatencyMs.map { "<td>\(Format.number($0.p50))</td><td>\(Format.number($0.p99))</td><td>\(Format.number($0.max))</td>" }
                    ?? "<td></td><td></td><td></td>") + "</tr>"
        }
        return
            "<table><caption>Per platform</caption><tr><th scope=\"col\">platform</th><th scope=\"col\">results</th><th scope=\"col\">delivered</th><th scope=\"col\">delivered/s</th><th scope=\"col\">end to end p50 (ms)</th><th scope=\"col\">p99 (ms)</th><th scope=\"col\">max (ms)</th></tr>\(rows.joined())</table>"
    }

    private func errorTable() -> String {
        guard !errors.isEmpty else { return "" }
        let rows = errors.sorted { $0.value > $1.value }.prefix(20).map {
            "<tr><th scope=\"row\">\(Format.escape($0.key))</th><td>\($0.value)</td></tr>"
        }
        return "<table><caption>Errors by kind</caption><tr><th scope=\"col\">kind</th><th scope=\"col\">count</th></tr>\(rows.joined())</table>"
    }

    private static func cells(_ l: Latency) -> String {
        "<td>\(l.count)</td><td>\(Format.number(l.p50))</td><td>\(Format.number(l.p90))</td><td>\(Format.number(l.p99))</td><td>\(Format.number(l.p999))</td><td>\(Format.number(l.max))</td>"
    }
}
