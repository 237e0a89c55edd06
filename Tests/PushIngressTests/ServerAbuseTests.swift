import Foundation
import Hummingbird
import Logging
import PushIngress
import PushModel
import PushStore
import ServiceLifecycle
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The ingress as a listening server under abuse: connections that never finish their headers,
/// and a password-guessing flood. Everything goes over plain sockets, as an attacker's would.
@Suite("The HTTP server under abuse", .timeLimit(.minutes(2)))
struct ServerAbuseTests {
    /// A TCP connection to 127.0.0.1.
    final class RawConnection: Sendable {
        let descriptor: Int32

        /// Connects from `source` when given (any of 127.0.0.0/8 is this machine).
        init(port: Int, from source: String? = nil) throws {
            descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            if let source {
                var local = sockaddr_in()
                local.sin_family = sa_family_t(AF_INET)
                local.sin_addr.s_addr = inet_addr(source)
                let bound = withUnsafePointer(to: &local) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                }
                guard bound == 0 else { throw POSIXError(.EADDRNOTAVAIL) }
            }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard connected == 0 else { throw POSIXError(.ECONNREFUSED) }
        }

        func send(_ text: String) {
            _ = text.withCString { Glibc.send(descriptor, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        }

        /// True when the server closed the connection (a read returns end of file or an error).
        func isClosedByServer() -> Bool {
            var buffer = [UInt8](repeating: 0, count: 512)
            var pollDescriptor = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&pollDescriptor, 1, 0) > 0 else { return false }
            return recv(descriptor, &buffer, buffer.count, Int32(MSG_DONTWAIT)) <= 0
        }

        /// The response's status line, once it arrived (empty when the server closed first or
        /// `timeout` passed).
        func statusLine(timeout: Duration) -> String {
            var received = [UInt8]()
            var buffer = [UInt8](repeating: 0, count: 4096)
            let deadline = ContinuousClock.now + timeout
            while ContinuousClock.now < deadline {
                var pollDescriptor = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                guard poll(&pollDescriptor, 1, 50) > 0 else { continue }
                let count = recv(descriptor, &buffer, buffer.count, 0)
                if count <= 0 { break }
                received += buffer.prefix(count)
                if let end = received.firstIndex(of: UInt8(ascii: "\r")) { return String(decoding: received[..<end], as: UTF8.self) }
            }
            return String(decoding: received, as: UTF8.self)
        }

        deinit { close(descriptor) }
    }

    /// One whole request on a fresh connection (closed after); the response's status line. The
    /// blocking socket calls run on a thread of their own: on Dispatch's shared threads, many
    /// waiting clients would starve the server they wait for.
    static func request(
        port: Int, from source: String? = nil, _ method: String, _ path: String, headers: [String: String] = [:], body: String = ""
    ) async throws -> String {
        try await withCheckedThrowingContinuation { continuation in
            Thread {
                do {
                    let connection = try RawConnection(port: port, from: source)
                    var text = "\(method) \(path) HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: \(body.utf8.count)\r\n"
                    for (name, value) in headers { text += "\(name): \(value)\r\n" }
                    connection.send(text + "\r\n" + body)
                    continuation.resume(returning: connection.statusLine(timeout: .seconds(60)))
                } catch {
                    continuation.resume(throwing: error)
                }
            }.start()
        }
    }

    /// The ingress with `logins`' limits and app-backend `users`, each with the password
    /// `{name}-secret`, listening for the duration of `body`.
    static func withUsers(
        _ users: [String], logins: LoginLimits, _ body: @escaping @Sendable (Int, any RegistrationStore) async throws -> Void
    ) async throws {
        try await withIngress(idleTimeout: .seconds(30), logins: logins) { port, store in
            for name in users { try await store.setUser(name: name, passwordHash: hashPassword("\(name)-secret")) }
            try await body(port, store)
        }
    }

    /// The ingress listening on a free port for the duration of `body`.
    static func withIngress(
        idleTimeout: Duration, logins: LoginLimits = LoginLimits(), _ body: @escaping @Sendable (Int, any RegistrationStore) async throws -> Void
    ) async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-\(UUID().uuidString).sqlite").path
        let store = try await SQLRegistrationStore.open(SQLiteDatabase(path: path))
        var configuration = IngressConfiguration(hubs: IngressFixture.hubs)
        configuration.port = 0
        configuration.idleTimeout = idleTimeout
        let logger = Logger(label: "pushhub.tests") { _ in SwiftLogNoOpLogHandler() }
        let (ports, port) = AsyncStream.makeStream(of: Int.self)
        let app = try buildIngressApplication(configuration: configuration, stores: IngressStores(store), logins: logins, logger: logger) {
            port.yield($0)
        }
        let group = ServiceGroup(configuration: .init(services: [app], logger: logger))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            var listening: Int?
            for await port in ports {
                listening = port
                break
            }
            var failure: (any Error)?
            do { try await body(try #require(listening), store) } catch { failure = error }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
            if let failure { throw failure }
        }
    }

