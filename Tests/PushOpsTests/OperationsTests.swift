import Foundation
import Hummingbird
import HummingbirdTesting
import PushMetrics
import PushOps
import Testing

@Suite("Metrics and the operations endpoints")
struct OperationsTests {
    @Test("the Prometheus text: counters, gauges and cumulative histograms, labels sorted and escaped")
    func exposition() {
        let metrics = MetricsRegistry()
        metrics.counter("jobs_total", help: "Jobs.", labels: ["queue": "a\"b", "kind": "x"]).increment(by: 3)
        metrics.counter("jobs_total", help: "Jobs.", labels: ["kind": "x", "queue": "a\"b"]).increment()
        metrics.counter("jobs_total", help: "Jobs.", labels: ["kind": "y", "queue": "c\\d\né"]).increment()
        metrics.gauge("lag", help: "Lag.").set(7)
        let histogram = metrics.histogram("latency_seconds", help: "Latency.", labels: ["route": "/x"], buckets: [0.1, 1])
        histogram.observe(0.05)
        histogram.observe(0.5)
        histogram.observe(5)
        #expect(
            metrics.render() == """
                # HELP jobs_total Jobs.
                # TYPE jobs_total counter
                jobs_total{kind="x",queue="a\\"b"} 4
                jobs_total{kind="y",queue="c\\\\d\\né"} 1
                # HELP lag Lag.
                # TYPE lag gauge
                lag 7
                # HELP latency_seconds Latency.
                # TYPE latency_seconds histogram
                latency_seconds_bucket{route="/x",le="0.1"} 1
                latency_seconds_bucket{route="/x",le="1.0"} 2
                latency_seconds_bucket{route="/x",le="+Inf"} 3
                latency_seconds_sum{route="/x"} 5.55
                latency_seconds_count{route="/x"} 3

                """)
    }

    @Test("a tally adds its observations to the histogram in one step, as observing each would, and counts again from nothing")
    func tally() {
        let metrics = MetricsRegistry()
        let histogram = metrics.histogram("pns_seconds", help: "PNS.", buckets: [0.1, 1])
        var tally = Histogram.Tally(histogram)
        for microseconds in [62_500, 500_000, 4_000_000] { tally.observe(.microseconds(microseconds)) }
        #expect(metrics.render().contains("pns_seconds_count 0"), "nothing before it is recorded")
        tally.record()
        tally.observe(.microseconds(31_250))
        tally.record()
        tally.record()
        #expect(
            metrics.render().hasSuffix(
                """
                pns_seconds_bucket{le="0.1"} 2
                pns_seconds_bucket{le="1.0"} 3
                pns_seconds_bucket{le="+Inf"} 4
                pns_seconds_sum 4.59375
                pns_seconds_count 4

                """), "\(metrics.render())")
    }

    @Test("/health/live, /health/ready (503 naming what fails) and /metrics")
    func endpoints() async throws {
        let router = Router()
        addOperationsRoutes(to: router, checks: [ReadinessCheck("kafka") { true }, ReadinessCheck("store") { false }])
        try await Application(router: router).test(.router) { client in
            #expect(try await client.execute(uri: "/health/live", method: .get).status == .ok)
            let ready = try await client.execute(uri: "/health/ready", method: .get)
            #expect(ready.status == .serviceUnavailable)
            #expect(String(buffer: ready.body) == #"{"kafka":"ok","store":"failing"}"#)
            let metrics = try await client.execute(uri: "/metrics", method: .get)
            #expect(metrics.headers[.contentType]?.hasPrefix("text/plain; version=0.0.4") == true)
        }
        let healthy = Router()
        addOperationsRoutes(to: healthy, checks: [ReadinessCheck("kafka") { true }])
        try await Application(router: healthy).test(.router) { client in
            let ready = try await client.execute(uri: "/health/ready", method: .get)
            #expect(ready.status == .ok)
        }
    }
}
