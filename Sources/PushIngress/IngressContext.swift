import Hummingbird

/// The request context of the ingress: Hummingbird's core, plus the app-backend user once
/// authenticated.
public struct IngressContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The user the app-backend API authenticated.
    public var user: String?
    /// The peer's address (no port), for per-client limits; nil when unknown.
    public var client: String?

    public init(source: Source) {
        coreContext = .init(source: source)
        client = source.channel.remoteAddress?.ipAddress
    }
}
