import Foundation
import Logging
import PushIngress
import PushKafka
import PushModel
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("kafka-dev + pushhub-ingress + pushhub-dispatcher as processes", .timeLimit(.minutes(2)))
struct PipelineProcessTests {
    let logger = Logger(label: "pushhub.tests") { _ in SwiftLogNoOpLogHandler() }
    static let directory = pushhubExecutable.deletingLastPathComponent()

    @Test("an installation, a send over HTTP, a worker's results, and Completed over HTTP; all stop on SIGTERM")
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

        // The test is the APNs worker: every target delivered.
        var configuration = KafkaConsumerConfiguration(bootstrapServers: servers.split(separator: ",").map(String.init), groupID: "apns-worker")
        configuration.sessionTimeout = .seconds(3)
        let deliveries = try KafkaConsumer.make(configuration: configuration, topics: ["pushhub.deliveries.apns"], logger: logger)
        let producer = try KafkaProducer.make(configuration: KafkaProducerConfiguration(bootstrapServers: configuration.bootstrapServers), logger: logger)
        let worker = Task {
            for await record in deliveries.records {
                guard let batch = try? WireCoding.decode(DeliveryBatch.self, from: record.value) else { continue }
                let results = ResultBatch(notificationId: batch.notificationId, hub: batch.hub, platform: .apns, results: batch.targets.map {
                    DeliveryResult(registrationId: $0.registrationId, handle: $0.handle, outcome: .delivered, pnsStatus: 200, attempts: 1, dwellMs: 2)
                })
                _ = await producer.sendAll([KafkaOutgoingRecord(topic: "pushhub.results", key: batch.notificationId, value: try! WireCoding.encode(results))])
                deliveries.markDone(record)
            }
        }
        defer { worker.cancel() }

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
            "PUT", "/\(hub)/installations/phone-1", #"{"installationId":"phone-1","platform":"apns","pushChannel":"a1b2c3"}"#, ["Content-Type": "application/json"])
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

        // PushHub's processes stop first (they commit and flush to Kafka), Kafka last.
        dispatcher.signal(SIGTERM)
        ingress.signal(SIGTERM)
        #expect(await dispatcher.exitStatus(within: .seconds(20)) == 0)
        #expect(await ingress.exitStatus(within: .seconds(20)) == 0)
        kafkaDev.signal(SIGTERM)
        #expect(await kafkaDev.exitStatus(within: .seconds(15)) == 0)
    }
}
