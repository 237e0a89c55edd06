import Foundation

extension ResultBatch {
    /// This batch's wire JSON written straight to bytes: the fields, sorted keys and escaping of
    /// `WireCoding.encode`, without JSONEncoder's box per field. A worker writes one batch of up
    /// to 500 results per record, which made JSONEncoder a tenth of its CPU.
    func wireJSON() -> Data {
        var out = JSONBytes(capacity: 160 + (results?.count ?? 0) * 170)
        out.byte(UInt8(ascii: "{"))
        if case .summary(let dispatched) = content {
            out.key("dispatched", first: true)
            out.byte(UInt8(ascii: "{"))
            for (index, platform) in dispatched.keys.sorted(by: { $0.rawValue < $1.rawValue }).enumerated() {
                out.key(platform.rawValue, first: index == 0)
                out.integer(dispatched[platform]!)
            }
            out.byte(UInt8(ascii: "}"))
        }
        out.key("hub", first: dispatched == nil)
        out.string(hub)
        out.key("notificationId")
        out.string(notificationId)
        out.field("platform", platform?.rawValue)
        if case .results(let results) = content {
            out.key("results")
            out.array(results) { result, out in result.write(to: &out) }
        }
        out.key("schema")
        out.string(Self.schema)
        out.byte(UInt8(ascii: "}"))
        return Data(out.bytes)
    }
}

extension DeliveryResult {
    /// The result as a JSON object with sorted keys; absent optionals are left out.
    fileprivate func write(to out: inout JSONBytes) {
        out.byte(UInt8(ascii: "{"))
        out.key("attempts", first: true)
        out.integer(attempts)
        out.key("dwellMs")
        out.integer(dwellMs)
        out.field("handle", handle)
        out.key("outcome")
        out.string(outcome.rawValue)
        out.field("pnsReason", pnsReason)
        out.field("pnsStatus", pnsStatus)
        out.field("registrationId", registrationId)
        out.byte(UInt8(ascii: "}"))
    }
}

/// JSON text for one value, as PushHub writes it.
public enum JSONText {
    /// `value` as a JSON string, quotes included, escaped as JSONEncoder escapes with
    /// `.withoutEscapingSlashes`.
    public static func quoted(_ value: String) -> [UInt8] {
        var out = JSONBytes(capacity: value.utf8.count + 2)
        out.string(value)
        return out.bytes
    }

    /// An object of strings (a template's headers) with sorted keys, as
    /// `WireCoding.makeEncoder()` writes it.
    public static func object(_ values: [String: String]) -> String {
        var out = JSONBytes(capacity: values.reduce(2) { $0 + $1.key.utf8.count + $1.value.utf8.count + 6 })
        out.object(values)
        return String(decoding: out.bytes, as: UTF8.self)
    }
}

/// JSON written byte by byte, escaped as JSONEncoder escapes with `.withoutEscapingSlashes`.
/// The package's: the store writes an installation's rows with it too.
package struct JSONBytes {
    package private(set) var bytes: [UInt8] = []

    package init(capacity: Int) { bytes.reserveCapacity(capacity) }

    package mutating func byte(_ value: UInt8) { bytes.append(value) }

    /// `"name":`, after a comma unless it is the object's first key.
    package mutating func key(_ name: String, first: Bool = false) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        string(name)
        bytes.append(UInt8(ascii: ":"))
    }

    package mutating func integer(_ value: Int) { bytes.append(contentsOf: String(value).utf8) }

    /// JSON text that is JSON already (a document, an array made by another writer), as it is.
    package mutating func raw(_ json: String) { bytes.append(contentsOf: json.utf8) }

    /// Text written as it is: `true`, `false`, `null`.
    package mutating func literal(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    /// `[a,b,…]`, each element written by `write`.
    package mutating func array<Elements: Sequence>(_ elements: Elements, _ write: (Elements.Element, inout JSONBytes) -> Void) {
        bytes.append(UInt8(ascii: "["))
        for (index, element) in elements.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            write(element, &self)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// `,"name":"value"`, or nothing when there is no value: an optional field.
    mutating func field(_ name: String, _ value: String?) {
        guard let value else { return }
        key(name)
        string(value)
    }

    /// `,"name":n`, or nothing when there is no value.
    mutating func field(_ name: String, _ value: Int?) {
        guard let value else { return }
        key(name)
        integer(value)
    }

    /// `value` as a JSON string: runs that need no escape are copied whole, each escape
    /// written in place (no array a character).
    package mutating func string(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { utf8 in
            var run = 0
            for index in utf8.indices {
                let byte = utf8[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                if run < index { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run..<index])) }
                escape(byte)
                run = index + 1
            }
            if run < utf8.count { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run...])) }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// The escape of a quote, a backslash or a control character.
    private mutating func escape(_ byte: UInt8) {
        bytes.append(UInt8(ascii: "\\"))
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(byte)
        case 0x08: bytes.append(UInt8(ascii: "b"))
        case 0x0C: bytes.append(UInt8(ascii: "f"))
        case 0x0A: bytes.append(UInt8(ascii: "n"))
        case 0x0D: bytes.append(UInt8(ascii: "r"))
        case 0x09: bytes.append(UInt8(ascii: "t"))
        default:
            bytes.append(UInt8(ascii: "u"))
            bytes.append(UInt8(ascii: "0"))
            bytes.append(UInt8(ascii: "0"))
            bytes.append(Self.hexDigit(byte >> 4))
            bytes.append(Self.hexDigit(byte & 0xF))
        }
    }

    private static func hexDigit(_ value: UInt8) -> UInt8 { value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10 }
}

