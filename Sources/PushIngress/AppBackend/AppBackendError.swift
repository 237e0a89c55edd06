import Foundation
import Hummingbird

/// An error of the app-backend API, answered as JSON `{"error": "…"}`; 401 asks for Basic.
struct AppBackendError: HTTPResponseError {
    let status: HTTPResponse.Status
    let message: String
    /// Seconds to wait before trying again, for 503s.
    var retryAfter: Int?

    init(_ status: HTTPResponse.Status, _ message: String) {
        self.status = status
        self.message = message
    }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        let body = try JSONSerialization.data(withJSONObject: ["error": message], options: [.sortedKeys])
        var headers: HTTPFields = [.contentType: "application/json; charset=utf-8"]
        if status == .unauthorized { headers[.wwwAuthenticate] = "Basic realm=\"PushHub\", charset=\"UTF-8\"" }
        if let retryAfter { headers[.retryAfter] = String(retryAfter) }
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }
}

/// Puts the authenticated user into the context, or answers 401.
struct AppBackendAuthentication: RouterMiddleware {
    typealias Context = IngressContext
    let authenticator: UserAuthenticator

    func handle(_ request: Request, context: IngressContext, next: (Request, IngressContext) async throws -> Response) async throws -> Response {
        var context = context
        do {
            context.user = try await authenticator.user(authorization: request.headers[.authorization], client: context.client)
        } catch {
            if case .throttled(let seconds, let why) = error {
                var refusal = AppBackendError(seconds > 0 ? .tooManyRequests : .serviceUnavailable, why)
                refusal.retryAfter = max(1, seconds)
                throw refusal
            }
            throw AppBackendError(.unauthorized, error.message)
        }
        return try await next(request, context)
    }
}
