import Foundation
import PushIngress
import PushTestSupport
import Testing

@testable import PushHubCLI

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `pushhub dev` as a child process, driven through HTTP only.
@Suite("pushhub dev", .timeLimit(.minutes(3)))
struct DevCommandTests {
    static let bannerKeys = [
        "PUSHHUB_URL=", "PUSHHUB_HUB=", "PUSHHUB_CONNECTION_STRING=", "PUSHHUB_LISTEN_CONNECTION_STRING=", "PUSHHUB_DEMO_USER=", "PUSHHUB_KAFKA=",
    ]

    struct Stack {
        let process: ChildProcess
        let url: String
        let hub: String
        let full: ConnectionString
        /// `full` as the banner printed it.
        let connectionString: String
        let demo: String

        static func start(
            data: URL, extra: [String] = [], environment: [String: String] = ["PUSHHUB_LOG_LEVEL": "error"],
            error: SpawnedProcess.ErrorStream = .inherit
        )
            async throws -> Stack
        {
            let process = try ChildProcess(
                arguments: ["dev", "--port", "0", "--data-dir", data.path] + extra, environment: environment, error: error)
            func value(_ key: String) async throws -> String {
                String(try #require(await process.line(startingWith: key, timeout: .seconds(60))).dropFirst(key.count))
            }
            let connectionString = try await value("PUSHHUB_CONNECTION_STRING=")
            return Stack(
                process: process, url: try await value("PUSHHUB_URL="), hub: try await value("PUSHHUB_HUB="),
                full: try #require(ConnectionString(connectionString)), connectionString: connectionString,
                demo: try await value("PUSHHUB_DEMO_USER="))
        }

        func call(_ method: String, _ path: String, _ body: String? = nil, headers: [String: String] = [:], demoUser: Bool = false) async throws -> (
            Int, String, HTTPURLResponse?
        ) {
            let authorization = demoUser ? "Basic " + Data(demo.utf8).base64EncodedString() : full.token(for: "/\(hub)")
            return try await httpCall(method, url + path, body, authorization: authorization, contentType: "application/json", headers: headers)
        }

        /// A breaking-news template send to the `breaking` tag; returns the notification id.
        func sendBreakingNews() async throws -> String {
            let (status, body, response) = try await call(
                "POST", "/\(hub)/messages", #"{"message":"Breaking news"}"#,
                headers: ["ServiceBusNotification-Format": "template", "ServiceBusNotification-Tags": "breaking"])
            #expect(status == 201, "\(body)")
            return try #require(response?.value(forHTTPHeaderField: "TrackingId"))
        }

        func waitCompleted(_ id: String, timeout: Duration = .seconds(60)) async throws -> String {
            try await detailsOnceIn("Completed", timeout: timeout) { try await call("GET", "/\(hub)/messages/\(id)").1 }
        }
    }

    static func register(_ stack: Stack) async throws {
        // The tutorial's client: a registration id for the demo user, then its device with a template.
        let (_, id, _) = try await stack.call("POST", "/api/register?handle=\(String(repeating: "ef", count: 32))", demoUser: true)
        let registrationId = try JSONDecoder().decode(String.self, from: Data(id.utf8))
        let device = #"{"Platform":"apns","Handle":"\#(String(repeating: "ef", count: 32))","Tags":["breaking"]}"#
        #expect(try await stack.call("PUT", "/api/register/\(registrationId)", device, demoUser: true).0 == 200)
        let installation =
            #"{"installationId":"tablet","platform":"fcmv1","pushChannel":"fcm-tablet","tags":["breaking"],"templates":{"news":{"body":"{\"message\":{\"notification\":{\"title\":\"$(message)\"}}}"}}}"#
        #expect(try await stack.call("PUT", "/\(stack.hub)/installations/tablet", installation).0 == 200)
        let phone =
            #"{"installationId":"phone","platform":"apns","pushChannel":"\#(String(repeating: "ab", count: 32))","tags":["breaking"],"templates":{"news":{"body":"{\"aps\":{\"alert\":\"$(message)\"}}"}}}"#
        #expect(try await stack.call("PUT", "/\(stack.hub)/installations/phone", phone).0 == 200)
    }

