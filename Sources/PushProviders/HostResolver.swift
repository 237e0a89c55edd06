import Foundation
import NIOCore
import NIOPosix
import PushModel
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Resolves host names to addresses (as text) off the cooperative pool, and remembers each
/// answer for a while, so that a Web Push endpoint can be refused when its name leads to a
/// loopback, private or reserved address.
public final class HostResolver: Sendable {
    /// What is known of a name: the answer used until `fresh`, and the last addresses it had.
    private struct Entry {
        var answer: Result<[String], ResolutionFailed>
        var fresh: ContinuousClock.Instant
        var lastGood: (addresses: [String], at: ContinuousClock.Instant)?
    }

    private let cache = Mutex<[String: Entry]>([:])
    private let lifetime: Duration
    private let failureLifetime: Duration
    private let staleLifetime: Duration
    private let timeout: Duration
    /// Lookups run on their own few threads, never on Swift's or Dispatch's shared pools: a
    /// resolver that does not answer holds one of these, and nothing else.
    private let threads: NIOThreadPool
    /// Lookups given to the threads and not yet returned from getaddrinfo (a caller that timed
    /// out has gone, its lookup has not): at most `maximumInFlight`, so names that never
    /// answer cannot queue work without end.
    private let inFlight = Mutex(0)
    private let maximumInFlight: Int
    /// The blocking lookup (getaddrinfo); tests give one that hangs.
    private let lookup: @Sendable (String) throws -> [String]
    private static let maximumCached = 10_000
    private static let timerLoop = MultiThreadedEventLoopGroup.singleton

    /// Answers are kept for `lifetime`, failures for `failureLifetime`; a lookup that takes
    /// longer than `timeout` fails (and its thread is left to finish on its own). A name whose
    /// lookup timed out, or found every thread taken, keeps the addresses it last had, for up
    /// to `staleLifetime` after they were looked up: names that never answer (a device's
    /// endpoint can name any) must not fail the pushes of the services that do.
    public init(
        lifetime: Duration = .seconds(60), failureLifetime: Duration = .seconds(30), staleLifetime: Duration = .seconds(3600),
        timeout: Duration = .seconds(2), threads: Int = 4, lookup: @escaping @Sendable (String) throws -> [String] = HostResolver.resolve
    ) {
        self.lookup = lookup
        self.lifetime = lifetime
        self.failureLifetime = failureLifetime
        self.staleLifetime = staleLifetime
        self.timeout = timeout
        self.threads = NIOThreadPool(numberOfThreads: threads)
        self.threads.start()
        maximumInFlight = threads * 4
    }

    deinit {
        threads.shutdownGracefully { _ in }
    }

    /// The addresses of `host`; an address literal is its own answer. Throws when the name
    /// does not resolve in time.
    public func addresses(of host: String) async throws -> [String] {
        let host = EndpointPolicy.unbracketed(host).lowercased()
        let now = ContinuousClock.now
        let known = cache.withLock { $0[host] }
        if let known, now < known.fresh { return try known.answer.get() }
        let admitted = inFlight.withLock { count in
            guard count < maximumInFlight else { return false }
            count += 1
            return true
        }
        let answer: Result<[String], ResolutionFailed>
        if admitted {
            answer = await look(up: host)
        } else {
            answer = .failure(ResolutionFailed(host: host, reason: "too many lookups at once", isTransient: true))
        }
        var entry = Entry(answer: answer, fresh: now + failureLifetime, lastGood: known?.lastGood)
        switch answer {
        case .success(let addresses):
            entry.fresh = now + lifetime
            entry.lastGood = (addresses, now)
        case .failure(let failure):
            if failure.isTransient, let last = known?.lastGood, now - last.at < staleLifetime {
                // Retried once `failureLifetime` has passed, the last addresses meanwhile.
                entry.answer = .success(last.addresses)
            } else if !admitted {
                throw failure
            }
        }
        cache.withLock { entries in
            if entries.count >= Self.maximumCached {
                // The names past all use go first; all of them only when that is not enough.
                entries = entries.filter { now < $0.value.fresh || ($0.value.lastGood.map { now - $0.at < staleLifetime } ?? false) }
                if entries.count >= Self.maximumCached { entries.removeAll() }
            }
            entries[host] = entry
        }
        return try entry.answer.get()
    }

    /// One lookup on the resolver's threads: its answer, or a transient failure after `timeout`
    /// (the lookup still blocked is not waited for; it leaves `inFlight` when it returns).
    private func look(up host: String) async -> Result<[String], ResolutionFailed> {
        let timeout = self.timeout
        let threads = self.threads
        let lookup = self.lookup
        return await withCheckedContinuation { continuation in
            let once = Mutex<CheckedContinuation<Result<[String], ResolutionFailed>, Never>?>(continuation)
            let finish: @Sendable (Result<[String], ResolutionFailed>) -> Void = { result in
                once.withLock { pending in
                    pending?.resume(returning: result)
                    pending = nil
                }
            }
            let lookup = threads.runIfActive(eventLoop: Self.timerLoop.next()) { try lookup(host) }
            lookup.whenComplete { [self] result in
                inFlight.withLock { $0 -= 1 }
                switch result {
                case .success(let addresses): finish(.success(addresses))
                case .failure(let failure as ResolutionFailed): finish(.failure(failure))
                case .failure(let error): finish(.failure(ResolutionFailed(host: host, reason: "\(error)")))
                }
            }
            Self.timerLoop.next().scheduleTask(in: TimeAmount(timeout)) {
                finish(.failure(ResolutionFailed(host: host, reason: "no answer in \(timeout)", isTransient: true)))
            }
        }
    }

    struct ResolutionFailed: Error, CustomStringConvertible {
        var host: String
        var reason: String
        /// Says nothing of the name: the lookup timed out, or was not made.
        var isTransient = false
        var description: String { "\(host) does not resolve (\(reason))" }
    }

    public static func resolve(_ host: String) throws -> [String] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let code = getaddrinfo(host, nil, &hints, &list)
        guard code == 0 else { throw ResolutionFailed(host: host, reason: String(cString: gai_strerror(code))) }
        defer { freeaddrinfo(list) }
        var addresses: [String] = []
        var next = list
        while let entry = next {
            var buffer = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            if getnameinfo(entry.pointee.ai_addr, entry.pointee.ai_addrlen, &buffer, socklen_t(buffer.count), nil, 0, NI_NUMERICHOST) == 0 {
                addresses.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
            }
            next = entry.pointee.ai_next
        }
        return addresses
    }
}
