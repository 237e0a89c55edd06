import Foundation
import Testing

/// The regression guard on cost per delivery that does not depend on the machine's speed or
/// load: heap allocations per delivery on each worker's path (`pushhub-allocations`, which
/// counts malloc, calloc and realloc), against the committed baseline.
@Suite("allocations per delivery against the baseline", .serialized, .timeLimit(.minutes(3)))
struct AllocationGuardTests {
    static let baselineFile = repositoryRoot.appendingPathComponent("Tests/PushHubCLITests/Baselines/allocations.json")
    /// Growth allowed over the baseline before the test fails.
    static let tolerance = 1.25

    /// Each platform's path with batches of 500; `@1`, with batches of one target, as a
    /// single-user send's are (what is paid once a batch then counts per delivery).
    @Test(
        "no worker's path allocates more than 25 % over the baseline per delivery",
        arguments: ["apns", "fcm", "wns", "webpush", "hms", "adm", "xiaomi", "baidu", "apns@1", "fcm@1"])
    func guardAllocations(_ key: String) async throws {
        let baseline = try #require(
            (try JSONSerialization.jsonObject(with: Data(contentsOf: Self.baselineFile)) as? [String: Any])?[key] as? Double,
            "the baseline names \(key)")
        let platform = String(key.prefix { $0 != "@" })
        let oneTarget = key.hasSuffix("@1")
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-allocations-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: data) }
        let config = data.appendingPathComponent("pushhub.yaml").path
        let sim = try ChildProcess(
            arguments: [
                "sim", "--config", config, "--attach", "pushhub-dev", "--data-dir", data.appendingPathComponent("sim").path, "--recorded-handles",
                "0",
            ],
            environment: ["PUSHHUB_LOG_LEVEL": "error"])
        defer { sim.signal(SIGTERM) }
        let ca = String(try #require(await sim.line(startingWith: "PUSHHUB_PNS_CA=")).dropFirst("PUSHHUB_PNS_CA=".count))
        let http2 = String(try #require(await sim.line(startingWith: "PUSHHUB_SIM_APNS_URL=")).dropFirst("PUSHHUB_SIM_APNS_URL=".count))
        let counter = try ChildProcess(
            pushhubExecutable.deletingLastPathComponent().appendingPathComponent("pushhub-allocations"),
            arguments: ["--config", config, "--platform", platform, "--sim-url", http2, "--trust-ca", ca]
                + (oneTarget ? ["--targets", "1", "--batches", "60"] : ["--batches", "6"]))
        let line = try #require(await counter.line(startingWith: "ALLOCATIONS_PER_DELIVERY=", timeout: .seconds(120)), "\(counter.output)")
        let measured = try #require(Double(line.dropFirst("ALLOCATIONS_PER_DELIVERY=".count)))
        #expect(await counter.exitStatus(within: .seconds(30)) == 0)
        if ProcessInfo.processInfo.environment["PUSHHUB_WRITE_ALLOCATION_BASELINE"] == "1" {
            try Self.write(key, measured.rounded())
        }
        #expect(
            measured <= baseline * Self.tolerance,
            "\(key): \(measured) allocations per delivery, over 125 % of the baseline \(baseline); find what allocates per push, or raise the baseline with the reason in the commit"
        )
        print("\(key): \(measured) allocations per delivery (baseline \(baseline))")
    }

    /// Writes one platform's figure into the baseline file (the tests run one at a time).
    static func write(_ platform: String, _ value: Double) throws {
        var object = try JSONSerialization.jsonObject(with: Data(contentsOf: baselineFile)) as? [String: Any] ?? [:]
        object[platform] = Int(value)
        try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys]).write(to: baselineFile)
    }
}
