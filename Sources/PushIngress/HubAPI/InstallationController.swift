import Foundation
import Hummingbird
import PushConfiguration
import PushModel
import PushStore

/// `/{hub}/installations/{id}`: PUT (create or overwrite), GET, PATCH (JSON-Patch), DELETE.
/// Listen right; installation JSON as Azure Notification Hubs has it. `GET /{hub}/installations`
/// and `/{hub}/installations/$count` (Manage) query them by filters, which Azure lacks.
struct InstallationController: Sendable {
    let store: any RegistrationStore
    let access: HubAccess
    static let bodyLimit = 64 * 1024
    /// Installations a listing's page holds at most (`$top`).
    static let pageLimit = 1_000

    func addRoutes(to routes: HubRoutes) {
        let manage = routes.requiring(.manage)
        manage.get("{hub}/installations", use: list)
        manage.get("{hub}/installations/$count", use: count)
        let listen = routes.requiring(.listen)
        listen.put("{hub}/installations/{id}", use: put)
        listen.get("{hub}/installations/{id}", use: get)
        listen.patch("{hub}/installations/{id}", use: patch)
        listen.delete("{hub}/installations/{id}", use: delete)
    }

    @Sendable func put(_ request: Request, context: HubRequestContext) async throws -> Response {
        let (hub, id) = try target(context)
        try request.requireContentType(["application/json"])
        var installation = try JSONBody.installation(from: try await request.collectBody(upTo: Self.bodyLimit))
        // Whether the channel expired is the hub's to say (a PNS called it invalid), read-only
        // as in Azure: a client's `true` was stored as said, so listings, `$count` and the
        // console called a live channel dead. A PUT is a channel the device stands by.
        installation.pushChannelExpired = false
        guard installation.installationId == id else {
            throw HubAPIError(.badRequest, "installationId: \"\(installation.installationId)\" does not match the URL's \"\(id)\"")
        }
        do { try hub.checkEndpoint(installation.pushChannel, platform: installation.platform.format.platform, field: "pushChannel") } catch {
            throw HubAPIError.invalid(error)
        }
        // An app user's tag the installation had already (set by Manage) may stay on the same device.
        let userTags = Self.tags(of: installation).filter(HubAccess.isUserTag)
        if !userTags.isEmpty {
            let current = try await store.installation(hub: hub.name, id: id)
            let kept = HubAccess.keptUserTags(current.map(Self.tags), sameDevice: current.map { Self.sameDevice($0, installation) } ?? false)
            try access.checkUserTags(userTags.filter { !kept.contains($0) }, request, hub: hub)
        }
        _ = try await storeCall { try await store.upsertInstallation(installation, hub: hub.name) }
        return Response(status: .ok)
    }

    @Sendable func get(_ request: Request, context: HubRequestContext) async throws -> Response {
        let (hub, id) = try target(context)
        guard let installation = try await store.installation(hub: hub.name, id: id) else {
            throw HubAPIError(.notFound, "installation \(id) not found")
        }
        return try JSONBody.response(installation)
    }

    @Sendable func patch(_ request: Request, context: HubRequestContext) async throws -> Response {
        let (hub, id) = try target(context)
        // Some SDKs send plain application/json for JSON-Patch documents.
        try request.requireContentType(["application/json-patch+json", "application/json"])
        let operations = try JSONBody.decode([InstallationPatchOperation].self, from: try await request.collectBody(upTo: Self.bodyLimit))
        guard operations.count <= InstallationPatchOperation.maximumOperations else {
            throw HubAPIError(
                .badRequest, "a JSON-Patch document holds at most \(InstallationPatchOperation.maximumOperations) operations, not \(operations.count)"
            )
        }
        // A new push channel is checked against the hub's endpoint rules before it is written.
        let channels = operations.compactMap { operation -> String? in
            guard operation.path.lowercased() == "/pushchannel" else { return nil }
            switch operation.value {
            case .string(let channel): return channel
            case .object(let fields): if case .string(let endpoint)? = fields["endpoint"] { return endpoint } else { return nil }
            default: return nil
            }
        }
        if !channels.isEmpty, let current = try await store.installation(hub: hub.name, id: id) {
            let platform = current.platform.format.platform
            do { for channel in channels { try hub.checkEndpoint(channel, platform: platform, field: "pushChannel") } } catch {
                throw HubAPIError.invalid(error)
            }
        }
        // As for a PUT: an app user's tag it has may stay while its channel does.
        let userTags = operations.flatMap { $0.value.map(Self.strings) ?? [] }.filter(HubAccess.isUserTag)
        if !userTags.isEmpty {
            let current = try await store.installation(hub: hub.name, id: id)
            let kept = HubAccess.keptUserTags(current.map(Self.tags), sameDevice: current != nil && channels.isEmpty)
            try access.checkUserTags(userTags.filter { !kept.contains($0) }, request, hub: hub)
        }
        _ = try await storeCall { try await store.patchInstallation(hub: hub.name, id: id, operations) }
        return Response(status: .ok)
    }

    /// An installation's tags and its templates' own.
    static func tags(of installation: Installation) -> [String] {
        installation.tags + installation.templates.values.flatMap { $0.tags ?? [] }
    }

