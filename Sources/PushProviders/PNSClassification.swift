import PushModel

/// What a PNS answer means for a target: what PushHub does next.
public enum PNSClassification: Sendable, Equatable {
    case delivered
    /// The handle is dead: the registration is pruned, never retried.
    case invalidHandle
    /// The payload or request is wrong: never retried.
    case payloadRejected
    /// Too many requests: retried with backoff, after `retryAfter` when the PNS said.
    case throttled(retryAfter: Duration?)
    /// A passing failure (5xx, time-out): retried with backoff.
    case retry(retryAfter: Duration?)
    /// The provider token was refused as expired: renew it and retry at once.
    case renewToken
    /// PushHub's credentials or set-up are wrong (bad key, wrong topic, …): not retried.
    case misconfigured(Misconfiguration)
    /// A reason this build does not know; treated as a failure, not retried.
    case unknown(String)

    /// The outcome a target ends with when this is the last answer.
    public var finalOutcome: Outcome {
        switch self {
        case .delivered: .delivered
        case .invalidHandle: .invalidHandle
        case .payloadRejected: .payloadRejected
        case .throttled: .throttled
        case .retry, .renewToken, .misconfigured, .unknown: .failed
        }
    }

    public var isRetried: Bool {
        switch self {
        case .throttled, .retry, .renewToken: true
        default: false
        }
    }
}

/// What is wrong with PushHub's set-up for a push: found by PushHub before sending, or said by
/// the PNS. Its description is the reason a result carries.
public enum Misconfiguration: Sendable, Equatable, CustomStringConvertible {
    /// The hub has no credentials for the platform.
    case noCredentials(hub: String, platform: Platform)
    /// The handle's URL leads somewhere the hub's endpoint policy does not allow.
    case endpointNotAllowed(String)
    /// The APNs key cannot sign a provider token.
    case invalidProviderKey
    /// The Web Push VAPID key cannot sign for the endpoint.
    case vapid(String)
    /// The PNS refused a freshly renewed access token.
    case credentialsRefused(String)
    /// The PNS's own reason (APNs `BadTopic`, FCM `SENDER_ID_MISMATCH`, a WNS 403, …).
    case refusedByPNS(String)

    /// The reason's first word, which results and docs name (`NoCredentials`, `EndpointNotAllowed`, …).
    public var name: String {
        switch self {
        case .noCredentials: "NoCredentials"
        case .endpointNotAllowed: "EndpointNotAllowed"
        case .invalidProviderKey: "InvalidProviderKey"
        case .vapid: "VAPID"
        case .credentialsRefused(let reason), .refusedByPNS(let reason): reason
        }
    }

    public var description: String {
        switch self {
        case .noCredentials(let hub, let platform): "NoCredentials: hub \(hub) has no \(platform.credentialsName)"
        case .endpointNotAllowed(let why): "EndpointNotAllowed: \(why)"
        case .invalidProviderKey: "InvalidProviderKey: the APNs key could not sign"
        case .vapid(let why): "VAPID: \(why)"
        case .credentialsRefused(let reason), .refusedByPNS(let reason): reason
        }
    }
}

extension Platform {
    /// What a hub needs for this platform, in words.
    var credentialsName: String {
        switch self {
        case .apns: "APNs credentials"
        case .fcm: "FCM credentials"
        case .wns: "WNS credentials"
        case .webpush: "Web Push VAPID keys"
        case .hms: "HMS Push Kit credentials"
        case .adm: "ADM credentials"
        case .xiaomi: "Xiaomi credentials"
        case .baidu: "Baidu credentials"
        }
    }
}

/// A PNS's reason or error code: those this build knows by name, and `unknown` for one the PNS
/// adds later, kept as it was spelled.
public protocol PNSReasonCode: Sendable, Hashable, CustomStringConvertible {
    /// Each known code with the PNS's spelling.
    static var names: [(Self, String)] { get }
    static func unknown(_ name: String) -> Self
    /// The spelling of an unknown code; nil for a known one.
    var unknownName: String? { get }
}

extension PNSReasonCode {
    /// The code spelled `name`.
    public init(_ name: String) { self = Self.names.first { $0.1 == name }?.0 ?? .unknown(name) }

    /// The PNS's spelling.
    public var description: String { unknownName ?? Self.names.first { $0.0 == self }?.1 ?? "" }
}
