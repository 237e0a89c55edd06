import Foundation
import PushModel

/// A line chart as inline SVG: the load report's plots and the web console's live charts.
public struct LineChart: Sendable {
    public struct Series: Sendable {
        public var name: String
        public var color: String
        public var points: [(Double, Double)]

        public init(name: String, color: String, points: [(Double, Double)]) {
            self.name = name
            self.color = color
            self.points = points
        }
    }

    public var title: String
    public var xLabel: String
    public var yLabel: String
    public var series: [Series]
    public var xTicks: [(Double, String)]
    public var logX = false

    public init(title: String, xLabel: String, yLabel: String, series: [Series], xTicks: [(Double, String)], logX: Bool = false) {
        self.title = title
        self.xLabel = xLabel
        self.yLabel = yLabel
        self.series = series
        self.xTicks = xTicks
        self.logX = logX
    }

    /// A figure as people read it: whole numbers from 100 up, else two significant decimals.
    public static func number(_ value: Double) -> String {
        guard value.isFinite, abs(value) < 1e15 else { return value.isFinite ? String(format: "%.3g", value) : "-" }
        if value >= 100 || value == value.rounded() { return String(Int(value.rounded())) }
        return String(format: value >= 10 ? "%.1f" : "%.2f", value)
    }

    static func escape(_ text: String) -> String { TemplateRenderer.escapeXML(text) }

    static let width = 720.0, height = 320.0, left = 70.0, right = 40.0, top = 40.0, bottom = 50.0

    public static func percentileX(_ percentile: Double) -> Double { 1 / max(1e-6, 1 - percentile / 100) }

    /// Round tick values from 0 to `limit`.
    public static func ticks(upTo limit: Double) -> [Double] { ticks(from: 0, upTo: limit) }

    /// Round tick values covering `start` to `limit`, from the last round value at or below `start`.
    public static func ticks(from start: Double, upTo limit: Double) -> [Double] {
        // Figures another process wrote may be anything: outside what people chart, one tick.
        guard start.isFinite, limit.isFinite, abs(start) < 1e15, abs(limit) < 1e15 else { return [0] }
        guard limit > start else { return [start] }
        let raw = (limit - start) / 5
        let magnitude = pow(10, floor(log10(raw)))
        let step = [1.0, 2, 5, 10].map { $0 * magnitude }.first { $0 >= raw } ?? raw
        let first = (start / step).rounded(.down) * step
        return stride(from: first, through: limit + step * 0.999, by: step).map { $0 }
    }

    public func svg() -> String {
        let all = series.flatMap(\.points)
        let xs = (all.map(\.0) + xTicks.map(\.0))
        let minX = logX ? log10(xs.min() ?? 1) : (xs.min() ?? 0)
        let maxX = max(minX + 1e-9, logX ? log10(xs.max() ?? 10) : (xs.max() ?? 1))
        let yTicks = Self.ticks(upTo: max(all.map(\.1).max() ?? 1, 1e-3))
        let maxY = max(yTicks.last ?? 1, all.map(\.1).max() ?? 1)
        let plotWidth = Self.width - Self.left - Self.right, plotHeight = Self.height - Self.top - Self.bottom
        func px(_ x: Double) -> Double { Self.left + ((logX ? log10(x) : x) - minX) / (maxX - minX) * plotWidth }
        func py(_ y: Double) -> Double { Self.top + plotHeight - y / maxY * plotHeight }
        func f(_ value: Double) -> String { String(format: "%.1f", value) }
        var out = [
            "<figure><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(Self.width))\" height=\"\(Int(Self.height))\" font-size=\"12\" role=\"img\" aria-label=\"\(Self.escape(title))\">"
        ]
        out.append("<text x=\"\(f(Self.left))\" y=\"20\" font-weight=\"bold\">\(Self.escape(title))</text>")
        for tick in yTicks {
            out.append(
                "<line x1=\"\(f(Self.left))\" x2=\"\(f(Self.width - Self.right))\" y1=\"\(f(py(tick)))\" y2=\"\(f(py(tick)))\" stroke=\"#e4e4e4\"/>")
            out.append("<text x=\"\(f(Self.left - 6))\" y=\"\(f(py(tick) + 4))\" text-anchor=\"end\">\(Self.number(tick))</text>")
        }
        for (value, label) in xTicks {
            out.append(
                "<line x1=\"\(f(px(value)))\" x2=\"\(f(px(value)))\" y1=\"\(f(Self.top))\" y2=\"\(f(Self.top + plotHeight))\" stroke=\"#e4e4e4\"/>")
            out.append("<text x=\"\(f(px(value)))\" y=\"\(f(Self.top + plotHeight + 16))\" text-anchor=\"middle\">\(Self.escape(label))</text>")
        }
        out.append("<text x=\"\(f(Self.left + plotWidth / 2))\" y=\"\(f(Self.height - 8))\" text-anchor=\"middle\">\(Self.escape(xLabel))</text>")
        out.append(
            "<text transform=\"translate(16 \(f(Self.top + plotHeight / 2))) rotate(-90)\" text-anchor=\"middle\">\(Self.escape(yLabel))</text>")
        for (index, line) in series.enumerated() {
            let path = line.points.map { "\(f(px($0.0))),\(f(py($0.1)))" }.joined(separator: " ")
            // A point alone (a run of under a second) draws no line: it is marked.
            for point in line.points where line.points.count < 3 {
                out.append("<circle cx=\"\(f(px(point.0)))\" cy=\"\(f(py(point.1)))\" r=\"4\" fill=\"\(line.color)\"/>")
            }
            out.append(
                "<polyline fill=\"none\" stroke=\"\(line.color)\" stroke-width=\"2\" points=\"\(path)\"><title>\(Self.escape(line.name))</title></polyline>"
            )
            if series.count > 1 {
                let y = Self.top + 14 * Double(index)
                out.append(
                    "<text x=\"\(f(Self.width - Self.right - 4))\" y=\"\(f(y + 4))\" text-anchor=\"end\" fill=\"\(line.color)\">\(Self.escape(line.name))</text>"
                )
            }
        }
        out.append("</svg></figure>")
        return out.joined(separator: "\n")
    }
}
