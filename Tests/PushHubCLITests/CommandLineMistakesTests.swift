import Foundation
import PushTestSupport
import Testing

/// Mistakes a newcomer makes at the command line, each caught with the flag or variable named.
@Suite("pushhub's command line catches mistakes", .timeLimit(.minutes(3)))
struct CommandLineMistakesTests {
    /// `pushhub ARGUMENTS` to its end, with `environment`, in a directory with no ./data.
    static func pushhub(_ arguments: [String], environment: [String: String] = [:]) async throws -> (status: Int32, output: String) {
        let quoted = ([pushhubExecutable.path] + arguments).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        return try await ProcessLaunch.output(
            ["bash", "-c", "cd \"$(mktemp -d)\" && exec " + quoted.joined(separator: " ") + " 2>&1"], environment: environment,
            removing: ["PUSHHUB_KAFKA", "PUSHHUB_CONFIG"])
    }

    /// A pushhub.yaml with one hub, `news`, and no PNS credentials.
    static func newsHub() throws -> URL {
        let config = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-\(UUID().uuidString).yaml")
        try """
        hubs:
          - name: news
            sasRules: [{name: Full, key: "\(String(repeating: "k", count: 44))", rights: [Listen, Send, Manage]}]
            credentials: {}
        """.write(to: config, atomically: true, encoding: .utf8)
        return config
    }

    @Test("--version names PushHub's version and librdkafka's")
    func version() async throws {
        let (status, output) = try await Self.pushhub(["--version"])
        #expect(status == 0)
        #expect(output.hasPrefix("pushhub 0."), "\(output)")
        #expect(output.contains("(librdkafka 2."), "\(output)")
    }

