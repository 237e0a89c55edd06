import Crypto
import Foundation
import PushModel
import Yams
import _CryptoExtras

/// What `pushhub.yaml` holds: the hubs, their keys and PNS credentials, and the app-backend API.
public struct HubsConfiguration: Codable, Sendable, Equatable {
    public var hubs: [Hub]
    public var appBackend: AppBackend?
    /// The ingress's address as clients reach it (`https://push.example.com`), for `Location`
    /// and Atom ids; the request's Host when absent.
    public var publicBaseURL: String?
    /// Read `X-Forwarded-Proto` (set only when a proxy you trust sits in front and overwrites it).
    public var trustForwardedHeaders: Bool?
    /// Keeping accepted sends and publishing them again; giving up stalled ones.
    public var recovery: SendRecoveryConfiguration?
    /// How far the workers and the dispatcher may fall behind before PushHub waits for them.
    public var backlog: BacklogConfiguration?
    /// Seconds during which the dispatcher remembers the SendRequests it took, by
    /// notification id, so one produced twice into `pushhub.requests` is dispatched once
    /// (default 86400, a day; 0 remembers none). See docs/producing.md.
    public var dispatchDedupeSeconds: Int?
    /// Import and export jobs: their directory and limits.
    public var jobs: JobsConfiguration?
    /// The web console: sessions, accounts, the metrics it reads.
    public var console: ConsoleConfiguration?

    /// `dispatchDedupeSeconds`, the default filled in.
    public var dispatchDedupeWindow: TimeInterval { TimeInterval(dispatchDedupeSeconds ?? 86_400) }

    /// `recovery`, defaults filled in.
    public var sendRecovery: SendRecoveryConfiguration { recovery ?? SendRecoveryConfiguration() }

    public init(hubs: [Hub], appBackend: AppBackend? = nil) {
        self.hubs = hubs
        self.appBackend = appBackend
    }

    public func hub(named name: String) -> Hub? {
        hubs.first { CaseFolding.equal($0.name, name) }
    }

    /// One notification hub.
    public struct Hub: Codable, Sendable, Equatable {
        public var name: String
        public var sasRules: [SASRule]
        public var credentials: Credentials
        /// Where URL handles may point (`endpoints.wnsHosts`, `endpoints.webPushHosts`); the
        /// defaults when absent: WNS hosts only, public https Web Push endpoints only.
        public var endpoints: EndpointPolicy?
        /// Where batches of delivery outcomes are POSTed.
        public var webhooks: [WebhookConfiguration]?

        public init(
            name: String, sasRules: [SASRule], credentials: Credentials = Credentials(), endpoints: EndpointPolicy? = nil,
            webhooks: [WebhookConfiguration]? = nil
        ) {
            self.name = name
            self.sasRules = sasRules
            self.credentials = credentials
            self.endpoints = endpoints
            self.webhooks = webhooks
        }

        enum CodingKeys: String, CodingKey { case name, sasRules, credentials, endpoints, webhooks }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            name = try container.decode(String.self, forKey: .name)
            sasRules = try container.decode([SASRule].self, forKey: .sasRules)
            credentials = try container.decodeIfPresent(Credentials.self, forKey: .credentials) ?? Credentials()
            endpoints = try container.decodeIfPresent(EndpointPolicy.self, forKey: .endpoints)
            webhooks = try container.decodeIfPresent([WebhookConfiguration].self, forKey: .webhooks)
        }

