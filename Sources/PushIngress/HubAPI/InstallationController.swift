import Foundation
import Hummingbird
import PushModel
import PushStore

/// `/{hub}/installations/{id}`: PUT (create or overwrite), GET, PATCH (JSON-Patch), DELETE.
/// Listen right; installation JSON as Azure Notification Hubs has it.
struct InstallationController: Sendable {
    let store: any RegistrationStore
    let access: HubAccess
    static let bodyLimit = 64 * 1024

    func addRoutes(to router: Router<IngressContext>) {
        router.put("{hub}/installations/{id}", use: put)
        router.get("{hub}/installations/{id}", use: get)
        router.patch("{hub}/installations/{id}", use: patch)
        router.delete("{hub}/installations/{id}", use: delete)
    }

    @Sendable func put(_ request: Request, context: IngressContext) async throws -> Response {
        let (hub, id) = try target(request, context)
        try request.requireContentType(["application/json"])
        let installation = try JSONBody.decode(Installation.self, from: try await request.collectBody(upTo: Self.bodyLimit))
        guard installation.installationId == id else {
            throw HubAPIError(.badRequest, "installationId: \"\(installation.installationId)\" does not match the URL's \"\(id)\"")
        }
        _ = try await storeCall { try await store.upsertInstallation(installation, hub: hub.name) }
        return Response(status: .ok)
    }

    @Sendable func get(_ request: Request, context: IngressContext) async throws -> Response {
        let (hub, id) = try target(request, context)
        guard let installation = try await store.installation(hub: hub.name, id: id) else {
            throw HubAPIError(.notFound, "installation \(id) not found")
        }
        return try JSONBody.response(installation)
    }

    @Sendable func patch(_ request: Request, context: IngressContext) async throws -> Response {
        let (hub, id) = try target(request, context)
        // Some SDKs send plain application/json for JSON-Patch documents.
        try request.requireContentType(["application/json-patch+json", "application/json"])
        let operations = try JSONBody.decode([InstallationPatchOperation].self, from: try await request.collectBody(upTo: Self.bodyLimit))
        _ = try await storeCall { try await store.patchInstallation(hub: hub.name, id: id, operations) }
        return Response(status: .ok)
    }

    @Sendable func delete(_ request: Request, context: IngressContext) async throws -> Response {
        let (hub, id) = try target(request, context)
        _ = try await store.deleteInstallation(hub: hub.name, id: id)
        return Response(status: .noContent)
    }

    private func target(_ request: Request, _ context: IngressContext) throws -> (HubsConfiguration.Hub, String) {
        let hub = try access.authorize(request, hub: try context.parameters.require("hub"), .listen)
        return (hub, try context.parameters.require("id"))
    }
}

/// JSON request and response bodies with PushHub's coding rules.
enum JSONBody {
    static func decode<T: Decodable>(_ type: T.Type, from buffer: ByteBuffer) throws -> T {
        do {
            return try WireCoding.makeDecoder().decode(T.self, from: Data(buffer: buffer))
        } catch let error as DecodingError {
            throw HubAPIError.invalid(WireCoding.describe(error))
        }
    }

    static func response<T: Encodable>(_ value: T, status: HTTPResponse.Status = .ok) throws -> Response {
        let data = try WireCoding.makeEncoder().encode(value)
        return Response(
            status: status, headers: [.contentType: "application/json; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}
