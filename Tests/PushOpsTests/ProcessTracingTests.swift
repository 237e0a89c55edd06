import Foundation
import Testing

@testable import PushEnvironment

@Suite("Tracing configuration")
struct ProcessTracingTests {
    @Test("the endpoint gets /v1/traces; OTEL_ variables that would stop the process are refused by name or dropped; off without the endpoint")
    func configuration() throws {
        #expect(try ProcessTracing.tracesURL("http://collector:4318") == "http://collector:4318/v1/traces")
        #expect(try ProcessTracing.tracesURL("http://collector:4318/") == "http://collector:4318/v1/traces")
        #expect(try ProcessTracing.tracesURL("https://c.example/otlp/v1/traces") == "https://c.example/otlp/v1/traces")
        for bad in ["collector:4318", "ftp://c", "http://"] {
            #expect(throws: TracingConfigurationError.self) { try ProcessTracing.tracesURL(bad) }
        }
        let kept = try ProcessTracing.filtered([
            "OTEL_PROPAGATORS": "tracecontext,baggage", "OTEL_BSP_SCHEDULE_DELAY": "200", "PATH": "/bin", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x",
            "OTEL_SDK_DISABLED": "false",
        ])
        #expect(kept == ["OTEL_BSP_SCHEDULE_DELAY": "200"])
        for (name, value) in [
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"), ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"), ("OTEL_TRACES_SAMPLER", "xray"),
            ("OTEL_BSP_SCHEDULE_DELAY", "0"), ("OTEL_BSP_MAX_QUEUE_SIZE", "100000000"), ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "0"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "secret-token"),
        ] {
            #expect(throws: TracingConfigurationError.self, "\(name)=\(value)") { try ProcessTracing.filtered([name: value]) }
        }
        #expect(try ProcessTracing.service(serviceName: "x", logger: .init(label: "t"), variables: [:]) == nil)
        #expect(
            try ProcessTracing.service(
                serviceName: "x", logger: .init(label: "t"), variables: ["PUSHHUB_OTEL_ENDPOINT": "http://c", "OTEL_SDK_DISABLED": "true"])
                == nil)
    }
}