        /// The hub's endpoint rules, defaults filled in.
        public var endpointPolicy: EndpointPolicy { endpoints ?? EndpointPolicy() }
    }

    /// A shared access key and what it may do.
    public struct SASRule: Codable, Sendable, Equatable {
        public var name: String
        public var key: String
        public var rights: Set<AccessRight>

        public init(name: String, key: String, rights: Set<AccessRight>) {
            self.name = name
            self.key = key
            self.rights = rights
        }

        /// Manage includes Listen and Send.
        public func allows(_ right: AccessRight) -> Bool {
            rights.contains(right) || rights.contains(.manage)
        }
    }

    /// PNS credentials; each platform is optional.
    public struct Credentials: Codable, Sendable, Equatable {
        public var apns: APNs?
        public var fcm: FCM?
        public var wns: WNS?
        public var webPush: WebPush?
        public var hms: HMS?
        public var adm: ADM?
        public var xiaomi: Xiaomi?
        public var baidu: Baidu?

        public init(
            apns: APNs? = nil, fcm: FCM? = nil, wns: WNS? = nil, webPush: WebPush? = nil, hms: HMS? = nil, adm: ADM? = nil,
            xiaomi: Xiaomi? = nil, baidu: Baidu? = nil
        ) {
            self.apns = apns
            self.fcm = fcm
            self.wns = wns
            self.webPush = webPush
            self.hms = hms
            self.adm = adm
            self.xiaomi = xiaomi
            self.baidu = baidu
        }

        public typealias APNs = APNsCredentials
        public typealias FCM = FCMCredentials
        public typealias WNS = WNSCredentials
        public typealias WebPush = WebPushCredentials
        public typealias HMS = HMSCredentials
        public typealias ADM = ADMCredentials
        public typealias Xiaomi = XiaomiCredentials
        public typealias Baidu = BaiduCredentials
    }

    /// The tutorials' app-backend API, bound to one hub.
    public struct AppBackend: Codable, Sendable, Equatable {
        public var hub: String
        public var jwt: JWT?

        public init(hub: String, jwt: JWT? = nil) {
            self.hub = hub
            self.jwt = jwt
        }

        /// Bearer tokens the API accepts besides Basic auth.
        public struct JWT: Codable, Sendable, Equatable {
            public enum Algorithm: String, Codable, Sendable { case HS256, RS256, ES256 }
            public var algorithm: Algorithm
            /// The HS256 secret.
            public var secret: String?
            /// The RS256 or ES256 public key (PEM).
            public var publicKey: String?
            public var issuer: String
            public var audience: String
            /// The claim holding the user name; `sub` when absent.
            public var userClaim: String?

            public init(algorithm: Algorithm, secret: String?, publicKey: String?, issuer: String, audience: String, userClaim: String?) {
                self.algorithm = algorithm
                self.secret = secret
                self.publicKey = publicKey
                self.issuer = issuer
                self.audience = audience
                self.userClaim = userClaim
            }
        }
    }
}

/// What a SAS rule allows.
public enum AccessRight: String, Codable, Sendable, CaseIterable {
    case listen = "Listen"
    case send = "Send"
    case manage = "Manage"
}

/// A configuration that cannot be used; says where and why.
public struct ConfigurationError: Error, Sendable, CustomStringConvertible, Equatable {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

extension HubsConfiguration {
    /// First path segments the ingress serves itself, which no hub may be named.
    public static let reservedHubNames: Set<String> = ["api", "health", "metrics", "console"]

    /// Reads and checks `pushhub.yaml`.
    public static func load(from path: String) throws -> HubsConfiguration {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw ConfigurationError("\(path): cannot be read: \(error.localizedDescription)")
        }
        return try parse(text, source: path)
    }

    public static func parse(_ text: String, source: String = "pushhub.yaml") throws -> HubsConfiguration {
        let configuration: HubsConfiguration
        do {
            configuration = try YAMLDecoder().decode(HubsConfiguration.self, from: text)
        } catch let error as DecodingError {
            if case .dataCorrupted(let context) = error, context.codingPath.isEmpty {
                throw ConfigurationError("\(source): not valid YAML: \(context.underlyingError.map { "\($0)" } ?? context.debugDescription)")
            }
            throw ConfigurationError("\(source): \(WireCoding.describe(error))")
        } catch {
            throw ConfigurationError("\(source): not valid YAML: \(error)")
        }
        try configuration.validate(source: source)
        return configuration
    }

