import Foundation
import Hummingbird
import PushModel
import PushStore

/// The tutorials' registration endpoints, bound to one hub:
/// `POST /api/register?handle=`, `PUT /api/register/{id}`, `DELETE /api/register/{id}`.
/// Every registration gets the server-side tag `username:{user}`, which no one else can claim.
struct RegisterController: Sendable {
    let store: any RegistrationStore
    let hub: String
    /// Where the hub lets WNS channel URIs point.
    let endpoints: EndpointPolicy
    static let bodyLimit = 16 * 1024
    static let platforms: [String: NativeFormat] = ["apns": .apple, "fcm": .fcmv1, "gcm": .gcm, "wns": .windows]

    func addRoutes(to group: RouterGroup<IngressContext>) {
        group.post("register", use: createId)
        group.put("register/{id}", use: upsert)
        group.delete("register/{id}", use: delete)
    }

    /// A registration id for the device: the caller's existing one for the handle (the
    /// caller's others for it are deleted), or a new one. Registrations of other users, or of
    /// no app user, are neither returned nor touched.
    @Sendable func createId(_ request: Request, context: IngressContext) async throws -> Response {
        let user = try Self.user(context)
        var kept: String?
        if let handle = request.uri.queryParameters.get("handle"), !handle.isEmpty {
            // No stored handle holds one, and PostgreSQL refuses U+0000 in text.
            do { try FieldCheck.handle(handle, "handle") } catch { throw AppBackendError(.badRequest, "\(error)") }
            let existing = try await store.registrations(hub: hub, matching: .handle(handle), after: nil, limit: 100).registrations
            for registration in existing where registration.installationId == nil && (try? Self.owner(of: registration)) == user {
                if kept == nil {
                    kept = registration.registrationId
                } else {
                    _ = try await store.deleteRegistration(hub: hub, id: registration.registrationId, ifMatch: nil)
                }
            }
        }
        let id: String
        if let kept { id = kept } else { id = try await store.issueRegistrationId(hub: hub) }
        return try Self.json(id)
    }

    @Sendable func upsert(_ request: Request, context: IngressContext) async throws -> Response {
        let user = try Self.user(context)
        let id = try context.parameters.require("id")
        let device = try Self.device(from: try await request.collectBody(upTo: Self.bodyLimit))
        if device.format == .windows, case .failure(let refusal) = endpoints.checkedText(device.handle, platform: .wns) {
            throw AppBackendError(.badRequest, "Handle: \(refusal.reason)")
        }
        let userTag = "username:\(user)"
        if let claimed = device.tags.first(where: { $0.hasPrefix("username:") && $0 != userTag }) {
            throw AppBackendError(.forbidden, "Tags: \(claimed) belongs to another user; the server adds \(userTag) itself")
        }
        switch try await store.registrationIdState(hub: hub, id: id) {
        case .unknown:
            throw AppBackendError(.gone, "registration \(id) was deleted or has expired; POST /api/register for a new id")
        case .registered:
            // Someone else's, or made through the hub API for no app user: not the caller's to change.
            if let current = try await store.registration(hub: hub, id: id), try Self.owner(of: current) != user {
                throw AppBackendError(.forbidden, "registration \(id) is not yours")
            }
        case .issued:
            break
        }
        let registration = Registration(
            registrationId: id, hub: hub, format: device.format, handle: device.handle, tags: device.tags + [userTag], updatedAt: Date())
        do {
            _ = try await store.upsertRegistration(registration, ifMatch: nil)
        } catch StoreError.invalid(let error) {
            throw AppBackendError(.badRequest, error.description)
        } catch let error as StoreError {
            throw AppBackendError(.conflict, error.description)
        }
        return Response(status: .ok)
    }

    @Sendable func delete(_ request: Request, context: IngressContext) async throws -> Response {
        let user = try Self.user(context)
        let id = try context.parameters.require("id")
        guard let registration = try await store.registration(hub: hub, id: id) else { return Response(status: .ok) }
        guard try Self.owner(of: registration) == user else {
            throw AppBackendError(.forbidden, "registration \(id) is not yours")
        }
        do {
            _ = try await store.deleteRegistration(hub: hub, id: id, ifMatch: nil)
        } catch let error as StoreError {
            throw AppBackendError(.conflict, error.description)
        }
        return Response(status: .ok)
    }

    /// The `Platform`, `Handle`, `Tags` object the tutorials' clients send (names in any case).
    struct DeviceRegistration {
        var format: NativeFormat
        var handle: String
        var tags: [String]
    }

    static func device(from body: ByteBuffer) throws -> DeviceRegistration {
        guard let object = JSONLimits.dictionary(Data(buffer: body)) else {
            throw AppBackendError(.badRequest, "the body must be a JSON object with Platform, Handle and Tags")
        }
        let fields = Dictionary(object.map { ($0.key.lowercased(), $0.value) }) { first, _ in first }
        guard let platform = fields["platform"] as? String else { throw AppBackendError(.badRequest, "Platform: missing") }
        guard let format = platforms[platform.lowercased()] else {
            throw AppBackendError(
                .badRequest, "Platform: \"\(platform)\" is not supported; use one of \(platforms.keys.sorted().joined(separator: ", "))")
        }
        guard let handle = fields["handle"] as? String, !handle.isEmpty else { throw AppBackendError(.badRequest, "Handle: missing") }
        var tags: [String] = []
        if let value = fields["tags"], !(value is NSNull) {
            guard let list = value as? [String] else { throw AppBackendError(.badRequest, "Tags: must be a list of strings") }
            tags = list
        }
        do { try Tags.validate(tags, field: "Tags") } catch { throw AppBackendError(.badRequest, error.description) }
        return DeviceRegistration(format: format, handle: handle, tags: tags)
    }

    /// The user whose `username:` tag a registration carries.
    static func owner(of registration: Registration) throws -> String? {
        registration.tags.first { $0.hasPrefix("username:") }.map { String($0.dropFirst("username:".count)) }
    }

    static func user(_ context: IngressContext) throws -> String {
        guard let user = context.user else { throw AppBackendError(.unauthorized, AuthenticationError.missing.message) }
        return user
    }

    /// A JSON string body, as the tutorials' WebAPI returns an id.
    static func json(_ text: String) throws -> Response {
        let data = try JSONEncoder().encode(text)
        return Response(status: .ok, headers: [.contentType: "application/json; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}
