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
    private let cache = Mutex<[String: (answer: Result<[String], ResolutionFailed>, at: ContinuousClock.Instant)]>([:])
    private let lifetime: Duration
    private let failureLifetime: Duration
    private let timeout: Duration
    /// Lookups run on their own few threads, never on Swift's or Dispatch's shared pools: a
    /// resolver that does not answer holds one of these, and nothing else.
    private let threads: NIOThreadPool
    private let inFlight = Mutex(0)
    private let maximumInFlight: Int
    /// The blocking lookup (getaddrinfo); tests give one that hangs.
    private let lookup: @Sendable (String) throws -> [String]
    private static let maximumCached = 10_000
    private static let timerLoop = MultiThreadedEventLoopGroup.singleton

    /// Answers are kept for `lifetime`, failures for `failureLifetime`; a lookup that takes
    /// longer than `timeout` fails (and its thread is left to finish on its own).
    public init(
        lifetime: Duration = .seconds(60), failureLifetime: Duration = .seconds(30), timeout: Duration = .seconds(2), threads: Int = 4,
        lookup: @escaping @Sendable (String) throws -> [String] = HostResolver.resolve
    ) {
        self.lookup = lookup
        self.lifetime = lifetime
        self.failureLifetime = failureLifetime
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
        if let cached = cache.withLock({ $0[host] }) {
            switch cached.answer {
            case .success(let addresses) where now - cached.at < lifetime: return addresses
            case .failure(let failure) where now - cached.at < failureLifetime: throw failure
            default: break
            }
        }
        let admitted = inFlight.withLock { count in
            guard count < maximumInFlight else { return false }
            count += 1
            return true
        }
        guard admitted else { throw ResolutionFailed(host: host, reason: "too many lookups at once") }
        defer { inFlight.withLock { $0 -= 1 } }
        // Whichever comes first, the answer or the time-out, is taken; a lookup still blocked
        // in getaddrinfo is not waited for (a task group would wait for it).
        let timeout = self.timeout
        let threads = self.threads
        let lookup = self.lookup
        let answer: Result<[String], ResolutionFailed> = await withCheckedContinuation { continuation in
            let once = Mutex<CheckedContinuation<Result<[String], ResolutionFailed>, Never>?>(continuation)
            let finish: @Sendable (Result<[String], ResolutionFailed>) -> Void = { result in
                once.withLock { pending in
                    pending?.resume(returning: result)
                    pending = nil
                }
            }
            let lookup = threads.runIfActive(eventLoop: Self.timerLoop.next()) { try lookup(host) }
            lookup.whenComplete { result in
                switch result {
                case .success(let addresses): finish(.success(addresses))
                case .failure(let failure as ResolutionFailed): finish(.failure(failure))
                case .failure(let error): finish(.failure(ResolutionFailed(host: host, reason: "\(error)")))
                }
            }
            Self.timerLoop.next().scheduleTask(in: TimeAmount(timeout)) {
                finish(.failure(ResolutionFailed(host: host, reason: "no answer in \(timeout)")))
            }
        }
        cache.withLock { entries in
            if entries.count >= Self.maximumCached { entries.removeAll() }
            entries[host] = (answer, now)
        }
        return try answer.get()
    }

    struct ResolutionFailed: Error, CustomStringConvertible {
        var host: String
        var reason: String
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
