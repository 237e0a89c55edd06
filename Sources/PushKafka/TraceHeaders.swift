import Foundation
import Instrumentation

/// The W3C trace context (`traceparent`, `tracestate`) of a record, carried in its headers
/// from the ingress through every hop, as the shared contract says; a producer may set them.
/// With no tracer bootstrapped nothing is read or written, so a record costs nothing more.
public enum TraceHeaders {
    public static let names: Set<String> = ["traceparent", "tracestate"]

    /// A tracer is bootstrapped, or bound to the task (`withTracer`).
    public static var isActive: Bool { !(InstrumentationSystem.instrument is NoOpInstrument) }

    /// The context a record carries, as the parent of the span that handles it; top level when
    /// it carries none (or no tracer runs).
    public static func context(of record: KafkaRecord) -> InstrumentationContext {
        var context = InstrumentationContext.topLevel
        if isActive { InstrumentationSystem.instrument.extract(record.headers, into: &context, using: KafkaHeadersExtractor()) }
        return context
    }

    /// The headers that carry `context` (the current task's by default) to the next hop.
    public static func headers(for context: InstrumentationContext? = InstrumentationContext.current) -> [KafkaHeader] {
        guard let context, isActive else { return [] }
        var headers: [KafkaHeader] = []
        InstrumentationSystem.instrument.inject(context, into: &headers, using: KafkaHeadersInjector())
        return headers
    }

    /// `00-{32 hex}-{16 hex}-{2 hex}`, lowercase, ids not all zero: version 00, the one the
    /// tracer reads. A record's header is another service's text: one that is not this is
    /// dropped rather than handed to the tracer (which would log it and drop the context).
    static func isWellFormed(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 55, text.hasPrefix("00-") else { return false }
        func hex(_ range: Range<Int>) -> Bool {
            bytes[range].allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) }
        }
        func zero(_ range: Range<Int>) -> Bool { bytes[range].allSatisfy { $0 == UInt8(ascii: "0") } }
        let dashes = [2, 35, 52].allSatisfy { bytes[$0] == UInt8(ascii: "-") }
        return dashes && hex(0..<2) && hex(3..<35) && hex(36..<52) && hex(53..<55) && !zero(3..<35) && !zero(36..<52)
    }

    /// At most 32 `key=value` members, comma-separated, as W3C's `tracestate` has them
    /// (lowercase keys of letters, digits and `_-*/@`; printable values without `,` or `=`), no
    /// empty member. Another is dropped on its own, keeping the `traceparent`.
    static func isWellFormedState(_ text: String) -> Bool {
        let members = text.split(separator: ",", omittingEmptySubsequences: false)
        guard !text.isEmpty, members.count <= 32 else { return false }
        return members.allSatisfy { member in
            let trimmed = member.trimmingCharacters(in: .init(charactersIn: " \t"))
            let parts = trimmed.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, (1...256).contains(parts[0].utf8.count), (1...256).contains(parts[1].utf8.count) else { return false }
            let keyOK = parts[0].utf8.allSatisfy {
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0)
                    || "_-*/@".utf8.contains($0)
            }
            let valueOK = parts[1].utf8.allSatisfy { (0x20...0x7E).contains($0) && $0 != UInt8(ascii: ",") && $0 != UInt8(ascii: "=") }
            return keyOK && valueOK && parts[1].last != " "
        }
    }
}

/// Reads a context's values from record headers: the last header of a name counts, as
/// Kafka's tools read them; a malformed `traceparent` is left out.
public struct KafkaHeadersExtractor: Extractor {
    public init() {}

    public func extract(key: String, from carrier: [KafkaHeader]) -> String? {
        guard let value = carrier.last(where: { $0.key == key })?.value, value.count <= 512 else { return nil }
        let text = String(decoding: value, as: UTF8.self)
        switch key {
        case "traceparent": return TraceHeaders.isWellFormed(text) ? text : nil
        case "tracestate": return TraceHeaders.isWellFormedState(text) ? text : nil
        default: return text
        }
    }
}

/// Writes a context's values as record headers, one per name.
public struct KafkaHeadersInjector: Injector {
    public init() {}

    public func inject(_ value: String, forKey key: String, into carrier: inout [KafkaHeader]) {
        carrier.removeAll { $0.key == key }
        carrier.append(KafkaHeader(key: key, value: Data(value.utf8)))
    }
}
