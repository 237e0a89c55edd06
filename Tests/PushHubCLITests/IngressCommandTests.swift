import Foundation
import NIOCore
import PushIngress
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite("pushhub-ingress and pushhub users", .timeLimit(.minutes(2)))
struct IngressCommandTests {
    static let ingressExecutable = pushhubExecutable.deletingLastPathComponent().appendingPathComponent("pushhub-ingress")

    @Test("a fresh start writes a dev hub, prints its connection strings, serves both APIs, and stops on SIGTERM")
    func freshStart() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-ingress-\(UUID().uuidString)")
        let config = directory.appendingPathComponent("pushhub.yaml").path
        let database = directory.appendingPathComponent("pushhub.sqlite").path

        let users = try ChildProcess(arguments: ["users", "add", "alice", "--database", database], environment: ["PUSHHUB_LOG_LEVEL": "error"])
        users.send("correct horse battery")
        #expect(await users.exitStatus(within: .seconds(30)) == 0)

        let ingress = try ChildProcess(
            Self.ingressExecutable, arguments: ["--port", "0", "--config", config, "--database", database],
            environment: ["PUSHHUB_LOG_LEVEL": "error"])
        let url = try #require(await ingress.line(startingWith: "PUSHHUB_URL=")).dropFirst("PUSHHUB_URL=".count)
        let full = try #require(await ingress.line(startingWith: "DefaultFullSharedAccessSignature: ")).dropFirst(
            "DefaultFullSharedAccessSignature: ".count)
        let hub = try #require(await ingress.line(startingWith: "PUSHHUB_HUB=")).dropFirst("PUSHHUB_HUB=".count)
        let attributes = try FileManager.default.attributesOfItem(atPath: config)
        #expect((attributes[.posixPermissions] as? Int) == 0o600, "the keys are readable by the owner only")

        // The hub API with a token made from the printed connection string.
        let connection = try #require(ConnectionString(String(full)))
        var put = URLRequest(url: URL(string: "\(url)/\(hub)/installations/cli-1?api-version=2015-01")!)
        put.httpMethod = "PUT"
        put.setValue("application/json", forHTTPHeaderField: "Content-Type")
        put.setValue(connection.token(for: "/\(hub)"), forHTTPHeaderField: "Authorization")
        put.httpBody = Data(#"{"installationId":"cli-1","platform":"apns","pushChannel":"abc"}"#.utf8)
        let (_, putResponse) = try await URLSession.shared.data(for: put)
        #expect((putResponse as? HTTPURLResponse)?.statusCode == 200)

        // The app-backend API with the user added above.
        var register = URLRequest(url: URL(string: "\(url)/api/register")!)
        register.httpMethod = "POST"
        register.setValue("Basic " + Data("alice:correct horse battery".utf8).base64EncodedString(), forHTTPHeaderField: "Authorization")
        let (body, registerResponse) = try await URLSession.shared.data(for: register)
        #expect((registerResponse as? HTTPURLResponse)?.statusCode == 200)
        #expect(try JSONDecoder().decode(String.self, from: body).count > 10)

        ingress.signal(SIGTERM)
        #expect(await ingress.exitStatus(within: .seconds(10)) == 0)

        // A second start reads the file it wrote and prints the development hub's keys again:
        // whoever lost the first start's output still finds them.
        let again = try ChildProcess(
            Self.ingressExecutable, arguments: ["--port", "0", "--config", config, "--database", database],
            environment: ["PUSHHUB_LOG_LEVEL": "error"])
        let fullAgain = await again.line(startingWith: "DefaultFullSharedAccessSignature: ")
        #expect(fullAgain?.hasSuffix(String(full.split(separator: ";").last ?? "")) == true, "the same key: \(fullAgain ?? "none")")
        again.signal(SIGTERM)
        #expect(await again.exitStatus(within: .seconds(10)) == 0)

        // A file of real hubs' keys is never printed.
        let own = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-\(UUID().uuidString).yaml").path
        try """
        hubs:
          - name: news
            sasRules: [{name: Full, key: "\(String(repeating: "k", count: 44))", rights: [Listen, Send, Manage]}]
            credentials: {}
        """.write(toFile: own, atomically: true, encoding: .utf8)
        let production = try ChildProcess(
            Self.ingressExecutable, arguments: ["--port", "0", "--config", own, "--database", database + "-own"],
            environment: ["PUSHHUB_LOG_LEVEL": "error"])
        #expect(await production.line(startingWith: "PUSHHUB_URL=") != nil)
        try await Task.sleep(for: .milliseconds(200))
        #expect(!production.output.contains { $0.contains("SharedAccessKey=") })
        production.signal(SIGTERM)
        #expect(await production.exitStatus(within: .seconds(10)) == 0)
    }

    @Test("--event-loops sets how many NIO event loops serve HTTP; half the cores by default; out of range is refused")
    func eventLoops() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-loops-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let config = directory.appendingPathComponent("pushhub.yaml").path
        let database = directory.appendingPathComponent("pushhub.sqlite").path
        // NIO's own variable stands without the option, and the option over it.
        let cases: [([String], [String: String], Int)] = [
            ([], [:], max(1, System.coreCount / 2)), (["--event-loops", "1"], [:], 1), (["--event-loops", "3"], [:], 3),
            ([], ["NIO_SINGLETON_GROUP_LOOP_COUNT": "2"], 2), (["--event-loops", "1"], ["NIO_SINGLETON_GROUP_LOOP_COUNT": "3"], 1),
        ]
        for (arguments, variables, expected) in cases {
            let ingress = try ChildProcess(
                Self.ingressExecutable, arguments: ["--port", "0", "--config", config, "--database", database] + arguments,
                environment: ["PUSHHUB_LOG_LEVEL": "error"].merging(variables) { _, new in new })
            let url = try #require(await ingress.line(startingWith: "PUSHHUB_URL=")).dropFirst("PUSHHUB_URL=".count)
            // It answers on them.
            let (_, response) = try await URLSession.shared.data(from: URL(string: "\(url)/health/live")!)
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            let threads = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(ingress.pid)/task").compactMap { task in
                try? String(contentsOfFile: "/proc/\(ingress.pid)/task/\(task)/comm", encoding: .utf8)
            }
            #expect(threads.filter { $0.hasPrefix("NIO-SGLTN") }.count == expected, "\(arguments) \(variables): \(threads.sorted())")
            ingress.signal(SIGTERM)
            #expect(await ingress.exitStatus(within: .seconds(10)) == 0)
        }
        for wrong in ["0", "257", "many"] {
            let refused = try ChildProcess(
                Self.ingressExecutable, arguments: ["--port", "0", "--config", config, "--database", database, "--event-loops", wrong],
                error: .merge)
            #expect(await refused.exitStatus(within: .seconds(30)) == 64)
            #expect(refused.output.contains { $0.contains("event-loops") }, "\(wrong): \(refused.output)")
        }
    }

    @Test("users add refuses a short password and a name that cannot be a tag")
    func usersAddRefuses() async throws {
        let database = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-\(UUID().uuidString).sqlite").path
        let short = try ChildProcess(arguments: ["users", "add", "bob", "--database", database])
        short.send("short")
        #expect(await short.exitStatus(within: .seconds(30)) == 1)
        let badName = try ChildProcess(arguments: ["users", "add", "bad name", "--database", database])
        #expect(await badName.exitStatus(within: .seconds(30)) == 64)
    }
}
