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
        let common = ["--config", data.appendingPathComponent("pushhub.yaml").path, "--database", data.appendingPathComponent("pushhub.sqlite").path, "--kafka", servers]
        let environment = ["PUSHHUB_LOG_LEVEL": "error"]
        let ingress = try ChildProcess(Self.directory.appendingPathComponent("pushhub-ingress"), arguments: ["--port", "0"] + common, environment: environment)
        let url = String(try #require(await ingress.line(startingWith: "PUSHHUB_URL=")).dropFirst("PUSHHUB_URL=".count))
        let hub = String(try #require(await ingress.line(startingWith: "PUSHHUB_HUB=")).dropFirst("PUSHHUB_HUB=".count))
        let fullLine = try #require(await ingress.line(startingWith: "DefaultFullSharedAccessSignature: "))
        let full = try #require(ConnectionString(String(fullLine.dropFirst("DefaultFullSharedAccessSignature: ".count))))
        let dispatcher = try ChildProcess(Self.directory.appendingPathComponent("pushhub-dispatcher"), arguments: common, environment: environment)
        let dispatcherOps = String(try #require(await dispatcher.line(startingWith: "PUSHHUB_OPS_URL=")).dropFirst("PUSHHUB_OPS_URL=".count))
        // The simulators, attached to the hub (credentials and endpoints written into pushhub.yaml), then the APNs worker.
        let sim = try ChildProcess(
            arguments: ["sim", "--config", common[1], "--attach", hub, "--data-dir", data.appendingPathComponent("sim").path], environment: environment)
        let ca = String(try #require(await sim.line(startingWith: "PUSHHUB_PNS_CA=")).dropFirst("PUSHHUB_PNS_CA=".count))
        let simURL = String(try #require(await sim.line(startingWith: "PUSHHUB_SIM_URL=")).dropFirst("PUSHHUB_SIM_URL=".count))
        let worker = try ChildProcess(
            Self.directory.appendingPathComponent("pushhub-apns-worker"), arguments: ["--config", common[1], "--kafka", servers, "--trust-ca", ca],
            environment: environment)
        let workerOps = String(try #require(await worker.line(startingWith: "PUSHHUB_OPS_URL=")).dropFirst("PUSHHUB_OPS_URL=".count))

        func call(_ method: String, _ path: String, _ body: String? = nil, _ headers: [String: String] = [:]) async throws -> (Int, String, HTTPURLResponse?) {
            var request = URLRequest(url: URL(string: url + path)!)
            request.httpMethod = method
            request.setValue(full.token(for: "/\(hub)"), forHTTPHeaderField: "Authorization")
            for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
            request.httpBody = body.map { Data($0.utf8) }
            let (data, response) = try await URLSession.shared.data(for: request)
            let http = response as? HTTPURLResponse
            return (http?.statusCode ?? 0, String(decoding: data, as: UTF8.self), http)
        }
        let (putStatus, _, _) = try await call(
            "PUT", "/\(hub)/installations/phone-1", #"{"installationId":"phone-1","platform":"apns","pushChannel":"a1b2c3d4a1b2c3d4a1b2c3d4a1b2c3d4a1b2c3d4a1b2c3d4a1b2c3d4a1b2c3d4"}"#, ["Content-Type": "application/json"])
        #expect(putStatus == 200)
        let (sendStatus, _, sendResponse) = try await call(
            "POST", "/\(hub)/messages", #"{"aps":{"alert":"hello"}}"#,
            ["Content-Type": "application/json", "ServiceBusNotification-Format": "apple", "ServiceBusNotification-Tags": "$InstallationId:{phone-1}"])
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
        let (simData, _) = try await URLSession.shared.data(from: URL(string: "\(simURL)/sim/deliveries?handle=a1b2c3d4a1b2c3d4a1b2c3d4a1b2c3d4a1b2c3d4a1b2c3d4a1b2c3d4a1b2c3d4")!)
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
        #expect(try await get("\(dispatcherOps)/metrics").1.contains(#"pushhub_targets_dispatched_total{platform="apns"} 1"#))
        let ingressMetrics = try await get("\(url)/metrics").1
        #expect(ingressMetrics.contains(#"pushhub_http_requests_total{method="POST",route="/{hub}/messages",status="201"} 1"#), "\(ingressMetrics)")
        #expect(ingressMetrics.contains("pushhub_kafka_records_produced_total{topic=\"pushhub.requests\"} 1"))

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
