import PushModel
import PushStore

/// Test support: a registration store that forwards every call to `inner`, after letting a
/// test see (and fail) the reads it cares about, as a database that refuses or goes away would.
public struct InterceptedStore: RegistrationStore {
    /// The reads a test can intercept.
    public enum Read: Sendable {
        case registrations(hub: String, query: RegistrationQuery)
        case installation(hub: String, id: String)
    }

    let inner: any RegistrationStore
    let intercept: @Sendable (Read) async throws -> Void

    /// `intercept` runs before each read; what it throws, the read throws.
    public init(inner: any RegistrationStore, intercept: @escaping @Sendable (Read) async throws -> Void) {
        self.inner = inner
        self.intercept = intercept
    }

    public func registrations(hub: String, matching query: RegistrationQuery, after cursor: RegistrationCursor?, limit: Int) async throws
        -> RegistrationPage
    {
        try await intercept(.registrations(hub: hub, query: query))
        return try await inner.registrations(hub: hub, matching: query, after: cursor, limit: limit)
    }

    public func installation(hub: String, id: String) async throws -> Installation? {
        try await intercept(.installation(hub: hub, id: id))
        return try await inner.installation(hub: hub, id: id)
    }

    public func upsertInstallation(_ installation: Installation, hub: String) async throws -> Installation {
        try await inner.upsertInstallation(installation, hub: hub)
    }
    public func patchInstallation(hub: String, id: String, _ operations: [InstallationPatchOperation]) async throws -> Installation {
        try await inner.patchInstallation(hub: hub, id: id, operations)
    }
    public func deleteInstallation(hub: String, id: String) async throws -> Bool { try await inner.deleteInstallation(hub: hub, id: id) }
    public func installations(hub: String, matching filter: InstallationFilter, after cursor: InstallationCursor?, limit: Int) async throws
        -> InstallationPage
    {
        try await inner.installations(hub: hub, matching: filter, after: cursor, limit: limit)
    }
    public func countInstallations(hub: String, matching filter: InstallationFilter) async throws -> Int {
        try await inner.countInstallations(hub: hub, matching: filter)
    }
    public func issueRegistrationId(hub: String) async throws -> String { try await inner.issueRegistrationId(hub: hub) }
    public func upsertRegistration(_ registration: Registration, ifMatch: Int64?) async throws -> Registration {
        try await inner.upsertRegistration(registration, ifMatch: ifMatch)
    }
    public func registration(hub: String, id: String) async throws -> Registration? { try await inner.registration(hub: hub, id: id) }
    public func deleteRegistration(hub: String, id: String, ifMatch: Int64?) async throws -> Bool {
        try await inner.deleteRegistration(hub: hub, id: id, ifMatch: ifMatch)
    }
    public func registrationIdState(hub: String, id: String) async throws -> RegistrationIdState {
        try await inner.registrationIdState(hub: hub, id: id)
    }
    public func importRegistrations(_ registrations: [Registration]) async throws { try await inner.importRegistrations(registrations) }
    public func setUser(name: String, passwordHash: String) async throws { try await inner.setUser(name: name, passwordHash: passwordHash) }
    public func passwordHash(user: String) async throws -> String? { try await inner.passwordHash(user: user) }
    public func close() async { await inner.close() }
}
