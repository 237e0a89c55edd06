import Foundation
import PushModel

/// Where the app-backend API's users and their password hashes live.
public protocol UserStore: Sendable {
    func setUser(name: String, passwordHash: String) async throws
    func passwordHash(user: String) async throws -> String?
}

/// Where registrations and installations live, and, as a `UserStore`, users. One
/// implementation runs on SQLite (the embedded default) and PostgreSQL; one conformance suite
/// tests both.
public protocol RegistrationStore: UserStore {
    // MARK: Installations
    /// Creates or overwrites an installation and the registrations it is stored as; sets `lastUpdate`.
    func upsertInstallation(_ installation: Installation, hub: String) async throws -> Installation
    func installation(hub: String, id: String) async throws -> Installation?
    /// Reads, patches and writes back in one transaction. Throws `StoreError.notFound`.
    func patchInstallation(hub: String, id: String, _ operations: [InstallationPatchOperation]) async throws -> Installation
    /// False when there was none.
    func deleteInstallation(hub: String, id: String) async throws -> Bool
    /// One page of the installations `filter` takes, in installation-id order, from the
    /// indexes; pass the returned cursor to get the next page. A page of a tag filter whose
    /// other conditions take few of the tag's installations may hold fewer than `limit` (even
    /// none) and still have a next one.
    func installations(hub: String, matching filter: InstallationFilter, after cursor: InstallationCursor?, limit: Int) async throws
        -> InstallationPage
    /// How many installations `filter` takes.
    func countInstallations(hub: String, matching filter: InstallationFilter) async throws -> Int

    // MARK: Registrations
    /// A new registration id, remembered as issued until a registration takes it.
    func issueRegistrationId(hub: String) async throws -> String
    /// Creates or replaces a registration (not one of an installation's). With `ifMatch`, only
    /// when its version is that. Returns it with its new version.
    func upsertRegistration(_ registration: Registration, ifMatch: Int64?) async throws -> Registration
    func registration(hub: String, id: String) async throws -> Registration?
    /// False when there was none. With `ifMatch`, only when its version is that.
    func deleteRegistration(hub: String, id: String, ifMatch: Int64?) async throws -> Bool
    /// Whether an id belongs to a registration, was issued and not used yet, or is unknown
    /// (never issued, deleted, or expired).
    func registrationIdState(hub: String, id: String) async throws -> RegistrationIdState
    /// One page of the registrations matching `query`, in a stable order; pass the returned
    /// cursor to get the next page.
    func registrations(hub: String, matching query: RegistrationQuery, after cursor: RegistrationCursor?, limit: Int) async throws -> RegistrationPage
    /// The same page as `registrations`, holding only what a delivery needs of each: what the
    /// dispatcher reads, without the tags, ids and times it would only throw away. With
    /// `format`, only the registrations a send of that format is for
    /// (`DeliveryCandidate.isReached(by:)`), which a page then holds up to `limit` of: a
    /// native broadcast does not read every other platform's and every template registration.
    func deliveryCandidates(
        hub: String, matching query: RegistrationQuery, reaching format: NotificationFormat?, after cursor: RegistrationCursor?, limit: Int
    ) async throws -> DeliveryCandidatePage

    /// Adds many registrations (not installations) in one transaction: for imports and for
    /// seeding load tests. Ids must be new.
    func importRegistrations(_ registrations: [Registration]) async throws

    func close() async
}

/// Which installations a query takes: every condition given, together.
public struct InstallationFilter: Sendable, Equatable {
    /// Over the installation's tags, with `$InstallationId:{…}` and `$UserId:{…}`.
    public var tags: TagExpression?
    public var platform: Installation.InstallationPlatform?
    public var userId: String?
    public var pushChannelExpired: Bool?
    /// Last updated before this time (exclusive).
    public var updatedBefore: Date?
    /// Last updated after this time (exclusive).
    public var updatedAfter: Date?

    public init() {}
}

/// Where a page of installations ended: its last installation id, opaque to callers.
public struct InstallationCursor: Sendable, Hashable, CustomStringConvertible {
    let installationId: String

    /// Reads a cursor from its text form (a continuation token).
    public init?(_ text: String) {
        guard let data = Base64URL.decode(text), let id = String(data: data, encoding: .utf8), !id.isEmpty else { return nil }
        installationId = id
    }

    init(installationId: String) { self.installationId = installationId }

    public var description: String { Base64URL.encode(Data(installationId.utf8)) }
}

public struct InstallationPage: Sendable {
    /// The installations as stored: the JSON `wireJSON()` writes, which the hub API answers
    /// as it is, unread.
    public var documents: [String]
    public var next: InstallationCursor?

