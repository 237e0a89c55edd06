import Foundation
import HTTPTypes
import Hummingbird
import PushConfiguration
import PushModel
import PushStore

/// Registrations in Atom XML, as the Azure Notification Hubs REST API has them.
/// Listen: one registration at a time and listing by channel; Manage: listing all and by tag.
struct RegistrationController: Sendable {
    let store: any RegistrationStore
    let access: HubAccess
    static let bodyLimit = 64 * 1024
    static let pageLimit = 100
    static let atomTypes = ["application/atom+xml", "application/xml", "text/xml"]

    func addRoutes(to routes: HubRoutes) {
        let listen = routes.requiring(.listen)
        let manage = routes.requiring(.manage)
        let listing = routes.requiring { request in Self.listingRight(request) }
        // The older Apple SDK writes the collection with a capital R.
        for collection in ["registrations", "Registrations"] {
            listen.post("{hub}/\(collection)", use: create)
            listing.get("{hub}/\(collection)", use: list)
            listen.put("{hub}/\(collection)/{id}", use: createOrUpdate)
            listen.get("{hub}/\(collection)/{id}", use: read)
            listen.delete("{hub}/\(collection)/{id}", use: delete)
        }
        listen.post("{hub}/registrationIDs", use: createRegistrationId)
        listen.post("{hub}/registrationids", use: createRegistrationId)
        manage.get("{hub}/tags/{tag}/registrations", use: listByTag)
    }

    /// The right a listing needs: Listen for one by channel (with `$filter`), Manage for all.
    static func listingRight(_ request: Request) -> AccessRight {
        request.uri.queryParameters.get("$filter") == nil ? .manage : .listen
    }

    @Sendable func createRegistrationId(_ request: Request, context: HubRequestContext) async throws -> Response {
        let hub = context.hub
        let id = try await store.issueRegistrationId(hub: hub.name)
        return Response(status: .created, headers: [.location: "\(access.base(request, hub.name))/registrations/\(id)?api-version=2015-01"])
    }

    @Sendable func create(_ request: Request, context: HubRequestContext) async throws -> Response {
        // The id is issued once the body was read and parsed: a refused create leaves none behind.
        try await write(request, hub: context.hub, id: nil, ifMatch: nil)
    }

    @Sendable func createOrUpdate(_ request: Request, context: HubRequestContext) async throws -> Response {
        let id = try context.parameters.require("id")
        guard !Registration.isInstallationOwned(id) else {
            throw HubAPIError(
                .forbidden,
                "registration \(id): ids starting with \(Registration.installationPrefix) belong to installations; change the installation instead")
        }
        return try await write(request, hub: context.hub, id: id, ifMatch: try Self.ifMatch(request))
    }

    private func write(_ request: Request, hub: HubsConfiguration.Hub, id given: String?, ifMatch: Int64?) async throws -> Response {
        try request.requireContentType(Self.atomTypes)
        let body = try await request.collectBody(upTo: Self.bodyLimit)
        var registration: Registration
        do { registration = try RegistrationDescription.parse(Data(buffer: body), hub: hub.name, registrationId: given ?? "") } catch {
            throw HubAPIError.invalid(error)
        }
        do { try hub.checkEndpoint(of: registration) } catch { throw HubAPIError.invalid(error) }
        // An app user's tag the registration had already (set by Manage or the app backend) may
        // stay on the same device.
        let userTags = registration.tags.filter(HubAccess.isUserTag)
        if !userTags.isEmpty {
            var current: Registration?
            if let given { current = try await store.registration(hub: hub.name, id: given) }
            let kept = HubAccess.keptUserTags(
                current?.tags, sameDevice: current.map { $0.format == registration.format && $0.handle == registration.handle } ?? false)
            try access.checkUserTags(userTags.filter { !kept.contains($0) }, request, hub: hub)
        }
        let id: String
        if let given { id = given } else { id = try await store.issueRegistrationId(hub: hub.name) }
        registration.registrationId = id
        let stored = try await storeCall { [registration] in try await store.upsertRegistration(registration, ifMatch: ifMatch) }
        return Self.atom(RegistrationDescription.entry(stored, base: access.base(request, hub.name)), etag: stored.version)
    }

    @Sendable func read(_ request: Request, context: HubRequestContext) async throws -> Response {
        let hub = context.hub
        let id = try context.parameters.require("id")
        guard let registration = try await store.registration(hub: hub.name, id: id) else {
            throw HubAPIError(.notFound, "registration \(id) not found")
        }
        return Self.atom(RegistrationDescription.entry(registration, base: access.base(request, hub.name)), etag: registration.version)
    }

