import Foundation
import HTTPTypes
import Hummingbird
import PushKafka
import Tracing

/// When tracing, a span for each send the ingress accepts (`POST` of messages, batches,
/// scheduled sends and the app backend's notifications): under the caller's `traceparent`
/// when it sent one, else the root of a new trace. The send's records carry it on to Kafka.
/// Only `traceparent` and `tracestate` are read; no other header reaches the tracer.
struct AcceptTracing: RouterMiddleware {
    typealias Context = IngressContext

    static let traceparent = HTTPField.Name("traceparent")!
    static let tracestate = HTTPField.Name("tracestate")!
    static let trackingId = HTTPField.Name("TrackingId")!

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard request.method == .post, TraceHeaders.isActive, Self.isSend(request.uri.path) else { return try await next(request, context) }
        var carrier: [KafkaHeader] = []
        if let parent = request.headers[Self.traceparent] { carrier.append(KafkaHeader(key: "traceparent", value: parent)) }
        if let state = request.headers[Self.tracestate] { carrier.append(KafkaHeader(key: "tracestate", value: state)) }
        var parent = InstrumentationContext.topLevel
        InstrumentationSystem.instrument.extract(carrier, into: &parent, using: KafkaHeadersExtractor())
        return try await withSpan("pushhub.accept", context: parent, ofKind: .server) { span in
            let response = try await next(request, context)
            span.attributes["http.response.status_code"] = Int(response.status.code)
            if let id = response.headers[Self.trackingId] { span.attributes["pushhub.notification_id"] = id }
            if response.status.code >= 500 { span.setStatus(SpanStatus(code: .error)) }
            return response
        }
    }

    /// The paths that accept sends.
    static func isSend(_ path: String) -> Bool {
        path.hasSuffix("/messages") || path.hasSuffix("/messages/$batch") || path.hasSuffix("/schedulednotifications")
            || path.hasPrefix("/api/notifications") || path == "/console/send"
    }
}
