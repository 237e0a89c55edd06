import Foundation
import PushModel

/// A hub's webhook in `pushhub.yaml`: PushHub POSTs batches of delivery outcomes to `url`,
/// each signed with `secret` (HMAC-SHA256, `PushHub-Signature: t=…,v1=…`).
///
/// ```yaml
/// hubs:
///   - name: news
///     webhooks:
///       - url: https://hooks.example.com/push-outcomes
///         secret: "at least 32 characters, shared with the receiver"
///         outcomes: failures   # or all (the default)
/// ```
///
/// Targets come from this file only; no API sets them.
public struct WebhookConfiguration: Codable, Sendable, Equatable {
    public var url: String
    public var secret: String
    /// `all` (the default) or `failures`: every outcome but `delivered`.
    public var outcomes: Outcomes?

    public enum Outcomes: String, Codable, Sendable {
        case all, failures
    }

    public init(url: String, secret: String, outcomes: Outcomes? = nil) {
        self.url = url
        self.secret = secret
        self.outcomes = outcomes
    }

    /// Webhooks a hub may have.
    public static let maximumPerHub = 4

    /// An https URL, or http to this machine (`127.0.0.1`, `::1`, `localhost`) for a receiver
    /// beside PushHub; no credentials in it; a secret of 32 to 256 characters.
    func validate(at path: String) throws {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(), let host = components.host?.lowercased(),
            !host.isEmpty
        else { throw ConfigurationError("\(path).url: an http(s) URL is needed") }
        let loopback = ["127.0.0.1", "::1", "[::1]", "localhost"].contains(host)
        guard scheme == "https" || (scheme == "http" && loopback) else {
            throw ConfigurationError("\(path).url: must be https (http only to 127.0.0.1, ::1 or localhost), not \(scheme) to \(host)")
        }
        guard components.user == nil, components.password == nil else {
            throw ConfigurationError("\(path).url: must not carry credentials; the signature authenticates PushHub")
        }
        guard (32...256).contains(secret.utf8.count) else { throw ConfigurationError("\(path).secret: 32 to 256 characters") }
    }
}