    @Sendable func delete(_ request: Request, context: HubRequestContext) async throws -> Response {
        let hub = context.hub
        let id = try context.parameters.require("id")
        let ifMatch = try Self.ifMatch(request)
        guard try await storeCall({ try await store.deleteRegistration(hub: hub.name, id: id, ifMatch: ifMatch) }) else {
            throw HubAPIError(.notFound, "registration \(id) not found")
        }
        return Response(status: .ok)
    }

    @Sendable func list(_ request: Request, context: HubRequestContext) async throws -> Response {
        // `listingRight` asked Listen with `$filter` and Manage without.
        if let filter = request.uri.queryParameters.get("$filter") {
            return try await page(request, hub: context.hub, query: .handle(try Self.channel(in: filter)))
        }
        return try await page(request, hub: context.hub, query: .all)
    }

    @Sendable func listByTag(_ request: Request, context: HubRequestContext) async throws -> Response {
        let tag = try context.parameters.require("tag")
        do { try Tags.validate([tag], field: "tag") } catch { throw HubAPIError.invalid(error) }
        return try await page(request, hub: context.hub, query: .tagExpression(.tag(tag)))
    }

    private func page(_ request: Request, hub: HubsConfiguration.Hub, query: RegistrationQuery) async throws -> Response {
        var limit = Self.pageLimit
        if let top = request.uri.queryParameters.get("$top") {
            guard let value = Int(top), value >= 1 else { throw HubAPIError(.badRequest, "$top: must be a positive number, not \(top)") }
            limit = min(value, Self.pageLimit)
        }
        var cursor: RegistrationCursor?
        if let token = request.uri.queryParameters.get("ContinuationToken") {
            guard let parsed = RegistrationCursor(token) else { throw HubAPIError(.badRequest, "ContinuationToken: not one this hub gave out") }
            cursor = parsed
        }
        let page = try await store.registrations(hub: hub.name, matching: query, after: cursor, limit: limit)
        var response = Self.atom(RegistrationDescription.feed(page.registrations, base: access.base(request, hub.name)), etag: nil, feed: true)
        if let next = page.next { response.headers[.continuationToken] = next.description }
        return response
    }

    /// `ChannelUri eq '…'`, `DeviceToken eq '…'` or another handle element.
    static func channel(in filter: String) throws -> String {
        let parts = filter.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: true)
        let handleElements = Set(RegistrationDescription.kinds.map(\.handleElement))
        guard parts.count == 3, handleElements.contains(String(parts[0])), parts[1].lowercased() == "eq",
            parts[2].count >= 2, parts[2].hasPrefix("'"), parts[2].hasSuffix("'")
        else {
            throw HubAPIError(
                .badRequest, "$filter: PushHub reads \"ChannelUri eq '…'\" or \"DeviceToken eq '…'\" (or another handle element), not \(filter)")
        }
        let handle = String(parts[2].dropFirst().dropLast()).replacingOccurrences(of: "''", with: "'")
        // No stored handle holds one, and PostgreSQL refuses U+0000 in text.
        do { try FieldCheck.handle(handle, "$filter") } catch { throw HubAPIError.invalid(error) }
        return handle
    }

    /// The version in `If-Match` (`"3"`, `W/"3"`, `3`); `nil` for none or `*`.
    static func ifMatch(_ request: Request) throws -> Int64? {
        guard var value = request.headers[.ifMatch]?.trimmingCharacters(in: .whitespaces), value != "*" else { return nil }
        if value.hasPrefix("W/") { value.removeFirst(2) }
        value = value.trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        guard let version = Int64(value) else { throw HubAPIError(.badRequest, "If-Match: \(value) is not an ETag this hub gave out") }
        return version
    }

    static func atom(_ body: String, etag: Int64?, feed: Bool = false) -> Response {
        var headers: HTTPFields = [.contentType: "application/atom+xml;type=\(feed ? "feed" : "entry");charset=utf-8"]
        if let etag { headers[.eTag] = "W/\"\(etag)\"" }
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: body)))
    }
}

extension HTTPField.Name {
    static let continuationToken = Self("X-MS-ContinuationToken")!
    static let forwardedProto = Self("X-Forwarded-Proto")!
}