    /// The installations, read.
    public func installations() throws -> [Installation] {
        try documents.map(SQLRegistrationStore.installation(document:))
    }
}

public enum RegistrationIdState: Sendable, Equatable {
    case registered
    case issued
    case unknown
}

/// Which registrations a listing or an audience takes.
public enum RegistrationQuery: Sendable, Equatable {
    case all
    case tagExpression(TagExpression)
    case handle(String)
    /// Handles that start with this text (the web console's search).
    case handlePrefix(String)
    case installation(String)
    case user(String)
}

/// Where a page ended; opaque to callers. Two cursors are the same where their positions are.
public struct RegistrationCursor: Sendable, Hashable, CustomStringConvertible {
    let position: Int64
    /// Where the next page of a tag expression ends, read while this page's rows were read;
    /// not part of the text form, so a continuation token reads it again.
    let lookahead: Lookahead?

    /// The next page's bound (nil: fewer than a page of candidates were left, which the next
    /// page reads again), for the page that `key` names (`SQLRegistrationStore.lookaheadKey`)
    /// and no other.
    struct Lookahead: Sendable {
        let key: String
        let bound: Int64?
    }

    /// Reads a cursor from its text form (a continuation token).
    public init?(_ text: String) {
        guard let position = Int64(text), position >= 0 else { return nil }
        self.position = position
        lookahead = nil
    }

    init(position: Int64, lookahead: Lookahead? = nil) {
        self.position = position
        self.lookahead = lookahead
    }

    public var description: String { String(position) }

    public static func == (left: Self, right: Self) -> Bool { left.position == right.position }

    public func hash(into hasher: inout Hasher) { hasher.combine(position) }
}

public struct RegistrationPage: Sendable {
    public var registrations: [Registration]
    /// `nil` on the last page.
    public var next: RegistrationCursor?
}

/// What a delivery needs of a registration.
public struct DeliveryCandidate: Sendable, Equatable {
    public var registrationId: String
    public var format: NativeFormat
    public var handle: String
    public var webPush: WebPushKeys?
    /// Body, headers and expiry only (`Template.forDelivery`).
    public var template: Template?
    public var expiresAt: Date?

    public init(
        registrationId: String, format: NativeFormat, handle: String, webPush: WebPushKeys? = nil, template: Template? = nil, expiresAt: Date? = nil
    ) {
        self.registrationId = registrationId
        self.format = format
        self.handle = handle
        self.webPush = webPush
        self.template = template
        self.expiresAt = expiresAt
    }

    public init(_ registration: Registration) {
        self.init(
            registrationId: registration.registrationId, format: registration.format, handle: registration.handle, webPush: registration.webPush,
            template: registration.template?.forDelivery, expiresAt: registration.expiresAt)
    }

    public var platform: Platform { format.platform }

    /// Whether a send of `format` is for this registration, its expiry aside: a template send
    /// for every template registration, a native one for the native registrations of its
    /// platform.
    public func isReached(by format: NotificationFormat) -> Bool {
        guard let platform = format.platform else { return template != nil }
        return template == nil && self.platform == platform
    }
}

public struct DeliveryCandidatePage: Sendable {
    public var candidates: [DeliveryCandidate]
    /// `nil` on the last page.
    public var next: RegistrationCursor?
}

extension RegistrationStore {
    /// From `registrations`, for stores with no leaner read: a page holds `limit` registrations
    /// read, fewer when `format` passes over some.
    public func deliveryCandidates(
        hub: String, matching query: RegistrationQuery, reaching format: NotificationFormat?, after cursor: RegistrationCursor?, limit: Int
    ) async throws -> DeliveryCandidatePage {
        let page = try await registrations(hub: hub, matching: query, after: cursor, limit: limit)
        let candidates = page.registrations.lazy.map(DeliveryCandidate.init).filter { candidate in format.map(candidate.isReached) ?? true }
        return DeliveryCandidatePage(candidates: Array(candidates), next: page.next)
    }
}

public enum StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    case notFound(String)
    /// The `If-Match` version did not match.
    case versionMismatch(expected: Int64, actual: Int64?)
    /// The change would break the installation a registration belongs to.
    case belongsToInstallation(registrationId: String, installationId: String)
    case invalid(WireError)

    public var description: String {
        switch self {
        case .notFound(let what): "\(what) not found"
        case .versionMismatch(let expected, let actual): "ETag \(expected) does not match the current \(actual.map(String.init) ?? "(none)")"
        case .belongsToInstallation(let registration, let installation):
            "registration \(registration) belongs to installation \(installation); change the installation instead"
        case .invalid(let error): error.description
        }
    }
}
