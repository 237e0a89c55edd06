import Crypto
import Foundation
import HummingbirdBcrypt
import NIOPosix
import PushStore
import Synchronization

/// Authenticates app-backend callers: Basic against users in the store (bcrypt hashes), or a
/// Bearer JWT when one is configured. There is no shortcut such as a password equal to the name.
public struct UserAuthenticator: Sendable {
    let store: any RegistrationStore
    let jwt: JWTVerifier?
    let now: @Sendable () -> Date
    /// Recent successful Basic logins, so bcrypt (tens of milliseconds by design) does not
    /// run on every request of a logged-in user. Keyed by a digest of the credentials.
    private let recent = RecentLogins()

    init(store: any RegistrationStore, jwt: JWTVerifier?, now: @escaping @Sendable () -> Date) {
        self.store = store
        self.jwt = jwt
        self.now = now
    }

    /// The authenticated user name, from an `Authorization` header.
    func user(authorization: String?) async throws(AuthenticationError) -> String {
        guard let authorization else { throw .missing }
        if authorization.lowercased().hasPrefix("basic ") {
            return try await basic(String(authorization.dropFirst(6)).trimmingCharacters(in: .whitespaces))
        }
        if authorization.lowercased().hasPrefix("bearer ") {
            guard let jwt else { throw .invalid("this server does not take Bearer tokens; use Basic") }
            return try jwt.user(from: String(authorization.dropFirst(7)).trimmingCharacters(in: .whitespaces), now: now())
        }
        throw .missing
    }

    private func basic(_ encoded: String) async throws(AuthenticationError) -> String {
        guard let data = Data(base64Encoded: encoded), let text = String(data: data, encoding: .utf8), let colon = text.firstIndex(of: ":") else {
            throw .invalid("the Basic credentials are not base64 of name:password")
        }
        let name = String(text[..<colon])
        let password = String(text[text.index(after: colon)...])
        guard !name.isEmpty, !password.isEmpty else { throw .invalid("user name and password must not be empty") }
        // bcrypt reads 72 bytes; `users add` refuses longer passwords, so none can match.
        guard password.utf8.count <= Self.maximumPasswordBytes, name.utf8.count <= 100 else { throw .invalid("unknown user or wrong password") }
        let digest = Data(SHA256.hash(data: data))
        if recent.contains(digest, now: now()) { return name }
        let hash: String?
        do { hash = try await store.passwordHash(user: name) } catch { throw .invalid("the user store is not available") }
        // Unknown users cost a bcrypt too, so timing does not tell which names exist.
        let reference = hash ?? Self.decoyHash
        let matches = try? await NIOThreadPool.singleton.runIfActive { Bcrypt.verify(password, hash: reference) }
        guard hash != nil, matches == true else { throw .invalid("unknown user or wrong password") }
        recent.insert(digest, now: now())
        return name
    }

    static let decoyHash = Bcrypt.hash("pushhub-decoy-password", cost: 10)
    /// bcrypt uses this many bytes of a password and ignores the rest.
    public static let maximumPasswordBytes = 72

    /// The hash PushHub stores for a password.
    static func hash(password: String) -> String {
        Bcrypt.hash(password, cost: 10)
    }
}

/// Digests of credentials that passed bcrypt lately, each good for five minutes.
final class RecentLogins: Sendable {
    private let entries = Mutex<[Data: Date]>([:])
    static let lifetime: TimeInterval = 300
    static let capacity = 10_000

    func contains(_ digest: Data, now: Date) -> Bool {
        entries.withLock { entries in
            guard let expiry = entries[digest] else { return false }
            if expiry > now { return true }
            entries[digest] = nil
            return false
        }
    }

    func insert(_ digest: Data, now: Date) {
        entries.withLock { entries in
            if entries.count >= Self.capacity { entries = entries.filter { $0.value > now } }
            if entries.count < Self.capacity { entries[digest] = now.addingTimeInterval(Self.lifetime) }
        }
    }
}
