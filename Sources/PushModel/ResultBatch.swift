import Foundation

/// What happened to targets of one notification, or how many the dispatcher sent where:
/// what workers and the dispatcher produce into `pushhub.results`.
public struct ResultBatch: WireMessage, Equatable {
    public static let schema = "pushhub.result-batch.v1"

    public var notificationId: String
    /// Empty only when the request was rejected before its hub could be read.
    public var hub: String
    /// The platform of `results`; absent in a dispatch summary.
    public var platform: Platform?
    /// Results or a dispatch summary: one of the two, as the type says.
    public var content: Content

    /// What a result batch holds.
    public enum Content: Sendable, Equatable {
        /// One entry per target, for a worker's batch or a rejected request.
        case results([DeliveryResult])
        /// The dispatch summary: targets sent to each platform (all zero: no target found).
        case summary([Platform: Int])
    }

    /// The results, when it holds results.
    public var results: [DeliveryResult]? {
        if case .results(let results) = content { return results }
        return nil
    }

    /// The dispatch summary, when it is one.
    public var dispatched: [Platform: Int]? {
        if case .summary(let dispatched) = content { return dispatched }
        return nil
    }

    public init(notificationId: String, hub: String, platform: Platform? = nil, results: [DeliveryResult]) {
        self.notificationId = notificationId
        self.hub = hub
        self.platform = platform
        self.content = .results(results)
    }

    public init(notificationId: String, hub: String, dispatched: [Platform: Int]) {
        self.notificationId = notificationId
        self.hub = hub
        self.platform = nil
        self.content = .summary(dispatched)
    }

    enum CodingKeys: String, CodingKey { case notificationId, hub, platform, results, dispatched }

    /// On the wire (unchanged): `results` or `dispatched`, never both.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        notificationId = try container.decode(String.self, forKey: .notificationId)
        hub = try container.decode(String.self, forKey: .hub)
        platform = try container.decodeIfPresent(Platform.self, forKey: .platform)
        let results = try container.decodeIfPresent([DeliveryResult].self, forKey: .results)
        let dispatched = try container.decodeIfPresent([Platform: Int].self, forKey: .dispatched)
        switch (results, dispatched) {
        case (let results?, nil): content = .results(results)
        case (nil, let dispatched?): content = .summary(dispatched)
        case (.some, .some):
            throw DecodingError.dataCorruptedError(
                forKey: .dispatched, in: container, debugDescription: "a result batch has results or a dispatch summary, not both")
        case (nil, nil):
            throw DecodingError.keyNotFound(
                CodingKeys.results, .init(codingPath: [], debugDescription: "a result batch has results or a dispatch summary"))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(notificationId, forKey: .notificationId)
        try container.encode(hub, forKey: .hub)
        try container.encodeIfPresent(platform, forKey: .platform)
        switch content {
        case .results(let results): try container.encode(results, forKey: .results)
        case .summary(let dispatched): try container.encode(dispatched, forKey: .dispatched)
        }
    }

    /// Most targets a summary may count on one platform (a billion: more devices than any hub has).
    public static let maximumDispatched = 1_000_000_000

    public func validate() throws(WireError) {
        try FieldCheck.notEmpty(notificationId, "notificationId")
        if !hub.isEmpty { try FieldCheck.hubName(hub, "hub") }
        switch content {
        case .results(let results):
            // One batch of a worker at most: each result costs the outcome recorder a row.
            guard (1...DeliveryBatch.maximumTargets).contains(results.count) else {
                throw .invalidField(field: "results", reason: "must hold 1 to \(DeliveryBatch.maximumTargets) results, not \(results.count)")
            }
            for (index, result) in results.enumerated() {
                try result.validate(field: "results[\(index)]")
            }
            if hub.isEmpty, results.contains(where: { $0.outcome != .rejected }) {
                throw .invalidField(field: "hub", reason: "must not be empty except for rejected requests")
            }
        case .summary(let dispatched):
            // Bounded, so that the counts of every platform add up without overflow.
            for (platform, count) in dispatched where !(0...Self.maximumDispatched).contains(count) {
                throw .invalidField(field: "dispatched.\(platform.rawValue)", reason: "must be 0 to \(Self.maximumDispatched), not \(count)")
            }
            if hub.isEmpty { throw .invalidField(field: "hub", reason: "must not be empty") }
        }
    }
}

/// How a delivery ended.
public enum Outcome: String, Codable, Sendable, CaseIterable {
    case delivered
    /// The PNS says the handle is dead; its registration is deleted.
    case invalidHandle
    case throttled
    case payloadRejected
    /// `expiresAt` passed before the PNS took it.
    case expired
    case failed
    /// The request itself could not be used (bad record, unknown hub, invalid expression).
    case rejected
}

/// The result for one target.
public struct DeliveryResult: Codable, Sendable, Equatable {
    public var registrationId: String?
    public var handle: String?
    public var outcome: Outcome
    /// The PNS's HTTP status, when it answered.
    public var pnsStatus: Int?
    /// The PNS's reason (e.g. `BadDeviceToken`), or why PushHub gave up.
    public var pnsReason: String?
    public var attempts: Int
    /// Milliseconds from the send's acceptance to this result.
    public var dwellMs: Int

    public init(
        registrationId: String?, handle: String?, outcome: Outcome, pnsStatus: Int? = nil, pnsReason: String? = nil,
        attempts: Int, dwellMs: Int
    ) {
        self.registrationId = registrationId
        self.handle = handle
        self.outcome = outcome
        self.pnsStatus = pnsStatus
        self.pnsReason = pnsReason
        self.attempts = attempts
        self.dwellMs = dwellMs
    }

    /// `field` is named only for an error (the ingress checks every result it records).
    func validate(field: @autoclosure () -> String) throws(WireError) {
        if attempts < 0 { throw .invalidField(field: "\(field()).attempts", reason: "must not be negative") }
        if dwellMs < 0 { throw .invalidField(field: "\(field()).dwellMs", reason: "must not be negative") }
        if let pnsStatus, !(100...599).contains(pnsStatus) {
            throw .invalidField(field: "\(field()).pnsStatus", reason: "must be an HTTP status, not \(pnsStatus)")
        }
        if outcome != .rejected, registrationId == nil, handle == nil {
            throw .invalidField(field: "\(field()).handle", reason: "missing: a result names its registration or handle")
        }
    }
}
