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
    case misconfigured(String)
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
