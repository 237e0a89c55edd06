import Foundation
import Hummingbird
import Logging
import PushTestSupport
import Synchronization
import Testing

/// A send traced end to end: `pushhub dev` with `PUSHHUB_OTEL_ENDPOINT` set exports its spans
/// over OTLP/HTTP to a receiver of our own, which decodes the protobuf. One send, under the
/// caller's `traceparent`, is one connected trace: accept, dispatch, a span per batch, the
/// workers' deliveries and PNS calls, and each outcome recorded, with the trace id in the logs.
@Suite("Tracing a send end to end", .timeLimit(.minutes(3)))
struct TracingTests {
    /// Receives OTLP/HTTP exports and keeps their spans.
    final class Receiver: Sendable {
        final class State: Sendable {
            let spans = Mutex<[ReceivedSpan]>([])
            let port = Mutex<Int?>(nil)
            let contentTypes = Mutex<[String]>([])
        }

        let state = State()
        private let task: Task<Void, Never>

        init() async throws {
            let router = Router()
            let state = state
            router.post("/v1/traces") { request, _ -> Response in
                let body = try await request.body.collect(upTo: 16 << 20)
                state.contentTypes.withLock { $0.append(request.headers[.contentType] ?? "") }
                let received = try OTLPTraces.spans(in: Array(body.readableBytesView))
                state.spans.withLock { $0 += received }
                // An empty ExportTraceServiceResponse.
                return Response(status: .ok, headers: [.contentType: "application/x-protobuf"])
            }
            let app = Application(
                router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                onServerRunning: { channel in state.port.withLock { $0 = channel.localAddress?.port } },
                logger: Logger(label: "otlp") { _ in SwiftLogNoOpLogHandler() })
            task = Task { try? await app.runService() }
            let deadline = ContinuousClock.now + .seconds(10)
            while state.port.withLock({ $0 }) == nil, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        }

        var url: String { "http://127.0.0.1:\(state.port.withLock { $0 } ?? 0)" }
        var spans: [ReceivedSpan] { state.spans.withLock { $0 } }
        var contentTypes: [String] { state.contentTypes.withLock { $0 } }

        deinit { task.cancel() }
    }

    static func hex(_ count: Int) -> String {
        (0..<count).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }

