import Foundation
import Hummingbird
import PushModel
import PushStore

/// An error of the hub API, answered as Azure Notification Hubs answers them:
/// `<Error><Code>400</Code><Detail>…</Detail></Error>`.
public struct HubAPIError: HTTPResponseError {
    public let status: HTTPResponse.Status
    public let detail: String
    /// Seconds for `Retry-After`, when the refusal passes.
    public var retryAfter: Int?

    public init(_ status: HTTPResponse.Status, _ detail: String) {
        self.status = status
        self.detail = detail
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        let xml = "<Error><Code>\(status.code)</Code><Detail>\(XML.escape(detail))</Detail></Error>"
        var response = Response(
            status: status, headers: [.contentType: "application/xml; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(string: xml)))
        if let retryAfter { response.headers[.retryAfter] = String(retryAfter) }
        return response
    }

    /// A field the client got wrong.
    static func invalid(_ error: WireError) -> HubAPIError {
        HubAPIError(.badRequest, error.description)
    }

    /// The store's refusals as HTTP statuses.
    static func from(_ error: StoreError) -> HubAPIError {
        switch error {
        case .notFound(let what): HubAPIError(.notFound, "\(what) not found")
        case .versionMismatch: HubAPIError(.preconditionFailed, error.description)
        case .belongsToInstallation: HubAPIError(.conflict, error.description)
        case .invalid(let wire): invalid(wire)
        }
    }
}

/// Runs `body`, turning store errors into hub API errors.
func storeCall<T>(_ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch let error as StoreError {
        throw HubAPIError.from(error)
    }
}

enum XML {
    /// Text safe inside an element or a double-quoted attribute.
    static func escape(_ text: String) -> String { TemplateRenderer.escapeXML(text) }
}

/// What the store's failures become when a route did not answer them itself: a conflict is
/// 409; a refusal that would come again (`SQLError.isPermanent`: a value or a statement the
/// database will not take) 400, with no `Retry-After`, since only a changed request can pass;
/// anything else (the store away, busy or failing) 503 with `Retry-After`. Never a bare 500
/// and never the SQL. App-backend routes answer in their JSON, the hub API in its XML.
struct StoreFailureMiddleware: RouterMiddleware {
    typealias Context = IngressContext

    func handle(_ request: Request, context: IngressContext, next: (Request, IngressContext) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as SQLError {
            let appBackend = request.uri.path.hasPrefix("/api/")
            if error.isConstraintViolation {
                let message = "the resource was written at the same time, or its id is taken; try again"
                if appBackend { throw AppBackendError(.conflict, message) }
                throw HubAPIError(.conflict, message)
            }
            if error.isPermanent {
                context.logger.warning("store refused a request", metadata: ["pushhub.error": "\(error.message.prefix(300))"])
                let message = "the registration store refuses what this request holds, and would refuse it again; retrying will not help"
                if appBackend { throw AppBackendError(.badRequest, message) }
                throw HubAPIError(.badRequest, message)
            }
            context.logger.warning("store call failed", metadata: ["pushhub.error": "\(error.message.prefix(300))"])
            let message = "the registration store is not available; try again"
            if appBackend {
                var refusal = AppBackendError(.serviceUnavailable, message)
                refusal.retryAfter = 5
                throw refusal
            }
            throw StoreUnavailable(detail: message)
        }
    }
}

/// A 503 of the hub API with `Retry-After`.
struct StoreUnavailable: HTTPResponseError {
    let detail: String
    var status: HTTPResponse.Status { .serviceUnavailable }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        var response = try HubAPIError(.serviceUnavailable, detail).response(from: request, context: context)
        response.headers[.retryAfter] = "5"
        return response
    }
}

/// A listing's page size: `$top`, 1 to `maximum`, or `default` without one.
func pageSize(_ request: Request, default fallback: Int, maximum: Int) throws -> Int {
    guard let top = request.uri.queryParameters.get("$top") else { return fallback }
    guard let value = Int(top), (1...maximum).contains(value) else {
        throw HubAPIError(.badRequest, "$top: must be 1 to \(maximum), not \(top.prefix(32))")
    }
    return value
}

/// A listing's `ContinuationToken`, read by `parse`; nil without one, 400 when it is not one.
func continuation<T>(_ request: Request, _ parse: (String) -> T?) throws -> T? {
    guard let token = request.uri.queryParameters.get("ContinuationToken") else { return nil }
    guard let parsed = parse(String(token)) else { throw HubAPIError(.badRequest, "ContinuationToken: not one this hub gave out") }
    return parsed
}
