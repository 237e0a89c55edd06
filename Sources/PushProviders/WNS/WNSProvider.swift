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

    /// What a run of equal pushes shares: all of the request but its channel.
    public typealias Shared = WNSRequest.Parts

    public init() {}

    public func accessTokens(_ credentials: Credentials, transport: any PNSTransport, now: @escaping @Sendable () -> Date) -> CachedAccessToken? {
        .clientCredentials(
            tokenURI: credentials.wns.resolvedTokenURI, clientId: credentials.wns.packageSid, secret: credentials.wns.secret,
            scope: "notify.windows.com", transport: transport, now: now)
    }

    public func shared(_ delivery: PNSDelivery, credentials: Credentials) -> Result<Shared, NotSent> {
        WNSRequest.make(delivery)
    }

    /// The channel as the hub's endpoint policy checked it: one it does not allow is never sent
    /// to, whatever the push, and the request goes to the text checked (a plain URL's own, else
    /// the URL Foundation read).
    public func address(of handle: String, credentials: Credentials) -> Result<String, NotSent> {
        switch credentials.endpoints.checkedText(handle, platform: .wns) {
        case .success(let channel): .success(channel)
        case .failure(let refusal): .failure(NotSent(.notSent(.endpointNotAllowed("the channel URI \(refusal.reason)"))))
        }
    }

    public func request(_ shared: Shared, to channel: String, credentials: Credentials) -> Result<PNSRequest, NotSent> {
        .success(PNSRequest(.url(channel), headers: shared.headers, body: shared.body))
    }

    public func classify(_ response: PNSResponse) -> PNSAnswer {
        // Accepted: nothing in the headers changes that, and they are not read (for every push
        // delivered).
        if response.status == 200 { return PNSAnswer(WNSResponse.classify(status: 200), status: 200, reason: nil) }
        let description = response.headers.first(name: "X-WNS-Error-Description")
        let classification = WNSResponse.classify(status: response.status, description: description, retryAfter: response.retryAfter)
        let reason = description ?? response.headers.first(name: "X-WNS-Status") ?? "HTTP \(response.status)"
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