    /// Checks names, keys and every credential (keys must parse), so a bad file fails at start-up.
    public func validate(source: String = "pushhub.yaml") throws {
        guard !hubs.isEmpty else { throw ConfigurationError("\(source): hubs: at least one hub is needed") }
        var names = Set<String>()
        for (index, hub) in hubs.enumerated() {
            let at = "\(source): hubs[\(index)]"
            do { try FieldCheck.hubName(hub.name, "name") } catch { throw ConfigurationError("\(at).\(error)") }
            guard !Self.reservedHubNames.contains(hub.name.lowercased()) else {
                throw ConfigurationError(
                    "\(at).name: \(hub.name) is a path of the ingress itself (\(Self.reservedHubNames.sorted().joined(separator: ", ")))")
            }
            guard names.insert(hub.name.lowercased()).inserted else { throw ConfigurationError("\(at).name: hub \(hub.name) is configured twice") }
            guard !hub.sasRules.isEmpty else { throw ConfigurationError("\(at).sasRules: a hub needs at least one SAS rule") }
            var ruleNames = Set<String>()
            for (ruleIndex, rule) in hub.sasRules.enumerated() {
                let ruleAt = "\(at).sasRules[\(ruleIndex)]"
                guard !rule.name.isEmpty, ruleNames.insert(rule.name).inserted else { throw ConfigurationError("\(ruleAt).name: empty or repeated") }
                guard rule.key.utf8.count >= 32 else { throw ConfigurationError("\(ruleAt).key: at least 32 characters") }
                guard !rule.rights.isEmpty else { throw ConfigurationError("\(ruleAt).rights: at least one of Listen, Send, Manage") }
            }
            try hub.credentials.validate(at: "\(at).credentials")
            let webhooks = hub.webhooks ?? []
            guard webhooks.count <= WebhookConfiguration.maximumPerHub else {
                throw ConfigurationError("\(at).webhooks: at most \(WebhookConfiguration.maximumPerHub), not \(webhooks.count)")
            }
            for (webhookIndex, webhook) in webhooks.enumerated() {
                try webhook.validate(at: "\(at).webhooks[\(webhookIndex)]")
                guard !webhooks[..<webhookIndex].contains(where: { $0.url == webhook.url }) else {
                    throw ConfigurationError("\(at).webhooks[\(webhookIndex)].url: the hub has a webhook at this URL already")
                }
            }
            for (field, patterns) in [("wnsHosts", hub.endpoints?.wnsHosts ?? []), ("webPushHosts", hub.endpoints?.webPushHosts ?? [])] {
                for (patternIndex, pattern) in patterns.enumerated() {
                    let (host, _) = EndpointPolicy.split(pattern)
                    guard !host.isEmpty, host != "*.", !host.contains("/"), !host.contains("@") else {
                        throw ConfigurationError("\(at).endpoints.\(field)[\(patternIndex)]: \"\(pattern)\" is not a host, *.domain or host:port")
                    }
                }
            }
        }
        if let publicBaseURL {
            guard let url = URLComponents(string: publicBaseURL), ["http", "https"].contains(url.scheme?.lowercased() ?? ""),
                url.host?.isEmpty == false,
                url.query == nil, url.fragment == nil, url.user == nil
            else { throw ConfigurationError("\(source): publicBaseURL: an http(s) URL such as https://push.example.com, not \(publicBaseURL)") }
        }
        if let appBackend {
            guard hub(named: appBackend.hub) != nil else {
                throw ConfigurationError("\(source): appBackend.hub: no hub named \(appBackend.hub)")
            }
            if let jwt = appBackend.jwt { try jwt.validate(at: "\(source): appBackend.jwt") }
        }
        try backlog?.validate(at: "\(source): backlog")
        try jobs?.validate(at: "\(source): jobs")
        try console?.validate(at: "\(source): console", hubs: self)
        if let dispatchDedupeSeconds, !(0...(30 * 86_400)).contains(dispatchDedupeSeconds) {
            throw ConfigurationError("\(source): dispatchDedupeSeconds: 0 (off) to 2592000 (30 days), not \(dispatchDedupeSeconds)")
        }
    }

