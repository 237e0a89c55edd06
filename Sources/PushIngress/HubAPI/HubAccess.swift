import Foundation
import Hummingbird

/// Decides whether a hub API request may do what it asks: the hub exists, and its SAS token
/// is valid for this resource and carries the right.
struct HubAccess: Sendable {
    let hubs: HubsConfiguration
    let now: @Sendable () -> Date

    /// The hub, once the request is allowed `right` on it.
    func authorize(_ request: Request, hub name: String, _ right: AccessRight) throws -> HubsConfiguration.Hub {
        guard let hub = hubs.hub(named: name) else { throw HubAPIError(.notFound, "hub \(name) does not exist") }
        guard let header = request.headers[.authorization] else { throw HubAPIError(.unauthorized, SASError.missing.description) }
        do {
            let token = try SharedAccessSignature.parse(header)
            _ = try token.verify(
                rules: hub.sasRules, host: request.head.authority ?? "", path: request.uri.path,
                right: right, now: now())
        } catch {
            throw HubAPIError(error.isForbidden ? .forbidden : .unauthorized, error.description)
        }
        return hub
    }
}

extension Request {
    /// The body, refusing more than `limit` bytes with 413.
    func collectBody(upTo limit: Int) async throws -> ByteBuffer {
        do {
            return try await body.collect(upTo: limit)
        } catch {
            throw HubAPIError(.contentTooLarge, "the request body is larger than \(limit) bytes")
        }
    }

    /// Refuses a body whose content type is not one of `accepted` (parameters such as charset
    /// are allowed) with 415.
    func requireContentType(_ accepted: [String]) throws {
        let given = headers[.contentType]?.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        guard let given, accepted.contains(given) else {
            throw HubAPIError(
                .unsupportedMediaType,
                "Content-Type must be \(accepted.joined(separator: " or ")), not \(headers[.contentType] ?? "(none)")")
        }
    }
}
