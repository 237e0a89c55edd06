import Crypto
import Foundation
import PushConfiguration
import PushModel
import Synchronization

/// A signed-in console user, as the session cookie carries it: the hub, who signed in (a hub
/// key by its rule name, or a console account), when the session ends, and the seed of its
/// CSRF token. The cookie holds no secret; the rights are read from the configuration on every
/// request, so a key removed or replaced ends its sessions at once.
struct ConsoleSession: Codable, Sendable, Equatable {
    enum Kind: String, Codable, Sendable { case key, account }

    var hub: String
    var kind: Kind
    /// The SAS rule's name, or the account's.
    var name: String
    /// A keyed digest of the rule's key, or of the account's password hash, when the session
    /// began: a new key or password ends the session.
    var fingerprint: String?
    /// Seconds since 1970.
    var expires: Int64
    /// Random, per session: the CSRF token is derived from it.
    var nonce: String
}

/// Makes and reads session cookies, signed with HMAC-SHA256, and their CSRF tokens.
struct ConsoleSessions: Sendable {
    static let cookieName = "pushhub_console"
    /// A cookie longer than this is not read.
    static let cookieLimit = 1_024

    /// The signing key's bytes (SymmetricKey is not Sendable).
    private let keyBytes: [UInt8]
    private var key: SymmetricKey { SymmetricKey(data: keyBytes) }
    let lifetime: TimeInterval
    /// Cookies only go over https when the ingress is reached over https.
    let secure: Bool
    /// Sessions signed out, until they would have ended (this process's; a session signed out
    /// on one ingress stays valid on another until its expiry).
    let revoked = RevokedSessions()

    init(secret: String?, lifetime: TimeInterval, secure: Bool) {
        keyBytes = (secret.map { SymmetricKey(data: SHA256.hash(data: Data($0.utf8))) } ?? SymmetricKey(size: .bits256)).withUnsafeBytes { Array($0) }
        self.lifetime = lifetime
        self.secure = secure
    }

    func begin(hub: String, kind: ConsoleSession.Kind, name: String, fingerprint: String?, now: Date) -> ConsoleSession {
        ConsoleSession(
            hub: hub, kind: kind, name: name, fingerprint: fingerprint, expires: Int64(now.addingTimeInterval(lifetime).timeIntervalSince1970),
            nonce: Base64URL.encode(SymmetricKey(size: .bits128).withUnsafeBytes { Array($0) }))
    }

    /// `Set-Cookie` for a session: HttpOnly, SameSite=Strict, for the console's paths only.
    func setCookie(_ session: ConsoleSession) -> String {
        let payload = Base64URL.encode((try? JSONEncoder().encode(session)) ?? Data())
        let value = "\(payload).\(sign(payload))"
        return "\(Self.cookieName)=\(value); Path=/console; HttpOnly; SameSite=Strict; Max-Age=\(Int(lifetime))\(secure ? "; Secure" : "")"
    }

    /// `Set-Cookie` that ends the session in the browser.
    var clearCookie: String {
        "\(Self.cookieName)=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0\(secure ? "; Secure" : "")"
    }

    /// The session in a `Cookie` header, when its signature holds and it has not ended.
    func session(cookieHeader: String?, now: Date) -> ConsoleSession? {
        guard let cookieHeader, cookieHeader.utf8.count <= 8 * 1_024 else { return nil }
        for pair in cookieHeader.split(separator: ";").prefix(64) {
            let trimmed = pair.trimmingSpaces
            guard trimmed.hasPrefix("\(Self.cookieName)=") else { continue }
            let value = trimmed.dropFirst(Self.cookieName.count + 1)
            // Every cookie of the name is tried: one set by someone else (another path, a
            // sibling domain) does not hide the real one.
            guard value.utf8.count <= Self.cookieLimit else { continue }
            let parts = value.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 2, let signature = Base64URL.decode(String(parts[1])),
                HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: Data(parts[0].utf8), using: key),
                let json = Base64URL.decode(String(parts[0])), let session = try? JSONDecoder().decode(ConsoleSession.self, from: json),
                session.expires > Int64(now.timeIntervalSince1970), !revoked.contains(session.nonce, now: now)
            else { continue }
            return session
        }
        return nil
    }

    /// The token every state-changing form of the session carries.
    func csrfToken(_ session: ConsoleSession) -> String { sign("csrf:\(session.nonce)") }

    func checkCSRF(_ token: String?, _ session: ConsoleSession) -> Bool {
        guard let token, let given = Base64URL.decode(token) else { return false }
        return HMAC<SHA256>.isValidAuthenticationCode(given, authenticating: Data("csrf:\(session.nonce)".utf8), using: key)
    }

    /// A keyed digest of a SAS rule's key or an account's password hash: sessions begun with
    /// it end when it changes.
    func fingerprint(of secret: String) -> String { sign("secret:\(secret)") }

    private func sign(_ text: String) -> String {
        Base64URL.encode(Data(HMAC<SHA256>.authenticationCode(for: Data(text.utf8), using: key)))
    }

    /// The rights a session holds now: its key's rule as configured (when the key is
    /// unchanged), or Manage for an account allowed on the hub; nil when neither holds.
    func rights(of session: ConsoleSession, hubs: HubsConfiguration) -> (hub: HubsConfiguration.Hub, rights: Set<AccessRight>)? {
        guard let hub = hubs.hub(named: session.hub) else { return nil }
        switch session.kind {
        case .key:
            guard let rule = hub.sasRules.first(where: { $0.name == session.name }), let fingerprint = session.fingerprint,
                Self.equal(fingerprint, self.fingerprint(of: rule.key))
            else { return nil }
            return (hub, rule.rights.contains(.manage) ? [.listen, .send, .manage] : rule.rights)
        case .account:
            guard let account = hubs.console?.accounts?.first(where: { $0.name == session.name }),
                account.allows(hub: hub.name), let fingerprint = session.fingerprint,
                Self.equal(fingerprint, self.fingerprint(of: account.passwordHash))
            else { return nil }
            return (hub, [.listen, .send, .manage])
        }
    }

    /// Compares two texts in time that does not depend on where they differ.
    static func equal(_ a: String, _ b: String) -> Bool { constantTimeEqual(Array(a.utf8), Array(b.utf8)) }
}

/// The nonces of sessions signed out, each kept until its session would have ended; at most
/// `capacity`, the ended ones dropped first.
final class RevokedSessions: Sendable {
    static let capacity = 10_000
    private let nonces = Mutex<[String: Int64]>([:])

    func revoke(_ session: ConsoleSession, now: Date) {
        nonces.withLock { nonces in
            if nonces.count >= Self.capacity { nonces = nonces.filter { $0.value > Int64(now.timeIntervalSince1970) } }
            if nonces.count >= Self.capacity, let soonest = nonces.min(by: { $0.value < $1.value }) { nonces[soonest.key] = nil }
            nonces[session.nonce] = session.expires
        }
    }

    func contains(_ nonce: String, now: Date) -> Bool {
        nonces.withLock { $0[nonce].map { $0 > Int64(now.timeIntervalSince1970) } ?? false }
    }
}
