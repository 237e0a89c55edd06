import Foundation
import PushTestSupport
import Testing

/// deploy/kubernetes rendered by kustomize and validated (scripts/check-kubernetes.py).
@Suite("Kubernetes manifests")
struct KubernetesManifestTests {
    static let root = repositoryRoot

    static func check(_ directory: URL? = nil) async throws -> (Int32, String) {
        try await ProcessLaunch.output(
            ["python3", root.appendingPathComponent("scripts/check-kubernetes.py").path] + (directory.map { [$0.path] } ?? []))
    }

    @Test("the base and every overlay render and validate")
    func valid() async throws {
        let (status, output) = try await Self.check()
        #expect(status == 0, "\(output)")
        #expect(output.contains("ok: base, overlays/observability, overlays/strimzi"), "\(output)")
    }

    @Test("a broken copy is refused, with each problem named")
    func broken() async throws {
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-k8s-\(UUID().uuidString)")
        try FileManager.default.copyItem(at: Self.root.appendingPathComponent("deploy/kubernetes"), to: copy)
        defer { try? FileManager.default.removeItem(at: copy) }
        let ingress = copy.appendingPathComponent("base/ingress.yaml")
        var text = try String(contentsOf: ingress, encoding: .utf8)
        text = text.replacingOccurrences(of: "path: /health/ready", with: "path: /ready")
        text = text.replacingOccurrences(of: "replicas: 2", with: "replicas: two")
        try text.write(to: ingress, atomically: true, encoding: .utf8)
        let scaling = copy.appendingPathComponent("base/autoscaling.yaml")
        try String(contentsOf: scaling, encoding: .utf8).replacingOccurrences(
            of: "name: pushhub-fcm-worker\n  minReplicaCount", with: "name: pushhub-gcm-worker\n  minReplicaCount"
        )
        .write(to: scaling, atomically: true, encoding: .utf8)

        let (status, output) = try await Self.check(copy)
        #expect(status == 1)
        #expect(output.contains("Deployment/pushhub-ingress: readinessProbe must GET /health/ready"), "\(output)")
        #expect(output.contains("Deployment/pushhub-ingress") && output.contains("two"), "\(output)")
        #expect(output.contains("ScaledObject/pushhub-fcm-worker: scales pushhub-gcm-worker"), "\(output)")
    }

    @Test("the observability overlay ships the alerts as a PrometheusRule and the dashboard as a ConfigMap, as made from deploy/")
    func observability() async throws {
        let (status, rendered) = try await ProcessLaunch.output(
            ["kubectl", "kustomize", Self.root.appendingPathComponent("deploy/kubernetes/overlays/observability").path])
        #expect(status == 0, "\(rendered)")
        #expect(rendered.contains("kind: PrometheusRule") && rendered.contains("alert: PushHubWorkerGroupDown"), "\(rendered.prefix(2000))")
        #expect(rendered.contains("name: pushhub-grafana-dashboard") && rendered.contains("grafana_dashboard: \"1\""))
        #expect(rendered.contains("pushhub_pns_request_duration_seconds_bucket"), "the dashboard's JSON is in the ConfigMap")
        // The overlay's copies are what deploy/prometheus and deploy/grafana make.
        let (checked, output) = try await ProcessLaunch.output(["python3", Self.root.appendingPathComponent("scripts/check-observability.py").path])
        #expect(checked == 0, "\(output)")
    }
}
