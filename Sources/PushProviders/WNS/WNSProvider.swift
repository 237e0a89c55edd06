import Foundation
import PushConfiguration
import PushModel

/// WNS: `POST` to the channel URI with an access token from the client-credentials flow. The
/// channel must be at a host the hub's endpoint policy allows, so the hub's token only ever
/// goes to WNS.
public struct WNSService: PerDeviceService {
    public static let platform = Platform.wns

    /// A hub's package and where its channels may point.
    public struct Credentials: Sendable {
        public var wns: WNSCredentials
        public var endpoints: EndpointPolicy
    }

    /// The request a run of equal pushes shares; only its channel changes.
    public typealias Shared = PNSRequest

    /// What a run's request is made with before each push gets its own channel.
    private static let placeholder = URL(string: "https://channel.invalid/")!

    public init() {}

    public func accessTokens(_ credentials: Credentials, transport: any PNSTransport, now: @escaping @Sendable () -> Date) -> CachedAccessToken? {
        CachedAccessToken(now: now) {
            try await OAuthTokenAnswer.fetch(
                credentials.wns.resolvedTokenURI,
                [
                    ("grant_type", "client_credentials"), ("client_id", credentials.wns.packageSid), ("client_secret", credentials.wns.secret),
                    ("scope", "notify.windows.com"),
                ], through: transport)
        }
    }

    public func shared(_ delivery: PNSDelivery, credentials: Credentials) -> Result<PNSRequest, NotSent> {
        WNSRequest.make(delivery, channel: Self.placeholder)
    }

    /// A channel the hub's endpoint policy does not allow is never sent to, whatever the push.
    public func refusal(of handle: String, credentials: Credentials) -> NotSent? {
        guard case .failure(let refusal) = credentials.endpoints.url(handle, platform: .wns) else { return nil }
        return NotSent(.notSent(.endpointNotAllowed("the channel URI \(refusal.reason)")))
    }

    /// The run's request to `handle`, a channel `refusal(of:)` allowed.
    public func request(_ shared: PNSRequest, handle: String, credentials: Credentials) -> Result<PNSRequest, NotSent> {
        var request = shared
        request.target = .url(handle)
        return .success(request)
    }

    public func classify(_ response: PNSResponse) -> PNSAnswer {
        let description = response.headers.first(name: "X-WNS-Error-Description")
        let classification = WNSResponse.classify(status: response.status, description: description, retryAfter: response.retryAfter)
        let reason = response.status == 200 ? nil : description ?? response.headers.first(name: "X-WNS-Status") ?? "HTTP \(response.status)"
        return PNSAnswer(classification, status: response.status, reason: reason)
    }
}

/// WNS's provider.
public typealias WNSProvider = PerDeviceProvider<WNSService>

extension PerDeviceProvider where Service == WNSService {
    /// Each hub's package, and its endpoint policy (hubs not named in `endpoints` get the default).
    public convenience init(
        hubs: [String: WNSCredentials], endpoints: [String: EndpointPolicy] = [:], transport: any PNSTransport,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        let policies = Dictionary(endpoints.map { ($0.key.lowercased(), $0.value) }) { first, _ in first }
        let accounts = Dictionary(
            uniqueKeysWithValues: hubs.map { hub, wns in
                (hub, WNSService.Credentials(wns: wns, endpoints: policies[hub.lowercased()] ?? EndpointPolicy()))
            })
        self.init(WNSService(), hubs: accounts, transport: transport, now: now)
    }
}
