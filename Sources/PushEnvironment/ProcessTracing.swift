import Foundation
import Logging
import OTel
import ServiceLifecycle

/// Tracing for a process: spans exported over OTLP/HTTP (protobuf) to `PUSHHUB_OTEL_ENDPOINT`,
/// off without it. The standard `OTEL_*` variables tune it (sampler, batch processor,
/// service name), except those that would name what PushHub does not build: propagators
/// other than W3C trace context, the gRPC protocol, and remote samplers are refused by name.
public enum ProcessTracing {
    /// Bootstraps tracing when it is configured and answers the service that exports the
    /// spans, to run first in the process's group (so it stops last and flushes); nil when
    /// tracing is off. Once per process, before any span.
    public static func service(serviceName: String, logger: Logger, variables: [String: String] = ProcessInfo.processInfo.environment) throws
        -> (any Service)?
    {
        guard let endpoint = PushHubEnvironment(variables).otelEndpoint else { return nil }
        if variables["OTEL_SDK_DISABLED"]?.lowercased() == "true" { return nil }
        var configuration = OTel.Configuration.default
        configuration.serviceName = serviceName
        configuration.diagnosticLogger = .custom(logger)
        configuration.diagnosticLogLevel = .warning
        configuration.logs.enabled = false
        configuration.metrics.enabled = false
        configuration.traces.enabled = true
        configuration.traces.exporter = .otlp
        configuration.traces.otlpExporter.protocol = .httpProtobuf
        configuration.traces.otlpExporter.endpoint = try tracesURL(endpoint)
        configuration.traces.otlpExporter.timeout = .seconds(5)
        configuration.traces.batchSpanProcessor.scheduleDelay = .seconds(1)
        configuration.traces.batchSpanProcessor.exportTimeout = .seconds(5)
        configuration.traces.batchSpanProcessor.maxQueueSize = 8_192
        configuration.traces.batchSpanProcessor.maxExportBatchSize = 2_048
        configuration.propagators = [.traceContext]
        return try OTel.bootstrap(configuration: configuration, environment: try filtered(variables))
    }

    /// The traces URL of an OTLP/HTTP endpoint: `/v1/traces` added unless the path ends so.
    static func tracesURL(_ endpoint: String) throws -> String {
        guard let url = URLComponents(string: endpoint), ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host?.isEmpty == false
        else { throw TracingConfigurationError(description: "PUSHHUB_OTEL_ENDPOINT: an http(s) URL such as http://collector:4318, not \(endpoint)") }
        if url.path.hasSuffix("/v1/traces") { return endpoint }
        return (endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint) + "/v1/traces"
    }

    /// The `OTEL_*` variables swift-otel reads, without those it would stop the process over.
    static func filtered(_ variables: [String: String]) throws -> [String: String] {
        var kept = variables.filter { $0.key.hasPrefix("OTEL_") }
        kept["OTEL_PROPAGATORS"] = nil
        kept["OTEL_EXPORTER_OTLP_ENDPOINT"] = nil
        kept["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = nil
        // Logs and metrics stay PushHub's own: this would turn swift-otel's on (and swift-log
        // may be bootstrapped once); "true" turned tracing off before here.
        kept["OTEL_SDK_DISABLED"] = nil
        // Settings that would spin a core, take the memory at start, or never export.
        for (name, range) in [
            ("OTEL_BSP_SCHEDULE_DELAY", 10...60_000), ("OTEL_BSP_EXPORT_TIMEOUT", 100...60_000), ("OTEL_BSP_MAX_QUEUE_SIZE", 1...65_536),
            ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 1...65_536),
        ] {
            if let value = kept[name], !(Int(value).map(range.contains) ?? false) {
                throw TracingConfigurationError(description: "\(name): \(range.lowerBound) to \(range.upperBound), not \(value.prefix(32))")
            }
        }
        for name in ["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"] {
            // Named, never echoed: these hold a collector's credentials.
            if let value = kept[name], !value.split(separator: ",").allSatisfy({ $0.contains("=") && !$0.hasPrefix("=") }) {
                throw TracingConfigurationError(description: "\(name): key=value pairs, comma-separated")
            }
        }
        for name in ["OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] {
            if let value = kept[name], !["http/protobuf", "http/json"].contains(value.lowercased()) {
                throw TracingConfigurationError(description: "\(name): http/protobuf or http/json (PushHub has no gRPC exporter), not \(value)")
            }
        }
        if let sampler = kept["OTEL_TRACES_SAMPLER"],
            !["always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"]
                .contains(sampler.lowercased())
        {
            throw TracingConfigurationError(
                description: "OTEL_TRACES_SAMPLER: one of always_on, always_off, traceidratio and their parentbased_ forms, not \(sampler)")
        }
        return kept
    }
}

public struct TracingConfigurationError: Error, CustomStringConvertible {
    public var description: String
}