    public func yaml() throws -> String {
        try YAMLEncoder().encode(self)
    }
}

extension HubsConfiguration.Credentials {
    func validate(at path: String) throws {
        if let apns {
            for (field, value) in [("keyId", apns.keyId), ("teamId", apns.teamId), ("bundleId", apns.bundleId)] where value.isEmpty {
                throw ConfigurationError("\(path).apns.\(field): must not be empty")
            }
            do { _ = try P256.Signing.PrivateKey(pemRepresentation: apns.privateKey) } catch {
                throw ConfigurationError("\(path).apns.privateKey: not a P-256 private key in PEM (the .p8 file's contents)")
            }
        }
        if let fcm {
            for (field, value) in [("projectId", fcm.projectId), ("clientEmail", fcm.clientEmail)] where value.isEmpty {
                throw ConfigurationError("\(path).fcm.\(field): must not be empty")
            }
            do { _ = try _RSA.Signing.PrivateKey(pemRepresentation: fcm.privateKey) } catch {
                throw ConfigurationError("\(path).fcm.privateKey: not an RSA private key in PEM (the service account's private_key)")
            }
            if let rate = fcm.ratePerMinute, rate < 1 { throw ConfigurationError("\(path).fcm.ratePerMinute: must be 1 or more") }
        }
        if let wns {
            guard !wns.packageSid.isEmpty, !wns.secret.isEmpty else {
                throw ConfigurationError("\(path).wns: packageSid and secret must not be empty")
            }
        }
        if let webPush {
            guard webPush.subject.hasPrefix("mailto:") || webPush.subject.hasPrefix("https:") else {
                throw ConfigurationError("\(path).webPush.subject: must be a mailto: or https: URL (RFC 8292)")
            }
            guard let privateBytes = Base64URL.decode(webPush.privateKey),
                let key = try? P256.Signing.PrivateKey(rawRepresentation: privateBytes)
            else { throw ConfigurationError("\(path).webPush.privateKey: not a base64url P-256 private key") }
            guard Base64URL.decode(webPush.publicKey) == key.publicKey.x963Representation else {
                throw ConfigurationError("\(path).webPush.publicKey: does not belong to the private key")
            }
        }
        let secrets: [(String, [(String, String)])] = [
            ("hms", hms.map { [("appId", $0.appId), ("clientSecret", $0.clientSecret)] } ?? []),
            ("adm", adm.map { [("clientId", $0.clientId), ("clientSecret", $0.clientSecret)] } ?? []),
            ("xiaomi", xiaomi.map { [("appSecret", $0.appSecret), ("packageName", $0.packageName)] } ?? []),
            ("baidu", baidu.map { [("apiKey", $0.apiKey), ("secretKey", $0.secretKey)] } ?? []),
        ]
        for (platform, fields) in secrets {
            for (field, value) in fields where value.isEmpty { throw ConfigurationError("\(path).\(platform).\(field): must not be empty") }
        }
        if let hms, !hms.appId.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) {
            throw ConfigurationError("\(path).hms.appId: letters, digits, - and _ only (the app id from AppGallery Connect)")
        }
        for (platform, urls) in [
            ("hms", [hms?.endpoint, hms?.tokenURI]), ("adm", [adm?.endpoint, adm?.tokenURI]), ("xiaomi", [xiaomi?.endpoint]),
            ("baidu", [baidu?.endpoint]),
        ] {
            for case let url? in urls {
                guard let parsed = URLComponents(string: url), ["https", "http"].contains(parsed.scheme?.lowercased() ?? ""), parsed.host != nil,
                    parsed.user == nil, parsed.query == nil
                else { throw ConfigurationError("\(path).\(platform): \(url) is not an http(s) URL without a query") }
            }
        }
    }
}

