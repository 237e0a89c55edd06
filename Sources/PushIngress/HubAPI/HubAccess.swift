import Foundation
import Hummingbird
import PushConfiguration
import PushModel
import Synchronization

/// Decides whether a hub API request may do what it asks: the hub exists, and its SAS token
/// is valid for this resource and carries the right.
struct HubAccess: Sendable {
    let hubs: HubsConfiguration
    let now: @Sendable () -> Date
    /// Tokens whose signature was verified, so a client that sends the same token with every
    /// request pays for parsing and HMAC once.
    let verified = VerifiedTokens()

    init(hubs: HubsConfiguration, now: @escaping @Sendable () -> Date) {
        self.hubs = hubs
        self.now = now
    }

    /// The hub, once the request is allowed `right` on it. An unknown hub is refused exactly as
    /// a token whose key or signature does not match, so hub names cannot be probed. Routes
    /// call it through `HubAuthorization`, once per request.
    func authorize(_ request: Request, hub name: String, _ right: AccessRight) throws -> HubsConfiguration.Hub {
        guard let header = request.headers[.authorization] else { throw HubAPIError(.unauthorized, SASError.missing.description) }
        do throws(SASError) {
            guard let hub = hubs.hub(named: name) else {
                _ = try SharedAccessSignature.parse(header)
                throw SASError.badSignature as SASError
            }
            let key = VerifiedTokens.Key(hub: hub.name, header: header)
            if let known = verified.token(for: key) {
                // Signed by one of the hub's rules already: what depends on the request and
                // the time is checked again.
                try known.token.check(
                    rules: hub.sasRules, scope: known.scope, host: request.head.authority ?? "", path: request.uri.path, right: right, now: now())
                return hub
            }
            let token = try SharedAccessSignature.parse(header)
            _ = try token.verify(
                rules: hub.sasRules, host: request.head.authority ?? "", path: request.uri.path,
                right: right, now: now())
            verified.remember(VerifiedTokens.Verified(token: token, scope: SharedAccessSignature.Scope(resource: token.resource)), for: key)
            return hub
        } catch {
            throw HubAPIError(error.isForbidden ? .forbidden : .unauthorized, error.description)
        }
    }

    /// Refuses `added` tags that name an app user (`username:…`) on the app backend's hub when
    /// the request does not hold Manage. The app backend tags a device with its signed-in user,
    /// and `POST /api/notifications` sends by that tag; a Listen key ships in every copy of the
    /// app, so with it anyone could take a user's tag and get what is sent to them. Costs
    /// nothing unless such a tag is there.
    func checkUserTags(_ added: some Sequence<String>, _ request: Request, hub: HubsConfiguration.Hub) throws {
        guard let appHub = hubs.appBackend?.hub, CaseFolding.equal(appHub, hub.name) else { return }
        guard let claimed = added.first(where: Self.isUserTag) else { return }
        guard (try? authorize(request, hub: hub.name, .manage)) == nil else { return }
        throw HubAPIError(
            .forbidden, "tags: \(claimed.utf8Prefix(130)) is the app backend's tag of a user; only the app backend or a Manage key sets it")
    }

    /// A tag of the app backend's users (tags match exactly, as the app backend writes them).
    static func isUserTag(_ tag: String) -> Bool { tag.hasPrefix(userTagPrefix) }

    /// The user tags a write may keep without Manage: those its device had already, while the
    /// device is the same one (the same channel or handle). A Listen key that names a known
    /// installation or registration id with a channel of its own keeps none of them.
    static func keptUserTags(_ tags: [String]?, sameDevice: Bool) -> Set<String> {
        sameDevice ? Set((tags ?? []).filter(isUserTag)) : []
    }

    static let userTagPrefix = "username:"

    /// The absolute base of a hub's URLs (`Location`, Atom ids): the configured public URL, or
    /// else this request's host; `X-Forwarded-Proto` is read only behind a trusted proxy.
    func base(_ request: Request, _ hub: String) -> String {
        if let configured = hubs.publicBaseURL {
            return "\(configured.hasSuffix("/") ? String(configured.dropLast()) : configured)/\(hub)"
        }
        var scheme = "http"
        if hubs.trustForwardedHeaders == true, let forwarded = request.headers[.forwardedProto]?.lowercased(), ["http", "https"].contains(forwarded) {
            scheme = forwarded
        }
        // A Host header is the client's to write: only a plain host[:port] is echoed back.
        let authority = request.head.authority ?? ""
        let plain =
            !authority.isEmpty && authority.utf8.count <= 255
            && authority.unicodeScalars.allSatisfy {
                ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || ".-:[]".unicodeScalars.contains($0)
            }
        return "\(scheme)://\(plain ? authority : "localhost")/\(hub)"
    }
}

extension HubsConfiguration.Hub {
    /// Refuses a URL handle (WNS channel, Web Push endpoint) this hub may not send to;
    /// `field` names it in the error. Other platforms' handles are not URLs and pass.
    /// A registration's handle against the hub's endpoint policy, the field named as the
    /// registration's XML names it.
    func checkEndpoint(of registration: Registration) throws(WireError) {
        try checkEndpoint(registration.handle, platform: registration.platform, field: registration.format == .windows ? "ChannelUri" : "Endpoint")
    }

    func checkEndpoint(_ handle: String, platform: Platform, field: String) throws(WireError) {
        guard platform == .wns || platform == .webpush else { return }
        if case .failure(let refusal) = endpointPolicy.checkedText(handle, platform: platform) {
            throw .invalidField(field: field, reason: refusal.reason)
        }
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
        guard accepted.contains(where: { MediaType.matches(headers[.contentType], $0) }) else {
            throw HubAPIError(
                .unsupportedMediaType,
                "Content-Type must be \(accepted.joined(separator: " or ")), not \(headers[.contentType] ?? "(none)")")
        }
    }
}

/// Tokens whose signature a hub's rules verified, by hub and Authorization header. Bounded:
/// when full it starts again empty. An entry is only ever added after its signature was
/// verified, and its expiry, resource and rights are checked on every use.
final class VerifiedTokens: Sendable {
    struct Key: Hashable, Sendable {
        var hub: String
        var header: String
    }

    /// A verified token, and its resource as read once.
    struct Verified: Sendable {
        var token: SharedAccessSignature
        var scope: SharedAccessSignature.Scope?
    }

    static let capacity = 4096
    private let tokens = Mutex<[Key: Verified]>([:])

    func token(for key: Key) -> Verified? { tokens.withLock { $0[key] } }

    func remember(_ token: Verified, for key: Key) {
        guard key.header.utf8.count <= 2048 else { return }
        tokens.withLock {
            if $0.count >= Self.capacity { $0.removeAll(keepingCapacity: true) }
            $0[key] = token
        }
    }
}
