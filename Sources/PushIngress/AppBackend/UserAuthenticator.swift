import Crypto
import Foundation
import HummingbirdBcrypt
import NIOPosix
import PushModel
import PushStore
import Synchronization

/// Authenticates app-backend callers: Basic against users in the store (bcrypt hashes), or a
/// Bearer JWT when one is configured. There is no shortcut such as a password equal to the name.
public struct UserAuthenticator: Sendable {
    let users: any UserStore
    let jwt: JWTVerifier?
    let now: @Sendable () -> Date
    /// Recent successful Basic logins, so bcrypt (tens of milliseconds by design) does not
    /// run on every request of a logged-in user. Keyed by a digest of the credentials.
    private let recent = RecentLogins()
    /// Failed logins per client, and the back-off they earned.
    private let failures: LoginFailures
    /// Password checks running at once, bounded so a guessing flood cannot take every core.
    private let checks: PasswordCheckSlots

    init(users: any UserStore, jwt: JWTVerifier?, limits: LoginLimits = LoginLimits(), now: @escaping @Sendable () -> Date) {
        self.users = users
        self.jwt = jwt
        self.now = now
        failures = LoginFailures(limits: limits)
        checks = PasswordCheckSlots(running: limits.concurrentChecks, waiting: limits.waitingChecks)
    }

    /// The authenticated user name, from an `Authorization` header.
    func user(authorization: String?, client: String? = nil) async throws(AuthenticationError) -> String {
        guard let authorization else { throw .missing }
        if authorization.lowercased().hasPrefix("basic ") {
            return try await basic(String(authorization.dropFirst(6)).trimmingCharacters(in: .whitespaces), client: client ?? "unknown")
        }
        if authorization.lowercased().hasPrefix("bearer ") {
            guard let jwt else { throw .invalid("this server does not take Bearer tokens; use Basic") }
            return try jwt.user(from: String(authorization.dropFirst(7)).trimmingCharacters(in: .whitespaces), now: now())
        }
        throw .missing
    }

