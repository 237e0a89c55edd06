import Foundation
import Logging
import PushIngress
import PushKafka
import PushModel
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite("kafka-dev + pushhub-ingress + pushhub-dispatcher + pushhub sim + pushhub-apns-worker as processes", .timeLimit(.minutes(2)))
struct PipelineProcessTests {
    let logger = Logger(label: "pushhub.tests") { _ in SwiftLogNoOpLogHandler() }
    static let directory = pushhubExecutable.deletingLastPathComponent()

    @Test("an installation, a send over HTTP, the APNs worker delivering to pushhub sim, and Completed over HTTP; all stop on SIGTERM")
    func pipeline() async throws {
        let kafkaDev = try ChildProcess(arguments: ["kafka-dev", "--brokers", "1", "--partitions", "2"], environment: ["PUSHHUB_LOG_LEVEL": "error"])
        let servers = String(try #require(await kafkaDev.line(startingWith: "PUSHHUB_KAFKA=")).dropFirst("PUSHHUB_KAFKA=".count))
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-pipeline-\(UUID().uuidString)")
        let common = [
            "--config", data.appendingPathComponent("pushhub.yaml").path, "--database", data.appendingPathComponent("pushhub.sqlite").path, "--kafka",
            servers,
        ]
        let environment = ["PUSHHUB_LOG_LEVEL": "error"]
        let ingress = try ChildProcess(
            Self.directory.appendingPathComponent("pushhub-ingress"), arguments: ["--port", "0"] + common, environment: environment)
        let url = String(try #require(await ingress.line(startingWith: "PUSHHUB_URL=")).dropFirst("PUSHHUB_URL=".count))
        let hub = String(try #require(await ingress.line(startingWith: "PUSHHUB_HUB=")).dropFirst("PUSHHUB_HUB=".count))
        let fullLine = try #require(await ingress.line(startingWith: "DefaultFullSharedAccessSignature: "))
        let full = try #require(ConnectionString(String(fullLine.dropFirst("DefaultFullSharedAccessSignature: ".count))))
        let dispatcher = try ChildProcess(Self.directory.appendingPathComponent("pushhub-dispatcher"), arguments: common, environment: environment)
        let dispatcherOps = String(try #require(await dispatcher.line(startingWith: "PUSHHUB_OPS_URL=")).dropFirst("PUSHHUB_OPS_URL=".count))
        // The simulators, attached to the hub (credentials and endpoints written into pushhub.yaml), then the APNs worker.
        let sim = try ChildProcess(
            arguments: ["sim", "--config", common[1], "--attach", hub, "--data-dir", data.appendingPathComponent("sim").path],
            environment: environment)
        let ca = String(try #require(await sim.line(startingWith: "PUSHHUB_PNS_CA=")).dropFirst("PUSHHUB_PNS_CA=".count))
        let simURL = String(try #require(await sim.line(startingWith: "PUSHHUB_SIM_URL=")).dropFirst("PUSHHUB_SIM_URL=".count))
        let worker = try ChildProcess(
            Self.directory.appendingPathComponent("pushhub-apns-worker"), arguments: ["--config", common[1], "--kafka", servers, "--trust-ca", ca],
            environment: environment)
        let workerOps = String(try #require(await worker.line(startingWith: "PUSHHUB_OPS_URL=")).dropFirst("PUSHHUB_OPS_URL=".count))

        func call(_ method: String, _ path: String, _ body: String? = nil, _ headers: [String: String] = [:]) async throws -> (
            Int, String, HTTPURLResponse?
        ) {
            try await httpCall(method, url + path, body, authorization: full.token(for: "/\(hub)"), headers: headers)
        }
        let (putStatus, _, _) = try await call(
            "PUT", "/\(hub)/installations/phone-1",
            #"{"installationId":"phone-1","platform":"apns","pushChannel":"a1b2c3d4a1b2c3d4a1b2c3d4a1b2c3d4a1b2c3d4a1b2c3d4a1b2c3d4a1b2c3d4"}"#,
            ["Content-Type": "application/json"])
        #expect(putStatus == 200)
        let (sendStatus, _, sendResponse) = try await call(
            "POST", "/\(hub)/messages", #"{"aps":{"alert":"hello"}}"#,
            [
                "Content-Type": "application/json", "ServiceBusNotification-Format": "apple",
                "ServiceBusNotification-Tags": "$InstallationId:{phone-1}",
            ])
        #expect(sendStatus == 201)
        let id = try #require(sendResponse?.value(forHTTPHeaderField: "TrackingId"))

        var details = ""
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline, !details.contains("<State>Completed</State>") {
            details = try await call("GET", "/\(hub)/messages/\(id)").1
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(details.contains("<State>Completed</State>"), "\(details)")
        #expect(details.contains("<Name>Success</Name><Count>1</Count>"))
        let (simData, _) = try await URLSession.shared.data(
            from: URL(string: "\(simURL)/sim/deliveries?handle=a1b2c3d4a1b2c3d4a1b2c3d4a1b2c3d4a1b2c3d4a1b2c3d4a1b2c3d4a1b2c3d4")!)
        #expect(String(decoding: simData, as: UTF8.self).contains(#"{\"aps\":{\"alert\":\"hello\"}}"#), "the simulator got the push")

        // Every process reports: ready (Kafka and the store answer) and its metrics.
        func get(_ address: String) async throws -> (Int, String) {
            let (data, response) = try await URLSession.shared.data(from: URL(string: address)!)
            return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
        }
        for base in [url, dispatcherOps, workerOps] {
            let (status, body) = try await get("\(base)/health/ready")
            #expect(status == 200, "\(base): \(body)")
        }
        #expect(try await get("\(workerOps)/metrics").1.contains(#"pushhub_deliveries_total{outcome="delivered",platform="apns"} 1"#))
        #expect(try await get("\(workerOps)/metrics").1.contains("pushhub_pns_request_duration_seconds_count{platform=\"apns\"} 1"))
        // A send to one installation is resolved by the ingress as it is accepted: its batch
        // goes straight to the APNs topic, and the dispatcher sees nothing of it.
        let ingressMetrics = try await get("\(url)/metrics").1
        #expect(ingressMetrics.contains(#"pushhub_targets_dispatched_total{platform="apns"} 1"#), "\(ingressMetrics)")
        #expect(ingressMetrics.contains(#"pushhub_http_requests_total{method="POST",route="/{hub}/messages",status="201"} 1"#), "\(ingressMetrics)")
        #expect(ingressMetrics.contains("pushhub_kafka_records_produced_total{topic=\"pushhub.deliveries.apns\"} 1"), "\(ingressMetrics)")
        #expect(!ingressMetrics.contains("pushhub_kafka_records_produced_total{topic=\"pushhub.requests\"}"))
        #expect(!(try await get("\(dispatcherOps)/metrics").1.contains("pushhub_targets_dispatched_total")))

        // PushHub's processes stop first (they commit and flush to Kafka), Kafka last.
        for process in [worker, dispatcher, ingress, sim] { process.signal(SIGTERM) }
        #expect(await worker.exitStatus(within: .seconds(20)) == 0)
        #expect(await dispatcher.exitStatus(within: .seconds(20)) == 0)
        #expect(await ingress.exitStatus(within: .seconds(20)) == 0)
        #expect(await sim.exitStatus(within: .seconds(20)) == 0)
        kafkaDev.signal(SIGTERM)
        #expect(await kafkaDev.exitStatus(within: .seconds(15)) == 0)
    }
}

/// The multi-process stack losing its Kafka: `pushhub kafka-dev` killed with SIGKILL and a new
/// one started. librdkafka's embedded brokers take new ports, so PushHub's processes are
/// started again pointed at the new cluster, as an orchestrator would.
@Suite("kafka-dev lost under the multi-process stack", .serialized, .timeLimit(.minutes(4)))
struct KafkaLossProcessTests {
    static let directory = pushhubExecutable.deletingLastPathComponent()
    static let environment = ["PUSHHUB_LOG_LEVEL": "error"]

    /// The processes around one kafka-dev; the simulator outlives them.
    final class Stack: @unchecked Sendable {
        // @unchecked: used by one test task at a time.
        let data: URL
        let config: String
        var kafkaDev: ChildProcess
        var servers: String
        var processes: [ChildProcess] = []
        var url = ""
        var hub = ""
        var full: ConnectionString?
        var ca = ""
        var simURL = ""

        init(recovery: String) async throws {
            data = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-kafka-loss-\(UUID().uuidString)")
            config = data.appendingPathComponent("pushhub.yaml").path
            (kafkaDev, servers) = try await Self.startKafka()
            // A first ingress writes the development hub; `recovery` is added to it before the
            // ingress that accepts sends starts.
            let first = try ChildProcess(
                directory.appendingPathComponent("pushhub-ingress"), arguments: ["--port", "0"] + common, environment: environment)
            hub = String(try #require(await first.line(startingWith: "PUSHHUB_HUB=")).dropFirst("PUSHHUB_HUB=".count))
            let fullLine = try #require(await first.line(startingWith: "DefaultFullSharedAccessSignature: "))
            full = ConnectionString(String(fullLine.dropFirst("DefaultFullSharedAccessSignature: ".count)))
            first.signal(SIGTERM)
            #expect(await first.exitStatus(within: .seconds(20)) == 0)
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: config))
            handle.seekToEndOfFile()
            handle.write(Data(("\n" + recovery + "\n").utf8))
            try handle.close()
            let sim = try ChildProcess(
                arguments: ["sim", "--config", config, "--attach", hub, "--data-dir", data.appendingPathComponent("sim").path],
                environment: environment)
            ca = String(try #require(await sim.line(startingWith: "PUSHHUB_PNS_CA=")).dropFirst("PUSHHUB_PNS_CA=".count))
            simURL = String(try #require(await sim.line(startingWith: "PUSHHUB_SIM_URL=")).dropFirst("PUSHHUB_SIM_URL=".count))
            processes = [sim]
        }

        var common: [String] { ["--config", config, "--database", data.appendingPathComponent("pushhub.sqlite").path, "--kafka", servers] }

        static func startKafka() async throws -> (ChildProcess, String) {
            let kafkaDev = try ChildProcess(arguments: ["kafka-dev", "--brokers", "1", "--partitions", "2"], environment: environment)
            return (kafkaDev, String(try #require(await kafkaDev.line(startingWith: "PUSHHUB_KAFKA=")).dropFirst("PUSHHUB_KAFKA=".count)))
        }

        /// Starts the ingress and, unless told not to, the dispatcher and the APNs worker.
        func startPushHub(pipeline: Bool = true) async throws {
            let ingress = try ChildProcess(
                KafkaLossProcessTests.directory.appendingPathComponent("pushhub-ingress"), arguments: ["--port", "0"] + common,
                environment: environment)
            url = String(try #require(await ingress.line(startingWith: "PUSHHUB_URL=")).dropFirst("PUSHHUB_URL=".count))
            processes.append(ingress)
            guard pipeline else { return }
            let dispatcher = try ChildProcess(
                KafkaLossProcessTests.directory.appendingPathComponent("pushhub-dispatcher"), arguments: common, environment: environment)
            _ = await dispatcher.line(startingWith: "PUSHHUB_OPS_URL=")
            let worker = try ChildProcess(
                KafkaLossProcessTests.directory.appendingPathComponent("pushhub-apns-worker"),
                arguments: ["--config", config, "--kafka", servers, "--trust-ca", ca],
                environment: environment)
            _ = await worker.line(startingWith: "PUSHHUB_OPS_URL=")
            processes += [dispatcher, worker]
        }

        /// SIGKILL of kafka-dev, a new one, and PushHub's processes started again against it.
        /// PushHub's processes go first, so none of them acts on the loss before its successor.
        func loseKafka(pipeline: Bool = true) async throws {
            let sim = processes[0]
            for process in processes.dropFirst() {
                process.signal(SIGKILL)
                _ = await process.exitStatus(within: .seconds(10))
            }
            kafkaDev.signal(SIGKILL)
            _ = await kafkaDev.exitStatus(within: .seconds(10))
            processes = [sim]
            (kafkaDev, servers) = try await Self.startKafka()
            try await startPushHub(pipeline: pipeline)
        }

        func call(_ method: String, _ path: String, _ body: String? = nil, _ headers: [String: String] = [:]) async throws -> (
            Int, String, HTTPURLResponse?
        ) {
            let authorization = full!.token(for: "/\(hub)")
            return try await httpCall(method, url + path, body, authorization: authorization, contentType: "application/json", headers: headers)
        }

        /// An APNs send to every device; its id once answered 201.
        func broadcast() async throws -> String {
            let (status, body, response) = try await call(
                "POST", "/\(hub)/messages", #"{"aps":{"alert":"through the outage"}}"#, ["ServiceBusNotification-Format": "apple"])
            try #require(status == 201, "\(body)")
            return try #require(response?.value(forHTTPHeaderField: "TrackingId"))
        }

        func waitFor(_ state: String, _ id: String, timeout: Duration = .seconds(60)) async throws -> String {
            try await detailsOnceIn(state, timeout: timeout) { try await call("GET", "/\(hub)/messages/\(id)").1 }
        }

        func stop() async {
            for process in processes.reversed() {
                process.signal(SIGTERM)
                _ = await process.exitStatus(within: .seconds(20))
            }
            kafkaDev.signal(SIGTERM)
            _ = await kafkaDev.exitStatus(within: .seconds(10))
            try? FileManager.default.removeItem(at: data)
        }
    }

    @Test("recovery: republish: a broadcast accepted just before kafka-dev died ends Completed on the new cluster, one success per device")
    func republishedAfterKafkaLoss() async throws {
        let stack = try await Stack(recovery: "recovery:\n  mode: republish\n  checkEvery: 200ms\n  grace: 2s")
        // No dispatcher reads the request before Kafka is lost: only the store's copy is left.
        try await stack.startPushHub(pipeline: false)
        for index in 0..<50 {
            let token = String(format: "%064x", index + 1)
            let (status, body, _) = try await stack.call(
                "PUT", "/\(stack.hub)/installations/phone-\(index)",
                #"{"installationId":"phone-\#(index)","platform":"apns","pushChannel":"\#(token)"}"#)
            try #require(status == 200, "\(body)")
        }
        let id = try await stack.broadcast()
        try await stack.loseKafka()
        let details = try await stack.waitFor("Completed", id)
        #expect(details.contains("<State>Completed</State>"), "\(details)")
        #expect(CrashRecoveryTests.counts(details) == ["Success": 50], "\(details)")
        let metrics = String(decoding: try await URLSession.shared.data(from: URL(string: "\(stack.url)/metrics")!).0, as: UTF8.self)
        // Published again at least once; with a grace this short, often twice (the new
        // dispatcher takes a while to join its group), and still counted once per device.
        let republished = metrics.split(separator: "\n").first { $0.hasPrefix("pushhub_sends_republished_total ") }.flatMap {
            Int($0.split(separator: " ")[1])
        }
        #expect((republished ?? 0) >= 1, "\(metrics)")
        await stack.stop()
    }

    @Test(
        "recovery off (Kafka's acknowledgement is the durability): a send whose records were lost ends Abandoned with its reason after abandonAfter")
    func abandonedAfterRecordsLost() async throws {
        let stack = try await Stack(recovery: "recovery:\n  mode: off\n  checkEvery: 200ms\n  grace: 1s\n  abandonAfter: 3s")
        // No dispatcher reads the request before its records are gone; one runs after.
        try await stack.startPushHub(pipeline: false)
        let (status, body, _) = try await stack.call(
            "PUT", "/\(stack.hub)/installations/phone",
            #"{"installationId":"phone","platform":"apns","pushChannel":"\#(String(repeating: "ab", count: 32))"}"#)
        try #require(status == 200, "\(body)")
        let id = try await stack.broadcast()
        let accepted = ContinuousClock.now
        try await stack.loseKafka(pipeline: true)
        let details = try await stack.waitFor("Abandoned", id, timeout: .seconds(30))
        let took = ContinuousClock.now - accepted
        #expect(details.contains("<State>Abandoned</State>"), "\(details)")
        #expect(details.contains("<Reason>no progress by the deadline: never dispatched"), "\(details)")
        #expect(details.contains("<EndTime>"), "\(details)")
        #expect(took >= .seconds(3) && took < .seconds(20), "abandoned after \(took): abandonAfter 3 s plus the grace of 1 s")
        let metrics = String(decoding: try await URLSession.shared.data(from: URL(string: "\(stack.url)/metrics")!).0, as: UTF8.self)
        #expect(metrics.contains("pushhub_sends_abandoned_total 1"), "\(metrics)")
        #expect(metrics.contains("pushhub_sends_republished_total 0"), "recovery is off")
        let (deliveries, _) = try await URLSession.shared.data(
            from: URL(string: "\(stack.simURL)/sim/deliveries?handle=\(String(repeating: "ab", count: 32))")!)
        #expect(String(decoding: deliveries, as: UTF8.self) == "[]", "the lost send never reached the device")
        await stack.stop()
    }
}
