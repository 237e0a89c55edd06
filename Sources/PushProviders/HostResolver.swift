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
        let staleLifetime = self.staleLifetime
        let (lifetime, failureLifetime) = (self.lifetime, self.failureLifetime)
        // Read again as it is written: another caller may have looked the name up meanwhile,
        // and its addresses are better than this caller's failure.
        return try cache.withLock { entries throws(ResolutionFailed) -> [String] in
            let current = entries[host]
            if case .failure = answer, case .success(let addresses)? = current?.answer, let fresh = current?.fresh, now < fresh {
                return addresses
            }
            // The newest addresses the name had; none once it was found not to exist.
            var lastGood = [known?.lastGood, current?.lastGood].compactMap { $0 }.max { $0.at < $1.at }
            var entry: Entry
            switch answer {
            case .success(let addresses):
                entry = Entry(answer: answer, fresh: now + lifetime, lastGood: (addresses, now))
            case .failure(let failure):
                if !failure.isTransient { lastGood = nil }
                if failure.isTransient, let last = lastGood, now - last.at < staleLifetime {
                    // Looked up again once `failureLifetime` has passed; the last addresses meanwhile.
                    entry = Entry(answer: .success(last.addresses), fresh: now + failureLifetime, lastGood: last)
                } else if !admitted {
                    throw failure
                } else {
                    entry = Entry(answer: answer, fresh: now + failureLifetime, lastGood: lastGood)
                }
            }
            if entries[host] == nil, entries.count >= Self.maximumCached { Self.trim(&entries) }
            entries[host] = entry
            return try entry.answer.get()
        }
    }

    /// Makes room in a full cache: the names looked up longest ago go, a tenth of them, so
    /// that the names in use (a service's is looked up again every `lifetime`) stay.
    private static func trim(_ entries: inout [String: Entry]) {
        let byAge = entries.map { (host: $0.key, at: $0.value.fresh) }.sorted { $0.at < $1.at }
        for old in byAge.prefix(entries.count - maximumCached * 9 / 10) { entries[old.host] = nil }
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
                // The lookup threads would not take it: nothing said of the name.
                case .failure(let error): finish(.failure(ResolutionFailed(host: host, reason: "\(error)", isTransient: true)))
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
        // EAI_AGAIN: the name server did not answer for now (SERVFAIL, a time-out).
        guard code == 0 else { throw ResolutionFailed(host: host, reason: String(cString: gai_strerror(code)), isTransient: code == EAI_AGAIN) }
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
