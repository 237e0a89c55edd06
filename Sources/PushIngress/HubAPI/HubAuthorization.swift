import Hummingbird
import PushConfiguration

/// Authorizes a hub API request before its handler runs: the SAS token must hold the route's
/// right on the hub named by `{hub}` in the path. The hub goes into the context; a refusal is
/// thrown as `HubAccess.authorize` throws it (401 or 403, Azure's XML error body).
struct HubAuthorization: RouterMiddleware {
    typealias Context = IngressContext
    let access: HubAccess
    /// The right the request needs; most routes need the same one whatever the request.
    let right: @Sendable (Request) -> AccessRight

    func handle(_ request: Request, context: IngressContext, next: (Request, IngressContext) async throws -> Response) async throws -> Response {
        var context = context
        context.hub = try access.authorize(request, hub: try context.parameters.require("hub"), right(request))
        return try await next(request, context)
    }
}

/// Makes the hub API's route groups. A route added to one runs its handler only once
/// `HubAuthorization` let the request through, with the hub in `HubRequestContext`.
struct HubRoutes {
    let router: Router<IngressContext>
    let access: HubAccess

    /// Routes that need `right`.
    func requiring(_ right: AccessRight) -> RouterGroup<HubRequestContext> {
        requiring { _ in right }
    }

    /// Routes whose right depends on the request.
    func requiring(_ right: @escaping @Sendable (Request) -> AccessRight) -> RouterGroup<HubRequestContext> {
        router.group()
            .add(middleware: HubAuthorization(access: access, right: right))
            .group(context: HubRequestContext.self)
    }
}
