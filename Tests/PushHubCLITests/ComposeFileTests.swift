import Foundation
import PushTestSupport
import Testing

/// docker-compose.yml is checked by Compose itself: `docker compose config` when the plugin is
/// there, else Debian's `docker-compose config` (scripts/install-deps.sh test installs it). No
/// Docker engine is needed for either.
@Suite("docker-compose.yml")
struct ComposeFileTests {
    static let root = repositoryRoot

    /// Runs Compose with `arguments` on the project's file; its exit status and output.
    static func compose(_ arguments: [String], environment: [String: String] = ["PUSHHUB_CONFIG_FILE": "/etc/pushhub/pushhub.yaml"]) async throws -> (
        Int32, String
    ) {
        let command = try await ProcessLaunch.output(["docker", "compose", "version"]).status == 0 ? ["docker", "compose"] : ["docker-compose"]
        return try await ProcessLaunch.output(
            command + ["-f", root.appendingPathComponent("docker-compose.yml").path] + arguments, environment: environment,
            removing: ["PUSHHUB_CONFIG_FILE"])
    }

    @Test("Compose accepts the file; every part is there, the simulators only under the sim profile")
    func valid() async throws {
        let (status, output) = try await Self.compose(["config", "-q"])
        #expect(status == 0, "\(output)")
        let services = Set(try await Self.compose(["--profile", "sim", "config", "--services"]).1.split(separator: "\n").map(String.init))
        #expect(
            services == [
                "kafka", "topics", "postgres", "ingress", "dispatcher", "apns-worker", "fcm-worker", "wns-worker", "webpush-worker", "hms-worker",
                "adm-worker", "xiaomi-worker",
                "baidu-worker", "sim", "prometheus", "grafana", "otel-collector", "jaeger",
            ])
        // The normalized file: only the simulators carry the `sim` profile, and only Prometheus,
        // Grafana, the collector and Jaeger the `observability` one.
        let normalized = try await Self.compose(["config"]).1
        #expect(normalized.components(separatedBy: "profiles:").count == 6, "five services with profiles")
        #expect(normalized.matches(of: #/profiles:\s*\n\s*- sim\s*\n/#).count == 1, "\(normalized)")
        #expect(normalized.matches(of: #/profiles:\s*\n\s*- observability\s*\n/#).count == 4, "\(normalized)")
        // What Prometheus and Grafana are given is in the repository, where compose mounts it from.
        for mounted in [
            "deploy/prometheus/prometheus.yml", "deploy/prometheus/alerts.yaml", "deploy/grafana/provisioning",
            "deploy/grafana/pushhub-dashboard.json", "deploy/otel/collector.yaml",
        ] {
            #expect(FileManager.default.fileExists(atPath: Self.root.appendingPathComponent(mounted).path), "\(mounted)")
            #expect(normalized.contains(mounted), "\(mounted) is mounted")
        }
    }

    @Test("without a pushhub.yaml Compose refuses to start, naming the variable: no keys ship in the repository")
    func needsConfiguration() async throws {
        let (status, output) = try await Self.compose(["config", "-q"], environment: [:])
        #expect(status != 0)
        #expect(output.contains("PUSHHUB_CONFIG_FILE"), "\(output)")
    }
}