    @Test("one broadcast under a caller's traceparent is one connected trace across ingress, dispatcher, workers and outcomes")
    func connectedTrace() async throws {
        let receiver = try await Receiver()
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-tracing-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: data) }
        let stack = try await DevCommandTests.Stack.start(
            data: data,
            environment: [
                "PUSHHUB_OTEL_ENDPOINT": receiver.url, "OTEL_BSP_SCHEDULE_DELAY": "200", "PUSHHUB_LOG_FORMAT": "json", "PUSHHUB_LOG_LEVEL": "info",
                "OTEL_PROPAGATORS": "tracecontext,baggage",
            ], error: .merge)
        defer { stack.process.signal(SIGKILL) }
        try await DevCommandTests.register(stack)

        let traceID = Self.hex(16)
        let callerSpan = Self.hex(8)
        // A broadcast goes through the dispatcher (a small audience would not).
        let (status, body, response) = try await stack.call(
            "POST", "/\(stack.hub)/messages", #"{"message":"Traced news"}"#,
            headers: ["ServiceBusNotification-Format": "template", "traceparent": "00-\(traceID)-\(callerSpan)-01"])
        #expect(status == 201, "\(body)")
        let id = try #require(response?.value(forHTTPHeaderField: "TrackingId"))
        _ = try await stack.waitCompleted(id)

        let wanted = ["pushhub.accept", "pushhub.dispatch", "pushhub.dispatch.batch", "pushhub.deliver", "pushhub.pns", "pushhub.outcome"]
        let deadline = ContinuousClock.now + .seconds(20)
        var trace: [ReceivedSpan] = []
        while ContinuousClock.now < deadline {
            trace = receiver.spans.filter { $0.traceID == traceID }
            // Two batches' results and the summary: three outcomes.
            if Set(trace.map(\.name)).isSuperset(of: wanted), trace.filter({ $0.name == "pushhub.outcome" }).count >= 3 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(Set(trace.map(\.name)).isSuperset(of: wanted), "spans of the trace: \(trace.map(\.name).sorted())")
        #expect(receiver.contentTypes.allSatisfy { $0 == "application/x-protobuf" })

        // Connected: the accept span is the caller's child; every other span's parent is in the trace.
        let ids = Set(trace.map(\.spanID))
        let accept = try #require(trace.first { $0.name == "pushhub.accept" })
        #expect(accept.parentSpanID == callerSpan)
        #expect(accept.attributes["pushhub.notification_id"] == id)
        for span in trace where span.name != "pushhub.accept" {
            #expect(ids.contains(span.parentSpanID), "\(span.name)'s parent \(span.parentSpanID) is in the trace")
        }
        let byID = Dictionary(trace.map { ($0.spanID, $0) }, uniquingKeysWith: { first, _ in first })
        let dispatch = try #require(trace.first { $0.name == "pushhub.dispatch" })
        #expect(dispatch.parentSpanID == accept.spanID)
        // The phone (APNs) and the tablet (FCM) have templates: a batch each.
        let batches = trace.filter { $0.name == "pushhub.dispatch.batch" }
        #expect(batches.count == 2 && batches.allSatisfy { $0.parentSpanID == dispatch.spanID })
        #expect(Set(batches.compactMap { $0.attributes["pushhub.platform"] }) == ["apns", "fcm"])
        let deliveries = trace.filter { $0.name == "pushhub.deliver" }
        #expect(deliveries.count == 2 && deliveries.allSatisfy { byID[$0.parentSpanID]?.name == "pushhub.dispatch.batch" })
        let calls = trace.filter { $0.name == "pushhub.pns" }
        #expect(calls.count == 2 && calls.allSatisfy { byID[$0.parentSpanID]?.name == "pushhub.deliver" })
        #expect(calls.allSatisfy { $0.attributes["http.response.status_code"] == "200" })
        let outcomes = trace.filter { $0.name == "pushhub.outcome" }
        #expect(outcomes.count == 3, "two batches' results and the dispatcher's summary")
        #expect(outcomes.allSatisfy { ["pushhub.deliver", "pushhub.dispatch"].contains(byID[$0.parentSpanID]?.name ?? "") })
        #expect(trace.allSatisfy { $0.service == "pushhub-dev" })
        let elsewhere = receiver.spans.filter { $0.traceID != traceID && $0.attributes["pushhub.notification_id"] == id }
        #expect(elsewhere.isEmpty, "nothing of this send in another trace")

        // The trace id is the one in the logs: the lines logged inside the send's spans carry it.
        let logged = stack.process.output.filter { $0.contains("\"trace_id\":\"\(traceID)\"") }
        #expect(!logged.isEmpty, "a log line with the trace id")

        // A send without a traceparent starts a trace of its own at the ingress; to a tag of a
        // few devices, the ingress resolves it and makes the batches under its accept span.
        let (second, _, secondResponse) = try await stack.call(
            "POST", "/\(stack.hub)/messages", #"{"message":"Untraced"}"#,
            headers: ["ServiceBusNotification-Format": "template", "ServiceBusNotification-Tags": "breaking"])
        #expect(second == 201)
        let secondID = try #require(secondResponse?.value(forHTTPHeaderField: "TrackingId"))
        _ = try await stack.waitCompleted(secondID)
        let rootDeadline = ContinuousClock.now + .seconds(10)
        var root: ReceivedSpan?
        while root == nil, ContinuousClock.now < rootDeadline {
            root = receiver.spans.first { $0.name == "pushhub.accept" && $0.attributes["pushhub.notification_id"] == secondID }
            try await Task.sleep(for: .milliseconds(100))
        }
        let started = try #require(root)
        #expect(started.parentSpanID.isEmpty && started.traceID != traceID)
        var own: [ReceivedSpan] = []
        let ownDeadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < ownDeadline {
            own = receiver.spans.filter { $0.traceID == started.traceID }
            if own.filter({ $0.name == "pushhub.outcome" }).count >= 2 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        let smallBatches = own.filter { $0.name == "pushhub.dispatch.batch" }
        #expect(smallBatches.count == 2 && smallBatches.allSatisfy { $0.parentSpanID == started.spanID }, "\(own.map(\.name))")
        #expect(!own.contains { $0.name == "pushhub.dispatch" }, "no dispatcher hop")
        #expect(own.filter { $0.name == "pushhub.outcome" }.count == 2, "the results; the summary was recorded as the send was accepted")
        stack.process.signal(SIGTERM)
        #expect(await stack.process.exitStatus(within: .seconds(30)) == 0)
    }
}

