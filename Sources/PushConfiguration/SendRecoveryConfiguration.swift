import Foundation

/// `recovery` in `pushhub.yaml`: whether accepted sends are kept in the store and published
/// again when they stall, and when a send that makes no progress is given up. Written either
/// as `recovery: republish` (or `off`), or as a mapping:
///
/// ```yaml
/// recovery:
///   mode: republish
///   checkEvery: 15s     # how often each ingress looks for stalled sends
///   grace: 2m           # how long a send may make no progress before it is published again
///   abandonAfter: 30m   # a send without expiresAt ends Abandoned this long after acceptance (plus grace)
///   keepEnded: 7d       # how long an ended send's outcome is kept (GET …/messages/{id}), then deleted
/// ```
public struct SendRecoveryConfiguration: Codable, Sendable, Equatable {
    public enum Mode: String, Codable, Sendable, CaseIterable {
        /// Keep every accepted send until it ends, and publish it again when it stalls.
        case republish
        /// Trust the broker's acknowledgement (the default with a Kafka cluster).
        case off
    }

    /// nil: `republish` on the embedded cluster, `off` on a Kafka cluster. The embedded
    /// cluster keeps nothing across a restart, so it always republishes.
    public var mode: Mode?
    public var checkEvery: TimeInterval
    public var grace: TimeInterval
    /// Azure Notification Hubs gives a send 30 minutes.
    public var abandonAfter: TimeInterval
    /// How long a send that ended is kept in the store (its outcome and counts), from its end;
    /// the recovery round deletes it after that, so the store does not grow with every send for
    /// ever. (Its error details go after a week whatever this says.)
    public var keepEnded: TimeInterval

    public static let defaultCheckEvery: TimeInterval = 15
    public static let defaultGrace: TimeInterval = 120
    public static let defaultAbandonAfter: TimeInterval = 30 * 60
    /// A week, as long as a send's error details are kept.
    public static let defaultKeepEnded: TimeInterval = 7 * 86_400

    public init(
        mode: Mode? = nil, checkEvery: TimeInterval = Self.defaultCheckEvery, grace: TimeInterval = Self.defaultGrace,
        abandonAfter: TimeInterval = Self.defaultAbandonAfter, keepEnded: TimeInterval = Self.defaultKeepEnded
    ) {
        self.mode = mode
        self.checkEvery = checkEvery
        self.grace = grace
        self.abandonAfter = abandonAfter
        self.keepEnded = keepEnded
    }

    /// Whether accepted sends are kept and published again, given where Kafka is.
    public func republishes(embeddedKafka: Bool) -> Bool {
        embeddedKafka || mode == .republish
    }

    enum CodingKeys: String, CodingKey { case mode, checkEvery, grace, abandonAfter, keepEnded }

    public init(from decoder: any Decoder) throws {
        if let single = try? decoder.singleValueContainer(), let text = try? single.decode(String.self) {
            guard let mode = Mode(rawValue: text) else {
                throw DecodingError.dataCorruptedError(
                    in: single, debugDescription: "must be \(Mode.allCases.map(\.rawValue).joined(separator: " or ")), or a mapping, not \(text)")
            }
            self.init(mode: mode)
            return
        }
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(mode: try container.decodeIfPresent(Mode.self, forKey: .mode))
        for (key, bounds, path) in [
            (CodingKeys.checkEvery, 0.1...3600, \Self.checkEvery), (.grace, 1...86_400, \Self.grace),
            (.abandonAfter, 1...(7 * 86_400), \Self.abandonAfter),
            // At least a day: an idempotency key answers with its send's id for 24 hours.
            (.keepEnded, 86_400...(366 * 86_400), \Self.keepEnded),
        ] {
            guard container.contains(key) else { continue }
            // A duration as text (`15s`), or a plain number of seconds.
            let text = (try? container.decode(String.self, forKey: key)) ?? (try? container.decode(Double.self, forKey: key)).map { "\($0)" } ?? ""
            guard let seconds = Self.seconds(text), bounds.contains(seconds) else {
                throw DecodingError.dataCorruptedError(
                    forKey: key, in: container,
                    debugDescription:
                        "\(text) is not a duration from \(Self.format(bounds.lowerBound)) to \(Self.format(bounds.upperBound)) (such as 500ms, 15s, 2m, 1h, 7d)"
                )
            }
            self[keyPath: path] = seconds
        }
        guard grace >= checkEvery else {
            throw DecodingError.dataCorruptedError(
                forKey: .grace, in: container, debugDescription: "\(Self.format(grace)) is shorter than checkEvery (\(Self.format(checkEvery)))")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(mode, forKey: .mode)
        try container.encode(Self.format(checkEvery), forKey: .checkEvery)
        try container.encode(Self.format(grace), forKey: .grace)
        try container.encode(Self.format(abandonAfter), forKey: .abandonAfter)
        try container.encode(Self.format(keepEnded), forKey: .keepEnded)
    }

    /// `500ms`, `15s`, `2m`, `1h`, `7d`, or a plain number of seconds.
    static func seconds(_ text: String) -> TimeInterval? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard trimmed.count <= 32 else { return nil }
        for (suffix, scale) in [("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0), ("d", 86_400.0)] where trimmed.hasSuffix(suffix) {
            guard let number = Double(trimmed.dropLast(suffix.count)), number.isFinite, number >= 0 else { return nil }
            return number * scale
        }
        guard let number = Double(trimmed), number.isFinite, number >= 0 else { return nil }
        return number
    }

    static func format(_ seconds: TimeInterval) -> String {
        if seconds < 1 { return "\(Int((seconds * 1000).rounded()))ms" }
        if seconds.truncatingRemainder(dividingBy: 86_400) == 0 { return "\(Int(seconds / 86_400))d" }
        if seconds.truncatingRemainder(dividingBy: 3600) == 0 { return "\(Int(seconds / 3600))h" }
        if seconds.truncatingRemainder(dividingBy: 60) == 0 { return "\(Int(seconds / 60))m" }
        if seconds.truncatingRemainder(dividingBy: 1) == 0 { return "\(Int(seconds))s" }
        return "\(Int((seconds * 1000).rounded()))ms"
    }
}