extension ResultBatch {
    /// The batch read straight from its wire bytes, not yet validated; nil for anything
    /// `JSONReader` does not take, which the caller then decodes with JSONDecoder for the
    /// error. The outcome recorder reads one batch of up to 500 results per record, and
    /// JSONDecoder was a third of its CPU. Public for the fuzz harness, which checks it against
    /// JSONDecoder; services read batches with `WireCoding.decode`.
    public static func fromWireJSON(_ data: Data) -> ResultBatch? {
        data.withUnsafeBytes { bytes -> ResultBatch? in
            var reader = JSONReader(bytes)
            var schema: String?
            var notificationId: String?
            var hub: String?
            var platform: Platform?
            var results: [DeliveryResult]?
            var dispatched: [Platform: Int]?
            let read = reader.fields(Self.wireKeys, depth: 2) { reader, key in
                switch key {
                case "schema": return reader.string(into: &schema)
                case "notificationId": return reader.string(into: &notificationId)
                case "hub": return reader.string(into: &hub)
                case "platform":
                    if reader.takeNull() { return true }
                    platform = reader.string().flatMap(Platform.init(rawValue:))
                    return platform != nil
                case "results":
                    if reader.takeNull() { return true }
                    results = reader.array(of: DeliveryResult.fromWireJSON)
                    return results != nil
                default:
                    if reader.takeNull() { return true }
                    var counts: [Platform: Int] = [:]
                    guard
                        reader.object({ reader, key in
                            guard let platform = Platform(rawValue: key), counts[platform] == nil, let count = reader.integer() else { return false }
                            counts[platform] = count
                            return true
                        })
                    else { return false }
                    dispatched = counts
                    return true
                }
            }
            guard read, reader.atEnd(), schema == Self.schema, let notificationId, let hub else { return nil }
            switch (results, dispatched) {
            case (let results?, nil): return ResultBatch(notificationId: notificationId, hub: hub, platform: platform, results: results)
            case (nil, let dispatched?):
                var batch = ResultBatch(notificationId: notificationId, hub: hub, dispatched: dispatched)
                batch.platform = platform
                return batch
            default: return nil
            }
        }
    }
}

extension ResultBatch {
    /// The keys `fromWireJSON` reads.
    static let wireKeys = ["schema", "notificationId", "hub", "platform", "results", "dispatched"]
}

extension DeliveryResult {
    /// The keys `fromWireJSON` reads.
    static let wireKeys = ["registrationId", "handle", "outcome", "pnsStatus", "pnsReason", "attempts", "dwellMs"]

    /// One result object, as `ResultBatch.fromWireJSON` reads it; nil for anything else.
    fileprivate static func fromWireJSON(_ reader: inout JSONReader) -> DeliveryResult? {
        var registrationId: String?
        var handle: String?
        var outcome: Outcome?
        var pnsStatus: Int?
        var pnsReason: String?
        var attempts: Int?
        var dwellMs: Int?
        let read = reader.fields(Self.wireKeys, depth: 4) { reader, key in
            // Optional fields may be null; required ones may not.
            switch key {
            case "registrationId": return reader.takeNull() || reader.string(into: &registrationId)
            case "handle": return reader.takeNull() || reader.string(into: &handle)
            case "outcome":
                outcome = reader.string().flatMap(Outcome.init(rawValue:))
                return outcome != nil
            case "pnsStatus": return reader.takeNull() || reader.integer(into: &pnsStatus)
            case "pnsReason": return reader.takeNull() || reader.string(into: &pnsReason)
            case "attempts": return reader.integer(into: &attempts)
            default: return reader.integer(into: &dwellMs)
            }
        }
        guard read, let outcome, let attempts, let dwellMs else { return nil }
        return DeliveryResult(
            registrationId: registrationId, handle: handle, outcome: outcome, pnsStatus: pnsStatus, pnsReason: pnsReason, attempts: attempts,
            dwellMs: dwellMs)
    }
}