/// A span as the receiver decoded it.
struct ReceivedSpan: Sendable, Equatable {
    var traceID = ""
    var spanID = ""
    var parentSpanID = ""
    var name = ""
    var service = ""
    var attributes: [String: String] = [:]
}

/// Just enough of OTLP's protobuf (`ExportTraceServiceRequest`) to read spans: their ids,
/// names, string and integer attributes, and the resource's `service.name`.
enum OTLPTraces {
    struct Malformed: Error {}

    static func spans(in body: [UInt8]) throws -> [ReceivedSpan] {
        var spans: [ReceivedSpan] = []
        for (field, resourceSpans) in try fields(body[...]) where field == 1 {
            var service = ""
            var scopes: [ArraySlice<UInt8>] = []
            for (field, value) in try fields(resourceSpans) {
                if field == 1 {
                    for (attribute, keyValue) in try fields(value) where attribute == 1 {
                        let (key, text) = try Self.keyValue(keyValue)
                        if key == "service.name" { service = text }
                    }
                }
                if field == 2 { scopes.append(value) }
            }
            for scope in scopes {
                for (field, span) in try fields(scope) where field == 2 { spans.append(try self.span(span, service: service)) }
            }
        }
        return spans
    }

    static func span(_ bytes: ArraySlice<UInt8>, service: String) throws -> ReceivedSpan {
        var span = ReceivedSpan(service: service)
        for (field, value) in try fields(bytes) {
            switch field {
            case 1: span.traceID = hex(value)
            case 2: span.spanID = hex(value)
            case 4: span.parentSpanID = hex(value)
            case 5: span.name = String(decoding: value, as: UTF8.self)
            case 9:
                let (key, text) = try keyValue(value)
                span.attributes[key] = text
            default: break
            }
        }
        return span
    }

    /// A KeyValue: its key, and its value as text (a string, or an integer in decimal).
    static func keyValue(_ bytes: ArraySlice<UInt8>) throws -> (String, String) {
        var key = ""
        var text = ""
        for (field, value) in try fields(bytes) {
            if field == 1 { key = String(decoding: value, as: UTF8.self) }
            if field == 2 {
                for (kind, payload) in try fields(value) {
                    if kind == 1 { text = String(decoding: payload, as: UTF8.self) }
                    if kind == 3 {
                        var copy = payload
                        text = String(Int64(bitPattern: try varint(&copy)))
                    }
                }
            }
        }
        return (key, text)
    }

    /// Each field's number and payload: a length-delimited or fixed field's bytes, a varint's
    /// own bytes.
    static func fields(_ input: ArraySlice<UInt8>) throws -> [(Int, ArraySlice<UInt8>)] {
        var rest = input
        var out: [(Int, ArraySlice<UInt8>)] = []
        while !rest.isEmpty {
            let key = try varint(&rest)
            let length: Int
            switch key & 7 {
            case 0:
                let start = rest.startIndex
                _ = try varint(&rest)
                out.append((Int(key >> 3), input[start..<rest.startIndex]))
                continue
            case 1: length = 8
            case 2: length = Int(try varint(&rest))
            case 5: length = 4
            default: throw Malformed()
            }
            guard length >= 0, length <= rest.count else { throw Malformed() }
            out.append((Int(key >> 3), rest.prefix(length)))
            rest = rest.dropFirst(length)
        }
        return out
    }

    static func varint(_ bytes: inout ArraySlice<UInt8>) throws -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while shift < 64, let byte = bytes.popFirst() {
            value |= UInt64(byte & 0x7f) << shift
            if byte & 0x80 == 0 { return value }
            shift += 7
        }
        throw Malformed()
    }

    static func hex(_ bytes: ArraySlice<UInt8>) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
}
