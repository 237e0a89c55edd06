import Hummingbird
import NIOCore
import PushConfiguration

/// The request context of the ingress: Hummingbird's core, plus the app-backend user once
/// authenticated and the hub once a hub API request is authorized.
public struct IngressContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The user the app-backend API authenticated.
    public var user: String?
    /// The peer's address (no port), for per-client limits; nil when unknown. Made when asked:
    /// most requests never ask.
    public var client: String? { remoteAddress?.ipAddress }
    private let remoteAddress: SocketAddress?
    /// The hub `HubAuthorization` authorized the request for; hub API handlers read it from
    /// `HubRequestContext`.
    var hub: HubsConfiguration.Hub?

    public init(source: Source) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }
}

/// The context of a hub API handler: the hub its request is authorized for, always there.
/// Made from the `IngressContext` once `HubAuthorization` let the request through.
struct HubRequestContext: ChildRequestContext {
    typealias ParentContext = IngressContext
    var coreContext: CoreRequestContextStorage
    /// The hub named in the path, on which the request's SAS token holds the route's right.
    let hub: HubsConfiguration.Hub

    init(context: IngressContext) throws {
        // Routes with this context sit behind `HubAuthorization`, so the hub is always set;
        // were it not, the request is refused as one without a token.
        guard let hub = context.hub else { throw HubAPIError(.unauthorized, SASError.missing.description) }
        coreContext = context.coreContext
        self.hub = hub
    }
}