    private func basic(_ encoded: String, client: String) async throws(AuthenticationError) -> String {
        guard let data = Data(base64Encoded: encoded), let text = String(data: data, encoding: .utf8), let colon = text.firstIndex(of: ":") else {
            throw .invalid("the Basic credentials are not base64 of name:password")
        }
        let name = String(text[..<colon])
        let password = String(text[text.index(after: colon)...])
        guard !name.isEmpty, !password.isEmpty else { throw .invalid("user name and password must not be empty") }
        // A name is counted as it is looked up: a control character (U+0000 ended a name on
        // SQLite) would make `alice` a new name to the back-offs, for every guess.
        guard !FieldCheck.hasControlCharacters(name), !password.utf8.contains(0) else {
            throw .invalid("unknown user or wrong password")
        }
        // bcrypt reads 72 bytes; `users add` refuses longer passwords, so none can match.
        guard password.utf8.count <= Self.maximumPasswordBytes, name.utf8.count <= 100 else { throw .invalid("unknown user or wrong password") }
        let digest = Data(SHA256.hash(data: data))
        if recent.contains(digest, now: now()) { return name }
        switch failures.backOff(client: client, user: name, now: now()) {
        case .client(let wait): throw .throttled(retryAfter: wait, "too many failed logins from this client; try again in \(wait) s")
        case .user(let wait): throw .throttled(retryAfter: wait, "too many failed logins for this user name; try again in \(wait) s")
        case nil: break
        }
        // A client gets a few password checks at a time; a flood from one place waits its turn
        // at the door, not in the bcrypt queue.
        guard failures.startCheck(client) else {
            throw .throttled(retryAfter: 1, "too many logins from this client at once; try again in a second")
        }
        defer { failures.endCheck(client) }
        let hash: String?
        do { hash = try await users.passwordHash(user: name) } catch { throw .invalid("the user store is not available") }
        guard await checks.enter() else { throw .throttled(retryAfter: 0, "too many password checks at once; try again shortly") }
        // Unknown users cost a bcrypt too, so timing does not tell which names exist. On NIO's
        // thread pool, the decoy's first hashing too: not on the thread of a request.
        let matches = try? await NIOThreadPool.singleton.runIfActive { Bcrypt.verify(password, hash: hash ?? Self.decoyHash) }
        await checks.leave()
        guard hash != nil, matches == true else {
            failures.failed(client: client, user: name, now: now())
            throw .invalid("unknown user or wrong password")
        }
        recent.insert(digest, now: now())
        failures.succeeded(client: client, user: name, now: now())
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

/// How Basic logins are rationed.
public struct LoginLimits: Sendable {
    /// Failed logins for one user name from one client before that client must wait to try
    /// the name again; `clientFailuresBeforeBackOff` failures in all (any names) before it must
    /// wait for any. Behind a proxy every user shares one client: keep that one high.
    public var failuresBeforeBackOff = 5
    public var clientFailuresBeforeBackOff = 50
    /// Failed logins for one user name from all clients before the clients that have not
    /// logged in as that user lately must wait to try it: guesses spread over many addresses.
    /// Its wait is at most `maximumUserBackOff`, since it is the user's too, on a new address.
    public var userFailuresBeforeBackOff = 20
    /// The first wait; each further failure doubles it, up to `maximumBackOff`.
    public var firstBackOff: TimeInterval = 1
    public var maximumBackOff: TimeInterval = 300
    public var maximumUserBackOff: TimeInterval = 60
    /// A client that logged in as a user is spared that user's back-off this long.
    public var familiarFor: TimeInterval = 30 * 86_400
    /// A client's failures are forgotten after this long without one.
    public var forgetAfter: TimeInterval = 900
    /// bcrypt checks at once (each takes tens of milliseconds of a core).
    public var concurrentChecks = 2
    /// bcrypt checks of one client at once.
    public var concurrentChecksPerClient = 4
    /// Checks that may wait for a slot; past that a login is answered 503 at once.
    public var waitingChecks = 64

    public init() {}
}

/// Failed logins per client address and per user name, and how long each must wait before
/// its next try.
final class LoginFailures: Sendable {
    private let limits: LoginLimits
    private let entries = Mutex<[String: (failures: Int, last: Date, until: Date)]>([:])
    private let checking = Mutex<[String: Int]>([:])
    /// Client and user pairs that logged in, and until when each is spared the user's back-off.
    private let familiar = Mutex<[String: Date]>([:])
    static let capacity = 100_000

    /// Who must wait, and for how many seconds.
    enum Wait: Equatable {
        case client(Int)
        case user(Int)
    }

    /// Counts a password check of `client` starting; false when it has too many running.
    func startCheck(_ client: String) -> Bool {
        checking.withLock { running in
            guard running[client, default: 0] < limits.concurrentChecksPerClient else { return false }
            running[client, default: 0] += 1
            return true
        }
    }

    func endCheck(_ client: String) {
        checking.withLock { running in
            running[client, default: 1] -= 1
            if running[client] == 0 { running[client] = nil }
        }
    }

    init(limits: LoginLimits) {
        self.limits = limits
    }

    /// How long `client` must still wait before trying `user`: its own back-off for the name or
    /// for any name, else the name's own, unless it logged in as that user lately; or nil.
    func backOff(client: String, user: String, now: Date) -> Wait? {
        let spared = familiar.withLock { $0[Self.key(client, user)].map { $0 > now } ?? false }
        return entries.withLock { entries in
            func wait(_ key: String) -> Int? {
                guard let entry = entries[key], entry.until > now else { return nil }
                return Int(entry.until.timeIntervalSince(now).rounded(.up))
            }
            if let own = [wait(Self.key(client, user)), wait(Self.key(client, nil))].compactMap({ $0 }).max() { return .client(own) }
            guard !spared, var entry = entries[Self.userKey(user)] else { return nil }
            if let users = wait(Self.userKey(user)) { return .user(users) }
            // Past its wait and still counted: this try takes the opening, and the name waits
            // again, so that the tries that come while this one is checked do not all pass.
            let over = entry.failures - limits.userFailuresBeforeBackOff
            if over >= 0, now.timeIntervalSince(entry.last) < limits.forgetAfter {
                entry.until = now.addingTimeInterval(step(over: over, longest: limits.maximumUserBackOff))
                entries[Self.userKey(user)] = entry
            }
            return nil
        }
    }

    /// The wait after `over` failures past a threshold: `firstBackOff`, doubling, at most `longest`.
    private func step(over: Int, longest: TimeInterval) -> TimeInterval {
        min(longest, limits.firstBackOff * pow(2, Double(min(over, 30))))
    }

    func failed(client: String, user: String, now: Date) {
        count(Self.key(client, user), threshold: limits.failuresBeforeBackOff, longest: limits.maximumBackOff, now: now)
        count(Self.key(client, nil), threshold: limits.clientFailuresBeforeBackOff, longest: limits.maximumBackOff, now: now)
        count(Self.userKey(user), threshold: limits.userFailuresBeforeBackOff, longest: limits.maximumUserBackOff, now: now)
    }

    func succeeded(client: String, user: String, now: Date) {
        familiar.withLock { familiar in
            if familiar.count >= Self.capacity { familiar = familiar.filter { $0.value > now } }
            let key = Self.key(client, user)
            if familiar[key] != nil || familiar.count < Self.capacity { familiar[key] = now.addingTimeInterval(limits.familiarFor) }
        }
    }

    static func key(_ client: String, _ user: String?) -> String { user.map { "\(client)\u{0}\($0)" } ?? client }
    /// A user name's failures from all clients (no address holds U+0001).
    static func userKey(_ user: String) -> String { "\u{1}" + user }

    private func count(_ client: String, threshold: Int, longest: TimeInterval, now: Date) {
        entries.withLock { entries in
            if entries.count >= Self.capacity { entries = entries.filter { now.timeIntervalSince($0.value.last) < limits.forgetAfter } }
            var entry = entries[client] ?? (0, now, now)
            if now.timeIntervalSince(entry.last) >= limits.forgetAfter { entry = (0, now, now) }
            entry.failures += 1
            entry.last = now
            let over = entry.failures - threshold
            if over >= 0 { entry.until = now.addingTimeInterval(step(over: over, longest: longest)) }
            // A full table still counts those it holds.
            if entries[client] != nil || entries.count < Self.capacity { entries[client] = entry }
        }
    }
}

/// A bounded number of password checks at once, and a bounded queue for the rest.
actor PasswordCheckSlots {
    private let running: Int
    private let waiting: Int
    private var busy = 0
    private var queue: [CheckedContinuation<Void, Never>] = []

    init(running: Int, waiting: Int) {
        self.running = running
        self.waiting = waiting
    }

    /// Takes a slot, waiting for one if need be; false when the queue is full.
    func enter() async -> Bool {
        if busy < running {
            busy += 1
            return true
        }
        guard queue.count < waiting else { return false }
        await withCheckedContinuation { queue.append($0) }
        return true
    }

    func leave() {
        if queue.isEmpty {
            busy -= 1
        } else {
            queue.removeFirst().resume()
        }
    }
}
