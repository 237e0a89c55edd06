import Foundation
import Testing

@testable import PushKafka

@Suite("Trace headers")
struct TraceHeadersTests {
    static let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    @Test("a traceparent is taken only when well formed; the last header of a name counts; injecting replaces")
    func headers() {
        #expect(TraceHeaders.isWellFormed(Self.good))
        let bad = [
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-later", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "", "00", Self.good.uppercased(), "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            Self.good + "-extra", "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            String(repeating: "a", count: 600), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0\u{301}",
        ]
        for text in bad { #expect(!TraceHeaders.isWellFormed(text), "\(text.prefix(80))") }
        let extractor = KafkaHeadersExtractor()
        let carrier = [KafkaHeader(key: "traceparent", value: "garbage"), KafkaHeader(key: "traceparent", value: Self.good)]
        #expect(extractor.extract(key: "traceparent", from: carrier) == Self.good)
        #expect(extractor.extract(key: "traceparent", from: carrier.reversed()) == nil, "the last one counts, and it is malformed")
        for state in ["a=1", "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", "vendor@sys=x, b=2"] {
            #expect(extractor.extract(key: "tracestate", from: [KafkaHeader(key: "tracestate", value: state)]) == state, "\(state)")
        }
        let badStates = [
            "", "a=1,,b=2", "A=1", "a=", "=1", "a=1=2", "a=\u{1}", (0..<33).map { "k\($0)=v" }.joined(separator: ","),
            String(repeating: "a", count: 600),
        ]
        for state in badStates {
            #expect(extractor.extract(key: "tracestate", from: [KafkaHeader(key: "tracestate", value: state)]) == nil, "\(state.prefix(40))")
        }
        var headers = [KafkaHeader(key: "traceparent", value: "old"), KafkaHeader(key: "other", value: "x")]
        KafkaHeadersInjector().inject(Self.good, forKey: "traceparent", into: &headers)
        #expect(headers == [KafkaHeader(key: "other", value: "x"), KafkaHeader(key: "traceparent", value: Self.good)])
    }

    @Test("with no tracer, records carry nothing more and a record's context is top level")
    func inactive() {
        #expect(!TraceHeaders.isActive)
        #expect(TraceHeaders.headers().isEmpty)
    }
}
