import Foundation
import PushIngress
import PushLoad
import PushModel
import PushTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `pushhub load` as a child process against `pushhub dev`, checked by its reports and by what
/// the simulators received.
@Suite("pushhub load", .timeLimit(.minutes(5)))
struct LoadCommandTests {
    struct Run {
        var status: Int32
        var output: String
        var report: [String: Any]
        var html: String
    }

    /// Runs `pushhub load` with the stack's banner values in its environment.
    static func load(_ arguments: [String], stack: DevCommandTests.Stack, kafka: String, simURL: String, in directory: URL) async throws -> Run {
        let json = directory.appendingPathComponent("report-\(UUID().uuidString).json")
        let html = directory.appendingPathComponent("report-\(UUID().uuidString).html")
        let environment = [
            "PUSHHUB_URL": stack.url, "PUSHHUB_HUB": stack.hub, "PUSHHUB_KAFKA": kafka, "PUSHHUB_SIM_URL": simURL,
            "PUSHHUB_CONNECTION_STRING":
                "Endpoint=sb://\(stack.full.endpoint.host!):\(stack.full.endpoint.port!)/;SharedAccessKeyName=\(stack.full.keyName);SharedAccessKey=\(stack.full.key)",
        ]
        let (status, output) = try await ProcessLaunch.output(
            [pushhubExecutable.path, "load"] + arguments + ["--json", json.path, "--html", html.path, "--quiet"], environment: environment)
        let report = (try? Data(contentsOf: json)).flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] } ?? [:]
        return Run(status: status, output: output, report: report, html: (try? String(contentsOf: html, encoding: .utf8)) ?? "")
    }

    static func simulatorDelivered(_ simURL: String) async throws -> Int {
        let (data, _) = try await URLSession.shared.data(from: URL(string: "\(simURL)/sim/stats")!)
        let stats = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        return Platform.allCases.reduce(0) { $0 + (((stats[$1.rawValue] as? [String: Any])?["delivered"] as? Int) ?? 0) }
    }

    static func simulatorStats(_ simURL: String) async throws -> [String: Any] {
        let (data, _) = try await URLSession.shared.data(from: URL(string: "\(simURL)/sim/stats")!)
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    static func int(_ report: [String: Any], _ path: String...) -> Int? {
        var value: Any? = report
        for key in path { value = (value as? [String: Any])?[key] }
        return value as? Int
    }

    @Test("register, send to users, broadcast, a mix over Kafka, and errors by kind, measured from the results topic")
    func scenarios() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-load-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let stack = try await DevCommandTests.Stack.start(data: directory.appendingPathComponent("data"))
        let kafka = String(try #require(await stack.process.line(startingWith: "PUSHHUB_KAFKA=")).dropFirst("PUSHHUB_KAFKA=".count))
        let simURL = String(try #require(await stack.process.line(startingWith: "PUSHHUB_SIM_URL=")).dropFirst("PUSHHUB_SIM_URL=".count))
        func load(_ arguments: [String]) async throws -> Run {
            try await Self.load(arguments, stack: stack, kafka: kafka, simURL: simURL, in: directory)
        }
        let population = ["--devices", "200", "--prefix", "lt"]

        // 200 installations through the hub API, each as the population says.
        let registered = try await load(["register"] + population)
        #expect(registered.status == 0, "\(registered.output)")
        #expect(Self.int(registered.report, "registrations", "succeeded") == 200)
        #expect(Self.int(registered.report, "registrations", "failed") == 0)
        #expect(Self.int(registered.report, "registerLatencyMs", "count") == 200)
        let expected = try LoadPopulation(devices: 200, prefix: "lt", simulatorURL: simURL).installation(7)
        let (status, body, _) = try await stack.call("GET", "/\(stack.hub)/installations/lt-7")
        #expect(status == 200)
        let stored = try WireCoding.makeDecoder().decode(Installation.self, from: Data(body.utf8))
        #expect(stored.platform == expected.platform && stored.pushChannel == expected.pushChannel && stored.userId == expected.userId)
        #expect(Set(stored.tags) == Set(expected.tags))

        // Native sends to single users at a rate: every send's one target delivered.
        var before = try await Self.simulatorDelivered(simURL)
        let sent = try await load(["send"] + population + ["--rate", "40", "--duration", "2", "--format", "native", "--audience", "user"])
        #expect(sent.status == 0, "\(sent.output)")
        #expect(Self.int(sent.report, "sends", "accepted") == 80)
        #expect(Self.int(sent.report, "results", "expected") == 80)
        #expect(Self.int(sent.report, "results", "byOutcome", "delivered") == 80)
        #expect(Self.int(sent.report, "acceptLatencyMs", "count") == 80)
        #expect(Self.int(sent.report, "endToEndLatencyMs", "count") == 80)
        #expect((sent.report["results"] as? [String: Any])?["complete"] as? Bool == true)
        #expect(try await Self.simulatorDelivered(simURL) - before == 80)
        #expect(sent.html.contains("<svg") && sent.html.contains("End-to-end latency") && sent.html.contains("<polyline"))
        #expect(sent.output.contains("end-to-end latency: p50"))
        let timeline = try #require(sent.report["timeline"] as? [[String: Any]])
        #expect(timeline.reduce(0) { $0 + ($1["accepted"] as? Int ?? 0) } == 80)

        // One template broadcast reaches every device on all four platforms.
        before = try await Self.simulatorDelivered(simURL)
        let broadcast = try await load(["broadcast"] + population)
        #expect(broadcast.status == 0, "\(broadcast.output)")
        #expect(Self.int(broadcast.report, "results", "expected") == 200)
        #expect(Self.int(broadcast.report, "results", "byOutcome", "delivered") == 200)
        #expect(try await Self.simulatorDelivered(simURL) - before == 200)
        #expect((broadcast.report["results"] as? [String: Any])?["outcomesRecordedSeconds"] is Double, "\(broadcast.output)")

        // A native broadcast reaches only the devices of its platform.
        let wns = (0..<200).count { PlatformMix.default.platform(of: $0) == .wns }
        let native = try await load(["broadcast"] + population + ["--format", "native", "--platform", "wns"])
        #expect(native.status == 0, "\(native.output)")
        #expect(Self.int(native.report, "results", "expected") == wns)
        #expect(Self.int(native.report, "results", "byOutcome", "delivered") == wns)

        // Sends produced straight into Kafka while devices re-register.
        let mixed = try await load(["mixed"] + population + ["--via", "kafka", "--rate", "20", "--duration", "2", "--register-rate", "10"])
        #expect(mixed.status == 0, "\(mixed.output)")
        #expect(Self.int(mixed.report, "sends", "accepted") == 40)
        #expect(Self.int(mixed.report, "registrations", "succeeded") == 20)
        #expect((mixed.report["results"] as? [String: Any])?["complete"] as? Bool == true)

        // Dead FCM handles: each failure counted under its kind, and the run still completes.
        var request = URLRequest(url: URL(string: "\(simURL)/sim/faults")!)
        request.httpMethod = "POST"
        request.httpBody = Data(#"{"deadHandles":["fcm-lt-*"],"throttleRate":0,"errorRate":0,"latencyMs":0,"retryAfterSeconds":1}"#.utf8)
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        _ = try await URLSession.shared.data(for: request)
        let fcm = (0..<200).count { PlatformMix.default.platform(of: $0) == .fcm }
        let dead = try await load(["broadcast"] + population)
        #expect(dead.status == 0, "\(dead.output)")
        let errors = try #require(dead.report["errors"] as? [String: Int])
        #expect(errors.count == 1)
        #expect(errors.first?.key.hasPrefix("outcome invalidHandle") == true)
        #expect(errors.first?.value == fcm)
        #expect(Self.int(dead.report, "results", "byOutcome", "delivered") == 200 - fcm)

        // Huawei, ADM, Xiaomi and Baidu devices in the shares: registered, and a broadcast reaches
        // them through their workers (and the 200 above, the dead FCM handles among them, again).
        let others = ["--devices", "100", "--prefix", "lo", "--platforms", "hms=25,adm=25,xiaomi=25,baidu=25"]
        let registeredOthers = try await load(["register"] + others)
        #expect(registeredOthers.status == 0, "\(registeredOthers.output)")
        #expect(Self.int(registeredOthers.report, "registrations", "succeeded") == 100)
        let statsBefore = try await Self.simulatorStats(simURL)
        let reachesAll = try await load(["broadcast"] + others)
        #expect(reachesAll.status == 0, "\(reachesAll.output)")
        #expect(Self.int(reachesAll.report, "results", "byOutcome", "delivered") == 300 - fcm, "\(reachesAll.output)")
        let statsAfter = try await Self.simulatorStats(simURL)
        for platform in ["hms", "adm", "xiaomi", "baidu"] {
            #expect((Self.int(statsAfter, platform, "delivered") ?? 0) - (Self.int(statsBefore, platform, "delivered") ?? 0) == 25, "\(platform)")
        }

        stack.process.signal(SIGTERM)
        #expect(await stack.process.exitStatus(within: .seconds(30)) == 0)
    }

    @Test("bad options are refused, naming the option, and non-loopback targets need --allow-remote")
    func refusals() async throws {
        let environment = [
            "PUSHHUB_CONNECTION_STRING": "Endpoint=sb://127.0.0.1:1/;SharedAccessKeyName=n;SharedAccessKey=k", "PUSHHUB_KAFKA": "127.0.0.1:1",
        ]
        let cases: [([String], String)] = [
            (["send", "--url", "http://10.1.2.3:8080"], "--url http://10.1.2.3:8080 is not on this machine"),
            (["send", "--kafka", "kafka.example.com:9092"], "--kafka kafka.example.com:9092 is not on this machine"),
            (["register", "--sim-url", "https://push.example.com"], "--sim-url https://push.example.com is not on this machine"),
            (["register", "--devices", "0"], "--devices must be 1 to"),
            (["send", "--rate", "0"], "--rate must be more than 0"),
            (["send", "--rate", "100000", "--duration", "3600"], "--rate × --duration must make"),
            (["send", "--duration", "7200"], "--duration must be more than 0 and at most 3600"),
            (["register", "--platforms", "apns=60,fcm=30"], "--platforms: the shares must add up to 100, not 90"),
            (["register", "--tags", "Sports=150"], "--tags: Sports=150 must be a percent"),
            (["register", "--via", "kafka"], "register takes --via http"),
            (["flood"], "the scenario must be register, send, broadcast or mixed, not flood"),
            (["send", "--audience", "everyone"], "--audience must be user, tag or broadcast"),
        ]
        for (arguments, message) in cases {
            let (status, output) = try await ProcessLaunch.output([pushhubExecutable.path, "load"] + arguments, environment: environment)
            #expect(status != 0, "\(arguments)")
            #expect(output.contains(message), "\(arguments): \(output)")
        }
        let (status, output) = try await ProcessLaunch.output(
            [pushhubExecutable.path, "load", "send"], environment: ["PUSHHUB_KAFKA": "127.0.0.1:1"], removing: ["PUSHHUB_CONNECTION_STRING"])
        #expect(status != 0 && output.contains("--connection-string or PUSHHUB_CONNECTION_STRING"), "\(output)")
    }

    @Test("a run is bounded by --timeout: it stops sending and says so")
    func timeout() async throws {
        // Nothing listens at port 1: every send fails fast, and the run must still end at its time-out.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-load-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let started = ContinuousClock.now
        let (status, output) = try await ProcessLaunch.output(
            [
                pushhubExecutable.path, "load", "register", "--devices", "1000000", "--register-rate", "50", "--timeout", "2", "--url",
                "http://127.0.0.1:1",
                "--json", directory.appendingPathComponent("r.json").path, "--html", directory.appendingPathComponent("r.html").path, "--quiet",
            ],
            environment: ["PUSHHUB_CONNECTION_STRING": "Endpoint=sb://127.0.0.1:1/;SharedAccessKeyName=n;SharedAccessKey=k"])
        #expect(ContinuousClock.now - started < .seconds(30))
        #expect(status == 1)
        #expect(output.contains("stopped at --timeout"), "\(output)")
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: directory.appendingPathComponent("r.json"))) as? [String: Any])
        #expect(report["timedOut"] as? Bool == true)
        let attempted = try #require(Self.int(report, "registrations", "attempted"))
        #expect(attempted > 0 && attempted <= 101, "at 50/s for 2 s: \(attempted)")
        #expect((report["errors"] as? [String: Int])?.keys.contains { $0.hasPrefix("transport:") } == true)
    }
}