extension HubsConfiguration.AppBackend.JWT {
    func validate(at path: String) throws {
        guard !issuer.isEmpty, !audience.isEmpty else { throw ConfigurationError("\(path): issuer and audience must not be empty") }
        switch algorithm {
        case .HS256:
            guard let secret, secret.utf8.count >= 32 else { throw ConfigurationError("\(path).secret: HS256 needs a secret of at least 32 bytes") }
        case .RS256:
            guard let publicKey, (try? _RSA.Signing.PublicKey(pemRepresentation: publicKey)) != nil else {
                throw ConfigurationError("\(path).publicKey: RS256 needs an RSA public key in PEM")
            }
        case .ES256:
            guard let publicKey, (try? P256.Signing.PublicKey(pemRepresentation: publicKey)) != nil else {
                throw ConfigurationError("\(path).publicKey: ES256 needs a P-256 public key in PEM")
            }
        }
    }
}

// The PNS credentials of a hub, one type per platform: what pushhub.yaml holds and what the
// providers use.

/// Token-based APNs: a .p8 key.
public struct APNsCredentials: Codable, Sendable, Equatable {
    public enum Environment: String, Codable, Sendable { case production, sandbox }
    public var keyId: String
    public var teamId: String
    public var bundleId: String
    public var environment: Environment
    /// The .p8 file's contents (PEM, PKCS#8, P-256).
    public var privateKey: String
    /// Where APNs is; the production or sandbox URL when absent.
    public var endpoint: String?

    public init(keyId: String, teamId: String, bundleId: String, environment: Environment, privateKey: String, endpoint: String? = nil) {
        self.keyId = keyId
        self.teamId = teamId
        self.bundleId = bundleId
        self.environment = environment
        self.privateKey = privateKey
        self.endpoint = endpoint
    }
}

/// FCM HTTP v1: a Google service account.
public struct FCMCredentials: Codable, Sendable, Equatable {
    public var projectId: String
    public var clientEmail: String
    /// PEM, RSA.
    public var privateKey: String
    public var tokenURI: String?
    public var endpoint: String?
    /// Sends a minute to the project, at most (default 600,000, FCM's quota).
    public var ratePerMinute: Int?

    public init(projectId: String, clientEmail: String, privateKey: String, tokenURI: String?, endpoint: String?, ratePerMinute: Int? = nil) {
        self.projectId = projectId
        self.clientEmail = clientEmail
        self.privateKey = privateKey
        self.tokenURI = tokenURI
        self.endpoint = endpoint
        self.ratePerMinute = ratePerMinute
    }
}

/// WNS: the app's package SID and secret.
public struct WNSCredentials: Codable, Sendable, Equatable {
    public var packageSid: String
    public var secret: String
    public var tokenURI: String?

    public init(packageSid: String, secret: String, tokenURI: String? = nil) {
        self.packageSid = packageSid
        self.secret = secret
        self.tokenURI = tokenURI
    }
}

/// Web Push: the VAPID key pair (base64url, as browsers take the public key) and subject.
public struct WebPushCredentials: Codable, Sendable, Equatable {
    public var subject: String
    public var publicKey: String
    public var privateKey: String

    public init(subject: String, publicKey: String, privateKey: String) {
        self.subject = subject
        self.publicKey = publicKey
        self.privateKey = privateKey
    }
}

/// Huawei Push Kit: the app's OAuth 2.0 client (AppGallery Connect's app id and secret).
public struct HMSCredentials: Codable, Sendable, Equatable {
    /// The app id; the `{appId}` of `/v1/{appId}/messages:send`.
    public var appId: String
    /// The OAuth client id, when it is not the app id.
    public var clientId: String?
    public var clientSecret: String
    public var tokenURI: String?
    /// Where Push Kit is (scheme and host); Huawei's when absent.
    public var endpoint: String?

