import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `pushhub bench worker`, the harness behind `make bench-apns` and `make bench-pns`, against a
/// running worker: its count of results is the worker's own.
@Suite("pushhub bench worker against kafka-dev, pushhub sim and a worker", .timeLimit(.minutes(2)))
struct BenchWorkerCommandTests {
    static let directory = pushhubExecutable.deletingLastPathComponent()

    @Test("APNs and Web Push: every target produced is delivered and counted, as many as the worker's metrics say it delivered")
    func countsWhatTheWorkerDelivered() async throws {
        let environment = ["PUSHHUB_LOG_LEVEL": "error"]
        let kafkaDev = try ChildProcess(arguments: ["kafka-dev", "--brokers", "1", "--partitions", "4"], environment: environment)
        let servers = String(try #require(await kafkaDev.line(startingWith: "PUSHHUB_KAFKA=")).dropFirst("PUSHHUB_KAFKA=".count))
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-bench-worker-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: data) }
        let config = data.appendingPathComponent("pushhub.yaml").path
        // The simulator makes the development hub and gives it its credentials.
        let sim = try ChildProcess(
            arguments: ["sim", "--config", config, "--attach", "pushhub-dev", "--data-dir", data.appendingPathComponent("sim").path],
            environment: environment)
        let ca = String(try #require(await sim.line(startingWith: "PUSHHUB_PNS_CA=")).dropFirst("PUSHHUB_PNS_CA=".count))
        let http2URL = String(try #require(await sim.line(startingWith: "PUSHHUB_SIM_APNS_URL=")).dropFirst("PUSHHUB_SIM_APNS_URL=".count))
        for (platform, targets) in [("apns", 1_200), ("webpush", 300)] {
            let worker = try ChildProcess(
                Self.directory.appendingPathComponent("pushhub-\(platform)-worker"),
                arguments: ["--config", config, "--kafka", servers, "--trust-ca", ca], environment: environment)
            let ops = String(try #require(await worker.line(startingWith: "PUSHHUB_OPS_URL=")).dropFirst("PUSHHUB_OPS_URL=".count))
            let bench = try ChildProcess(
                arguments: [
                    "bench", "worker", "--kafka", servers, "--platform", platform, "--hub", "pushhub-dev", "--targets", "\(targets)",
                    "--sim-url", http2URL,
                ], environment: environment)
            // The warm-up's targets are delivered too, before the clock starts.
            let warmUp = try #require(await bench.line(startingWith: "WARM_UP_TARGETS=", timeout: .seconds(60)))
            let warmUpTargets = try #require(Int(warmUp.dropFirst("WARM_UP_TARGETS=".count)))
            let summary = try #require(await bench.line(startingWith: "produced ", timeout: .seconds(60)))
            #expect(summary.contains("produced \(targets) targets"), "\(summary)")
            #expect(summary.contains("; \(targets) delivered in"), "\(summary)")
            let rate = try #require(await bench.line(startingWith: "DELIVERIES_PER_SECOND="))
            #expect((Int(rate.dropFirst("DELIVERIES_PER_SECOND=".count)) ?? 0) > 0)
            #expect(await bench.exitStatus(within: .seconds(20)) == 0)
            // The bench stops at its own targets' last result; the worker's count of the last
            // batch may come a moment later, so it is read until it is whole or a minute passed.
            let delivered = #"pushhub_deliveries_total{outcome="delivered",platform="\#(platform)"} \#(targets + warmUpTargets)"#
            var text = ""
            let deadline = ContinuousClock.now + .seconds(60)
            while !text.contains(delivered), ContinuousClock.now < deadline {
                if !text.isEmpty { try await Task.sleep(for: .milliseconds(200)) }
                let (metrics, _) = try await URLSession.shared.data(from: URL(string: "\(ops)/metrics")!)
                text = String(decoding: metrics, as: UTF8.self)
            }
            #expect(text.contains(delivered), "\(platform)")
            worker.signal(SIGTERM)
            #expect(await worker.exitStatus(within: .seconds(20)) == 0)
        }
        sim.signal(SIGTERM)
        #expect(await sim.exitStatus(within: .seconds(20)) == 0)
        kafkaDev.signal(SIGTERM)
        #expect(await kafkaDev.exitStatus(within: .seconds(15)) == 0)
    }
}
