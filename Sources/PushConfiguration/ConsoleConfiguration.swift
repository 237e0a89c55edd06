import Foundation
import PushModel

/// `console` in `pushhub.yaml`: the web console the ingress serves at `/console`.
public struct ConsoleConfiguration: Codable, Sendable, Equatable {
    /// False turns the console off (404). On by default.
    public var enabled: Bool?
    /// The key that signs console sessions, 32 characters or more. Ingresses that share
    /// sessions (several replicas behind one address) need the same one; without it each
    /// process makes its own, and sessions end when it restarts.
    public var sessionSecret: String?
    /// How long a session lasts after sign-in (default 480, eight hours).
    public var sessionMinutes: Int?
    /// People who sign in with a name and password rather than a hub's connection string.
    /// Each has the Manage right on the hubs listed (on every hub when `hubs` is absent).
    public var accounts: [Account]?
    /// The metrics endpoints (`http://host:port/metrics`) of the other PushHub processes, read
    /// for the overview's consumer lag and the live charts. The ingress's own metrics are
    /// always read; `pushhub dev` runs everything in one process and needs none.
    public var metrics: [String]?

    public struct Account: Codable, Sendable, Equatable {
        public var name: String
        /// bcrypt, as `pushhub users hash` prints it.
        public var passwordHash: String
        public var hubs: [String]?

        /// Whether the account may sign in to `hub`: every hub without a list.
        public func allows(hub: String) -> Bool { hubs.map { $0.contains { CaseFolding.equal($0, hub) } } ?? true }

        public init(name: String, passwordHash: String, hubs: [String]? = nil) {
            self.name = name
            self.passwordHash = passwordHash
            self.hubs = hubs
        }
    }

    public init(enabled: Bool? = nil, sessionSecret: String? = nil, accounts: [Account]? = nil, metrics: [String]? = nil) {
        self.enabled = enabled
        self.sessionSecret = sessionSecret
        self.accounts = accounts
        self.metrics = metrics
    }

    public var isEnabled: Bool { enabled ?? true }
    public var sessionLifetime: TimeInterval { TimeInterval(sessionMinutes ?? 480) * 60 }

    /// The longest metrics answer read from one endpoint.
    public static let metricsBodyLimit = 4 << 20

    func validate(at path: String, hubs: HubsConfiguration) throws {
        if let sessionSecret, sessionSecret.utf8.count < 32 {
            throw ConfigurationError("\(path).sessionSecret: must be 32 characters or more")
        }
        if let sessionMinutes, !(5...(7 * 24 * 60)).contains(sessionMinutes) {
            throw ConfigurationError("\(path).sessionMinutes: must be 5 to 10080 (a week)")
        }
        var names = Set<String>()
        for (index, account) in (accounts ?? []).enumerated() {
            let at = "\(path).accounts[\(index)]"
            guard !account.name.isEmpty, account.name.utf8.count <= 100, !account.name.contains(":") else {
                throw ConfigurationError("\(at).name: 1 to 100 bytes, without a colon")
            }
            guard names.insert(account.name).inserted else { throw ConfigurationError("\(at).name: \(account.name) is listed twice") }
            guard account.passwordHash.hasPrefix("$2"), account.passwordHash.utf8.count == 60 else {
                throw ConfigurationError("\(at).passwordHash: a bcrypt hash ($2b$…, 60 characters), as `pushhub users hash` prints it")
            }
            for hub in account.hubs ?? [] where hubs.hub(named: hub) == nil {
                throw ConfigurationError("\(at).hubs: no hub named \(hub)")
            }
        }
        for (index, text) in (metrics ?? []).enumerated() {
            guard let url = URLComponents(string: text), ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host?.isEmpty == false,
                url.user == nil, url.password == nil
            else { throw ConfigurationError("\(path).metrics[\(index)]: an http(s) URL such as http://dispatcher:9100/metrics, not \(text)") }
        }
    }
}