    static func installation(_ index: Int) -> String { #"{"installationId":"ok-\#(index)","platform":"apns","pushChannel":"aaaa"}"# }
    static let listen = [
        "Authorization": IngressFixture.token("/myhub", key: IngressFixture.listenKey, name: "DefaultListenSharedAccessSignature"),
        "Content-Type": "application/json",
    ]

    @Test("200 connections that never finish their headers neither block requests nor stay open past the time-out")
    func slowHeaders() async throws {
        try await Self.withIngress(idleTimeout: .seconds(2)) { port, _ in
            let slow = try (0..<200).map { _ in try RawConnection(port: port) }
            for connection in slow { connection.send("PUT /myhub/installations/x HTTP/1.1\r\nHost: localhost\r\nX-Slow: ") }

            // Ordinary requests go through while the 200 wait.
            for index in 0..<20 {
                let began = ContinuousClock.now
                let status = try await Self.request(
                    port: port, "PUT", "/myhub/installations/ok-\(index)", headers: Self.listen, body: Self.installation(index))
                #expect(status == "HTTP/1.1 200 OK", "request \(index): \(status) after \(ContinuousClock.now - began)")
            }

            // Trickling a header byte now and then does not keep a connection: the head must
            // be complete within the time-out.
            for _ in 0..<5 {
                try await Task.sleep(for: .milliseconds(800))
                for connection in slow { connection.send("a") }
            }
            var closed = 0
            let deadline = ContinuousClock.now + .seconds(30)
            repeat {
                try await Task.sleep(for: .milliseconds(200))
                closed = slow.filter { $0.isClosedByServer() }.count
            } while closed < 200 && ContinuousClock.now < deadline
            #expect(closed == 200, "the server closed \(closed) of the 200 slow connections")
        }
    }

    @Test("bodies trickled a byte at a time are cut off: a request must come whole within the time-out and its bytes' time at 4 KiB/s")
    func slowBodies() async throws {
        try await Self.withIngress(idleTimeout: .seconds(2)) { port, store in
            // A byte of body every half second resets the idle time-out each time; before the
            // request's own deadline these connections stayed open as long as the bytes came.
            let slow = try (0..<50).map { _ in try RawConnection(port: port) }
            for connection in slow {
                var head = "PUT /myhub/installations/slow HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100000\r\n"
                for (name, value) in Self.listen { head += "\(name): \(value)\r\n" }
                connection.send(head + "\r\n{")
            }
            var closed = 0
            let deadline = ContinuousClock.now + .seconds(20)
            repeat {
                try await Task.sleep(for: .milliseconds(500))
                for connection in slow { connection.send(" ") }
                closed = slow.filter { $0.isClosedByServer() }.count
            } while closed < slow.count && ContinuousClock.now < deadline
            #expect(closed == slow.count, "the server closed \(closed) of the \(slow.count) trickling connections")

            // A body that comes at a real speed takes longer than the time-out and is taken:
            // 60 KB in 8 KB parts 0.35 s apart, 2.45 s in all (its deadline is 2 s and the 14.7 s
            // its bytes take at 4 KiB/s). The client paces on a thread of its own: a task's sleep
            // on the shared threads of a loaded test run can stretch past the time-out, and the
            // waiting is the client's.
            let template = #"{"body":"{\"a\":\"\#(String(repeating: "x", count: 15_000))\"}"}"#
            let body =
                #"{"installationId":"paced","platform":"apns","pushChannel":"aaaa","templates":{"#
                + (0..<4).map { #""t\#($0)":\#(template)"# }.joined(separator: ",") + "}}"
            let status = await withCheckedContinuation { continuation in
                Thread {
                    guard let connection = try? RawConnection(port: port) else { return continuation.resume(returning: "no connection") }
                    var head =
                        "PUT /myhub/installations/paced HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: \(body.utf8.count)\r\n"
                    for (name, value) in Self.listen { head += "\(name): \(value)\r\n" }
                    connection.send(head + "\r\n")
                    let bytes = Array(body.utf8)
                    for start in stride(from: 0, to: bytes.count, by: 8_192) {
                        if start > 0 { Thread.sleep(forTimeInterval: 0.35) }
                        connection.send(String(decoding: bytes[start..<min(start + 8_192, bytes.count)], as: UTF8.self))
                    }
                    continuation.resume(returning: connection.statusLine(timeout: .seconds(20)))
                }.start()
            }
            #expect(status == "HTTP/1.1 200 OK", "\(status)")
            #expect(try await store.installation(hub: "myhub", id: "paced")?.templates.count == 4)
        }
    }

    @Test("a password-guessing flood is turned away without bcrypt, and the hub API's requests still complete")
    func guessingFlood() async throws {
        var limits = LoginLimits()
        limits.failuresBeforeBackOff = 3
        limits.firstBackOff = 30
        try await Self.withUsers(["alice"], logins: limits) { port, store in
            let statuses = try await withThrowingTaskGroup(of: (String, String).self) { group in
                for index in 0..<60 {
                    group.addTask {
                        let credentials = Data("alice:guess-\(index)".utf8).base64EncodedString()
                        return (
                            "guess", try await Self.request(port: port, "POST", "/api/register", headers: ["Authorization": "Basic \(credentials)"])
                        )
                    }
                }
                // Registrations through the hub API (SAS, no bcrypt) during the flood.
                for index in 0..<10 {
                    group.addTask {
                        (
                            "hub",
                            try await Self.request(
                                port: port, "PUT", "/myhub/installations/ok-\(index)", headers: Self.listen, body: Self.installation(index))
                        )
                    }
                }
                var all: [(String, String)] = []
                for try await status in group { all.append(status) }
                return all
            }
            let hub = statuses.filter { $0.0 == "hub" }.map(\.1)
            let guesses = statuses.filter { $0.0 == "guess" }.map(\.1)
            #expect(hub.allSatisfy { $0 == "HTTP/1.1 200 OK" }, "\(hub)")
            #expect(
                guesses.filter { $0.contains("429") || $0.contains("503") }.count >= 40, "most guesses were turned away before bcrypt: \(guesses)")
            #expect(!guesses.contains { $0.contains("500") })
            let correct = Data("alice:alice-secret".utf8).base64EncodedString()
            let refused = try await Self.request(port: port, "POST", "/api/register", headers: ["Authorization": "Basic \(correct)"])
            #expect(
                refused.contains("429"),
                "this client waits out its back-off for alice: \(refused); guesses: \(Dictionary(grouping: guesses, by: { $0 }).mapValues(\.count))")
        }
    }