    /// Whether two writes of an installation are the same device's: the same platform and channel.
    static func sameDevice(_ one: Installation, _ other: Installation) -> Bool {
        one.platform == other.platform && one.pushChannel == other.pushChannel
    }

    /// The texts a patch's value holds (tags among them), however deep.
    static func strings(in value: PatchValue) -> [String] {
        switch value {
        case .string(let text): [text]
        case .strings(let texts): texts
        case .object(let fields): fields.values.flatMap(strings)
        case .other: []
        }
    }

    @Sendable func delete(_ request: Request, context: HubRequestContext) async throws -> Response {
        let (hub, id) = try target(context)
        _ = try await store.deleteInstallation(hub: hub.name, id: id)
        return Response(status: .noContent)
    }

    /// `GET /{hub}/installations?tag=&platform=&userId=&pushChannelExpired=&updatedBefore=&updatedAfter=&$top=`:
    /// a JSON list of installations in id order; `X-MS-ContinuationToken` when more may
    /// follow, given back as `ContinuationToken`.
    @Sendable func list(_ request: Request, context: HubRequestContext) async throws -> Response {
        let filter = try Self.filter(request)
        let limit = try pageSize(request, default: 100, maximum: Self.pageLimit)
        let cursor = try continuation(request, InstallationCursor.init)
        let page = try await storeCall { try await store.installations(hub: context.hub.name, matching: filter, after: cursor, limit: limit) }
        var body = Data("[".utf8)
        for (index, document) in page.documents.enumerated() {
            if index > 0 { body.append(UInt8(ascii: ",")) }
            body.append(contentsOf: document.utf8)
        }
        body.append(UInt8(ascii: "]"))
        var response = Response(
            status: .ok, headers: [.contentType: "application/json; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(bytes: body)))
        if let next = page.next { response.headers[.continuationToken] = next.description }
        return response
    }

    /// `GET /{hub}/installations/$count` with the listing's filters: `{"count":N}`.
    @Sendable func count(_ request: Request, context: HubRequestContext) async throws -> Response {
        let filter = try Self.filter(request)
        let count = try await storeCall { try await store.countInstallations(hub: context.hub.name, matching: filter) }
        return Response(
            status: .ok, headers: [.contentType: "application/json; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(string: #"{"count":\#(count)}"#)))
    }

    /// The filters of a query, each checked and named when wrong.
    static func filter(_ request: Request) throws -> InstallationFilter {
        let parameters = request.uri.queryParameters
        var filter = InstallationFilter()
        if let text = parameters.get("tag") {
            do { filter.tags = try TagExpression.parse(text) } catch {
                throw HubAPIError(.badRequest, "tag: \"\(text.count > 64 ? "\(text.prefix(64))…" : text)\" \(error)")
            }
        }
        if let text = parameters.get("platform") {
            guard let platform = Installation.InstallationPlatform(rawValue: text.lowercased()) else {
                throw HubAPIError(
                    .badRequest,
                    "platform: must be one of \(Installation.InstallationPlatform.allCases.map(\.rawValue).joined(separator: ", ")), not \(text.prefix(32))"
                )
            }
            filter.platform = platform
        }
        if let text = parameters.get("userId") {
            guard !text.isEmpty, text.utf8.count <= 256, !FieldCheck.hasControlCharacters(text) else {
                throw HubAPIError(.badRequest, "userId: must be 1 to 256 bytes without control characters")
            }
            filter.userId = text
        }
        if let text = parameters.get("pushChannelExpired") {
            switch text.lowercased() {
            case "true": filter.pushChannelExpired = true
            case "false": filter.pushChannelExpired = false
            default: throw HubAPIError(.badRequest, "pushChannelExpired: must be true or false, not \(text.prefix(32))")
            }
        }
        for (name, keyPath) in [("updatedBefore", \InstallationFilter.updatedBefore), ("updatedAfter", \InstallationFilter.updatedAfter)] {
            guard let text = parameters.get(name) else { continue }
            guard let date = RFC3339.parse(text) else { throw HubAPIError(.badRequest, "\(name): must be an RFC 3339 time, not \(text.prefix(40))") }
            filter[keyPath: keyPath] = date
        }
        return filter
    }

    private func target(_ context: HubRequestContext) throws -> (HubsConfiguration.Hub, String) {
        (context.hub, try context.parameters.require("id"))
    }
}

/// JSON request and response bodies with PushHub's coding rules.
enum JSONBody {
    /// An installation: read straight from the bytes, or by JSONDecoder when the fast reader
    /// does not take them, which then says what is wrong.
    static func installation(from buffer: ByteBuffer) throws -> Installation {
        do { try JSONLimits.checkDepth(buffer.readableBytesView, field: "") } catch { throw HubAPIError(.badRequest, JSONLimits.depthMessage) }
        if let installation = buffer.withUnsafeReadableBytes(Installation.fromJSON) { return installation }
        return try decode(Installation.self, from: buffer)
    }

    static func decode<T: Decodable>(_ type: T.Type, from buffer: ByteBuffer) throws -> T {
        do { try JSONLimits.checkDepth(buffer.readableBytesView, field: "") } catch { throw HubAPIError(.badRequest, JSONLimits.depthMessage) }

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