    public init(appId: String, clientId: String? = nil, clientSecret: String, tokenURI: String? = nil, endpoint: String? = nil) {
        self.appId = appId
        self.clientId = clientId
        self.clientSecret = clientSecret
        self.tokenURI = tokenURI
        self.endpoint = endpoint
    }
}

/// Amazon Device Messaging: the security profile's Login with Amazon client.
public struct ADMCredentials: Codable, Sendable, Equatable {
    public var clientId: String
    public var clientSecret: String
    public var tokenURI: String?
    /// Where ADM is (scheme and host); Amazon's when absent.
    public var endpoint: String?

    public init(clientId: String, clientSecret: String, tokenURI: String? = nil, endpoint: String? = nil) {
        self.clientId = clientId
        self.clientSecret = clientSecret
        self.tokenURI = tokenURI
        self.endpoint = endpoint
    }
}

/// Xiaomi Mi Push: the app's secret and its Android package.
public struct XiaomiCredentials: Codable, Sendable, Equatable {
    public var appSecret: String
    /// `restricted_package_name`: the app that may receive.
    public var packageName: String
    /// Where Mi Push is (scheme and host); the mainland China service when absent
    /// (`https://api.xmpush.global.xiaomi.com` serves the rest of the world).
    public var endpoint: String?

    public init(appSecret: String, packageName: String, endpoint: String? = nil) {
        self.appSecret = appSecret
        self.packageName = packageName
        self.endpoint = endpoint
    }
}

/// Baidu Cloud Push: the app's API key and secret key, which sign each request.
public struct BaiduCredentials: Codable, Sendable, Equatable {
    public var apiKey: String
    public var secretKey: String
    /// Where Baidu Push is (scheme and host); Baidu's when absent.
    public var endpoint: String?

    public init(apiKey: String, secretKey: String, endpoint: String? = nil) {
        self.apiKey = apiKey
        self.secretKey = secretKey
        self.endpoint = endpoint
    }
}

extension HMSCredentials {
    public static let production = "https://push-api.cloud.huawei.com"
    public static let defaultTokenURI = "https://oauth-login.cloud.huawei.com/oauth2/v3/token"

    public var resolvedEndpoint: String { endpoint ?? Self.production }
    public var resolvedTokenURI: String { tokenURI ?? Self.defaultTokenURI }
    public var resolvedClientId: String { clientId ?? appId }
}

extension ADMCredentials {
    public static let production = "https://api.amazon.com"
    public static let defaultTokenURI = "https://api.amazon.com/auth/o2/token"

    public var resolvedEndpoint: String { endpoint ?? Self.production }
    public var resolvedTokenURI: String { tokenURI ?? Self.defaultTokenURI }
}

extension XiaomiCredentials {
    public static let production = "https://api.xmpush.xiaomi.com"

    public var resolvedEndpoint: String { endpoint ?? Self.production }
}

extension BaiduCredentials {
    public static let production = "https://api.tuisong.baidu.com"

    public var resolvedEndpoint: String { endpoint ?? Self.production }
}

extension APNsCredentials {
    public static let production = "https://api.push.apple.com"
    public static let sandbox = "https://api.sandbox.push.apple.com"

    /// `endpoint`, else Apple's production or sandbox URL from `environment`.
    public var resolvedEndpoint: String { endpoint ?? (environment == .production ? Self.production : Self.sandbox) }
}

extension FCMCredentials {
    public static let production = "https://fcm.googleapis.com"
    public static let defaultRatePerMinute = 600_000

    public var resolvedEndpoint: String { endpoint ?? Self.production }
    public var resolvedRatePerMinute: Int { ratePerMinute ?? Self.defaultRatePerMinute }
}

extension WNSCredentials {
    public static let defaultTokenURI = "https://login.live.com/accesstoken.srf"

    public var resolvedTokenURI: String { tokenURI ?? Self.defaultTokenURI }
}