    @Test("send: an unknown hub, format or tag expression is refused, named by its flag, before Kafka is asked")
    func sendMistakes() async throws {
        let config = try Self.newsHub()
        let kafka = ["PUSHHUB_KAFKA": "127.0.0.1:1"]
        let body = ["--body", #"{"aps":{"alert":"hi"}}"#]
        let hub = try await Self.pushhub(["send", "--hub", "nohub", "--format", "apple", "--config", config.path] + body, environment: kafka)
        #expect(hub.status != 0)
        #expect(hub.output.contains("--hub: no hub named nohub in \(config.path) (it has news)"), "\(hub.output)")
        let format = try await Self.pushhub(["send", "--hub", "news", "--format", "apnz", "--config", config.path] + body, environment: kafka)
        #expect(format.status != 0)
        #expect(format.output.contains("--format must be apple (or apns)"), "\(format.output)")
        #expect(!format.output.contains("ServiceBusNotification"), "named as a flag, not as the hub API's header")
        let tags = try await Self.pushhub(
            ["send", "--hub", "news", "--format", "apns", "--tags", "a &&", "--config", config.path] + body, environment: kafka)
        #expect(tags.status != 0)
        #expect(tags.output.contains("--tags: \"a &&\""), "\(tags.output)")
    }

    @Test("a PUSHHUB_KAFKA nothing answers at is an error naming it, within seconds, for send, topics and dev")
    func staleKafka() async throws {
        let stale = ["PUSHHUB_KAFKA": "127.0.0.1:1"]
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-dev-\(UUID().uuidString)").path
        for arguments in [
            ["send", "--hub", "pushhub-dev", "--format", "apns", "--body", #"{"aps":{}}"#], ["topics", "list"],
            ["dev", "--port", "0", "--data-dir", data],
        ] {
            let started = ContinuousClock.now
            let (status, output) = try await Self.pushhub(arguments, environment: stale)
            #expect(status != 0, "\(arguments[0])")
            #expect(output.contains("Kafka at 127.0.0.1:1 (from PUSHHUB_KAFKA) did not answer within 5 s"), "\(arguments[0]): \(output)")
            #expect(!output.contains("librdkafka"), "\(arguments[0]): no librdkafka noise")
            // 5 s alone; more when the whole suite shares the two cores. Not librdkafka's minutes.
            #expect(ContinuousClock.now - started < .seconds(45), "\(arguments[0])")
        }
    }

    @Test("send --wait prints what the dispatcher did, and exits 1 with the reason when it rejected the send")
    func sendWaits() async throws {
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-dev-\(UUID().uuidString)")
        let stack = try await DevCommandTests.Stack.start(data: data)
        let kafka = String(try #require(await stack.process.line(startingWith: "PUSHHUB_KAFKA=")).dropFirst("PUSHHUB_KAFKA=".count))
        #expect(stack.process.output.contains { $0.hasPrefix("Kafka: embedded, in this process, at \(kafka)") })
        let environment = ["PUSHHUB_KAFKA": kafka, "PUSHHUB_LOG_LEVEL": "error"]
        let sent = try await Self.pushhub(
            ["send", "--hub", stack.hub, "--format", "apns", "--tags", "nobody", "--body", #"{"aps":{"alert":"hi"}}"#, "--wait"],
            environment: environment)
        #expect(sent.status == 0, "\(sent.output)")
        #expect(sent.output.contains("dispatched to 0 device(s)"), "\(sent.output)")
        // No pushhub.yaml where it runs: the hub is not checked there, and the dispatcher refuses it.
        let rejected = try await Self.pushhub(
            ["send", "--hub", "nohub", "--format", "apns", "--body", #"{"aps":{"alert":"hi"}}"#, "--wait"], environment: environment)
        #expect(rejected.status == 1, "\(rejected.output)")
        #expect(rejected.output.contains("the send was rejected: hub: no hub named nohub"), "\(rejected.output)")
        stack.process.signal(SIGTERM)
        #expect(await stack.process.exitStatus(within: .seconds(30)) == 0)
    }
}

extension CommandLineMistakesTests {
    @Test(
        "every subcommand's help ends with examples",
        arguments: [
            "dev", "kafka-dev", "topics", "topics create", "topics list", "send", "users", "users add", "token", "sim", "load", "bench",
            "bench kafka", "bench store", "bench dispatch", "bench worker", "bench pns-request",
        ])
    func examples(_ command: String) async throws {
        let (status, output) = try await Self.pushhub(command.split(separator: " ").map(String.init) + ["--help"])
        #expect(status == 0)
        let examples = try #require(output.range(of: "Examples:\n"), "\(command): \(output)")
        let lines = output[examples.upperBound...].split(separator: "\n").prefix { !$0.hasPrefix("USAGE") }
        #expect(
            lines.filter { $0.hasPrefix("  pushhub ") || $0.hasPrefix("  echo ") || $0.hasPrefix("  make ") || $0.hasPrefix("  curl ") }.count >= 2,
            "\(command): \(lines)")
    }
}

extension CommandLineMistakesTests {
    @Test("a worker given a PUSHHUB_KAFKA nothing answers at says so and exits, within seconds")
    func staleKafkaWorker() async throws {
        let config = try Self.newsHub()
        let worker = pushhubExecutable.deletingLastPathComponent().appendingPathComponent("pushhub-apns-worker").path
        let (status, output) = try await ProcessLaunch.output(
            ["bash", "-c", "exec '\(worker)' --config '\(config.path)' --ops-port 0 2>&1"], environment: ["PUSHHUB_KAFKA": "127.0.0.1:1"])
        #expect(status != 0)
        #expect(output.contains("Kafka at 127.0.0.1:1 (from PUSHHUB_KAFKA) did not answer within 5 s"), "\(output)")
    }

    @Test("an idle pushhub dev stops on SIGTERM without an error line")
    func quietStop() async throws {
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-dev-\(UUID().uuidString)").path
        let script = """
            '\(pushhubExecutable.path)' dev --port 0 --data-dir '\(data)' > '\(data).log' 2>&1 &
            for i in $(seq 120); do grep -q '^PUSHHUB_KAFKA=' '\(data).log' 2>/dev/null && break; sleep 0.5; done
            sleep 2; kill -TERM $!; wait $!; echo "exit $?"; cat '\(data).log'
            """
        let (_, output) = try await ProcessLaunch.output(["bash", "-c", script], removing: ["PUSHHUB_KAFKA", "PUSHHUB_LOG_LEVEL"])
        #expect(output.contains("exit 0"), "\(output.suffix(2000))")
        #expect(output.contains("PUSHHUB_KAFKA="), "it started: \(output.suffix(2000))")
        let errors = output.split(separator: "\n").filter { $0.contains(" error ") || $0.contains(" critical ") }
        #expect(errors.isEmpty, "\(errors.prefix(10))")
    }
}