    @Test("the banner, a tutorial registration, a template send reaching Completed, a send to the demo user, and a clean stop")
    func wholeStack() async throws {
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-dev-\(UUID().uuidString)")
        let stack = try await Stack.start(data: data)
        try await Self.register(stack)
        let id = try await stack.sendBreakingNews()
        let details = try await stack.waitCompleted(id)
        #expect(details.contains("<State>Completed</State>"), "\(details)")
        #expect(details.contains("<ApnsOutcomeCounts><Outcome><Name>Success</Name><Count>1</Count>"), "\(details)")
        #expect(details.contains("<FcmV1OutcomeCounts><Outcome><Name>Success</Name><Count>1</Count>"), "\(details)")
        let (status, body, _) = try await stack.call("POST", "/api/notifications?pns=apns&to_tag=demo", #""hello demo""#, demoUser: true)
        #expect(status == 200, "\(body)")

        stack.process.signal(SIGTERM)
        #expect(await stack.process.exitStatus(within: .seconds(30)) == 0)
        for key in Self.bannerKeys {
            #expect(stack.process.output.filter { $0.hasPrefix(key) }.count == 1, "\(key) once")
        }
    }

    @Test("SIGTERM in the middle of a broadcast stops within the grace period; after a restart the broadcast completes")
    func stopWithBacklog() async throws {
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-dev-\(UUID().uuidString)")
        let first = try await Stack.start(data: data)
        var environment = ["PUSHHUB_LOG_LEVEL": "error"]
        for key in ["PUSHHUB_URL=", "PUSHHUB_HUB=", "PUSHHUB_CONNECTION_STRING=", "PUSHHUB_SIM_URL=", "PUSHHUB_KAFKA="] {
            environment[String(key.dropLast())] = String(try #require(await first.process.line(startingWith: key)).dropFirst(key.count))
        }
        let register = try await ProcessLaunch.output(
            [
                pushhubExecutable.path, "load", "register", "--devices", "3000", "--quiet", "--json", data.path + "/r.json", "--html",
                data.path + "/r.html",
            ],
            environment: environment)
        #expect(register.status == 0, "\(register.output)")
        let (status, body, response) = try await first.call(
            "POST", "/\(first.hub)/messages", #"{"message":"to everyone"}"#, headers: ["ServiceBusNotification-Format": "template"])
        #expect(status == 201, "\(body)")
        let id = try #require(response?.value(forHTTPHeaderField: "TrackingId"))
        // The debug build's workers deliver about a thousand a second: most of it is still to go.
        try await Task.sleep(for: .milliseconds(500))
        let stopping = ContinuousClock.now
        first.process.signal(SIGTERM)
        #expect(await first.process.exitStatus(within: .seconds(30)) == 0)
        #expect(ContinuousClock.now - stopping < .seconds(30), "stopped within the grace period")

        let second = try await Stack.start(data: data)
        let details = try await second.waitCompleted(id, timeout: .seconds(120))
        #expect(details.contains("<State>Completed</State>"), "\(details)")
        second.process.signal(SIGTERM)
        #expect(await second.process.exitStatus(within: .seconds(30)) == 0)
    }

    @Test("a send accepted before SIGTERM is delivered after a restart (Kafka in pushhub kafka-dev)")
    func nothingLostAcrossRestart() async throws {
        let kafkaDev = try ChildProcess(arguments: ["kafka-dev", "--brokers", "1", "--partitions", "2"], environment: ["PUSHHUB_LOG_LEVEL": "error"])
        let servers = String(try #require(await kafkaDev.line(startingWith: "PUSHHUB_KAFKA=")).dropFirst("PUSHHUB_KAFKA=".count))
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-dev-\(UUID().uuidString)")
        let first = try await Stack.start(data: data, extra: ["--kafka", servers])
        try await Self.register(first)
        let id = try await first.sendBreakingNews()
        first.process.signal(SIGTERM)
        #expect(await first.process.exitStatus(within: .seconds(30)) == 0)

        let second = try await Stack.start(data: data, extra: ["--kafka", servers])
        let details = try await second.waitCompleted(id)
        #expect(details.contains("<State>Completed</State>"), "\(details)")
        second.process.signal(SIGTERM)
        #expect(await second.process.exitStatus(within: .seconds(30)) == 0)
        kafkaDev.signal(SIGTERM)
        #expect(await kafkaDev.exitStatus(within: .seconds(15)) == 0)
    }

    /// In process, the test's own environment is read: a PUSHHUB_KAFKA there would take the
    /// place of the embedded cluster (the child processes above run without it).
    @Test(
        "a start that fails once the simulators listen stops them, in process, and does not leave them running",
        .enabled(if: (ProcessInfo.processInfo.environment["PUSHHUB_KAFKA"] ?? "").isEmpty, "PUSHHUB_KAFKA is set"))
    func failedStartStopsSimulators() async throws {
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-dev-\(UUID().uuidString)")
        // The demo user's password cannot be kept: a directory stands where its file goes.
        try FileManager.default.createDirectory(at: data.appendingPathComponent("demo-user.secret"), withIntermediateDirectories: true)
        let command = try DevCommand.parse(["--port", "0", "--data-dir", data.path, "--partitions", "1"])
        let failure = await #expect(throws: (any Error).self) { try await command.run() }
        #expect("\(failure.map { "\($0)" } ?? "")".contains("demo-user.secret"), "it failed where the test made it fail")
        // The simulators' listeners, as the failed start pointed the hub at them.
        let config = try String(contentsOf: data.appendingPathComponent("pushhub.yaml"), encoding: .utf8)
        let ports = Set(config.matches(of: /127\.0\.0\.1:(\d+)/).compactMap { Int($0.1) })
        #expect(ports.count == 2, "\(config)")
        for port in ports { #expect(!Self.accepts(port: port), "the simulator at port \(port) still listens") }
    }

    /// Whether something accepts a TCP connection at 127.0.0.1:`port`.
    static func accepts(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}