    @Test("guesses at one user spread over many addresses make new addresses wait for that user; one it logged in from, and other users, do not")
    func spreadGuesses() async throws {
        var limits = LoginLimits()
        limits.userFailuresBeforeBackOff = 3
        limits.firstBackOff = 3
        try await Self.withUsers(["alice", "bob"], logins: limits) { port, store in
            func login(_ credentials: String, from source: String) async throws -> String {
                let basic = Data(credentials.utf8).base64EncodedString()
                return try await Self.request(port: port, from: source, "POST", "/api/register", headers: ["Authorization": "Basic \(basic)"])
            }
            #expect(try await login("alice:alice-secret", from: "127.0.0.2") == "HTTP/1.1 200 OK")
            // One guess from each of five addresses: none has failed five times, the user has.
            var guesses: [String] = []
            for index in 10..<15 { guesses.append(try await login("alice:guess-\(index)", from: "127.0.0.\(index)")) }
            #expect(guesses.map { $0.contains("401") } == [true, true, true, false, false], "\(guesses)")
            #expect(guesses.suffix(2).allSatisfy { $0.contains("429") }, "\(guesses)")
            // The address alice logged in from still has its password checked.
            #expect(try await login("alice:guess-again", from: "127.0.0.2").contains("401"))
            #expect(try await login("bob:bob-secret", from: "127.0.0.12") == "HTTP/1.1 200 OK")
            // A name is what is looked up: SQLite read "alice\0x" as "alice" (and took her
            // password), while every guess at "alice\0…" was a new name to the back-offs.
            #expect(try await store.passwordHash(user: "alice\u{0}x") == nil)
            #expect(try await login("alice\u{0}x:alice-secret", from: "127.0.0.20").contains("401"))
            #expect(try await login("alice\u{0}y:guess", from: "127.0.0.21").contains("401"))

            // When the wait ends, one try takes the opening: guesses that come together while
            // it is checked wait again rather than all reaching bcrypt. (The familiar address's
            // guess made the name's wait 6 s.)
            try await Task.sleep(for: .seconds(6.3))
            let burst = try await withThrowingTaskGroup(of: String.self) { group in
                for index in 30..<38 { group.addTask { try await login("alice:burst-\(index)", from: "127.0.0.\(index)") } }
                var all: [String] = []
                for try await status in group { all.append(status) }
                return all
            }
            let checked = burst.filter { $0.contains("401") }.count
            #expect((1...2).contains(checked) && burst.filter { $0.contains("429") }.count == 8 - checked, "\(burst)")
        }
    }
}
