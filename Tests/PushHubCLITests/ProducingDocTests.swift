import Foundation
import Logging
import PushKafka
import PushModel
import PushTestSupport
import Testing

/// The examples in docs/producing.md, run as written against `pushhub kafka-dev`: what they
/// produce must be a SendRequest PushHub accepts, keyed by its notification id.
@Suite("docs/producing.md examples", .timeLimit(.minutes(2)))
struct ProducingDocTests {
    static let root = repositoryRoot
    let logger = Logger(label: "pushhub.tests") { _ in SwiftLogNoOpLogHandler() }

    static func block(_ language: String) throws -> String {
        let text = try String(contentsOf: root.appendingPathComponent("docs/producing.md"), encoding: .utf8)
        let start = try #require(text.range(of: "```\(language)\n"))
        let end = try #require(text.range(of: "```", range: start.upperBound..<text.endIndex))
        return String(text[start.upperBound..<end.lowerBound])
    }

    @Test("the kcat and the Python examples produce SendRequests PushHub accepts")
    func examples() async throws {
        let kafkaDev = try ChildProcess(arguments: ["kafka-dev", "--brokers", "1", "--partitions", "1"], environment: ["PUSHHUB_LOG_LEVEL": "error"])
        defer { kafkaDev.signal(SIGTERM) }
        let servers = String(try #require(await kafkaDev.line(startingWith: "PUSHHUB_KAFKA=")).dropFirst("PUSHHUB_KAFKA=".count))
        let environment = ["PUSHHUB_KAFKA": servers]
        let kcat = try await ProcessLaunch.output(["bash", "-c", try Self.block("sh")], environment: environment)
        #expect(kcat.0 == 0, "\(kcat.1)")
        let python = try await ProcessLaunch.output(["python3", "-c", try Self.block("python")], environment: environment)
        #expect(python.0 == 0, "\(python.1)")

        var configuration = KafkaConsumerConfiguration(bootstrapServers: [servers], groupID: "doc-check")
        configuration.sessionTimeout = .seconds(3)
        let consumer = try KafkaConsumer.make(configuration: configuration, topics: ["pushhub.requests"], logger: logger)
        var requests: [(key: String?, request: SendRequest)] = []
        let deadline = ContinuousClock.now + .seconds(30)
        for await record in consumer.records {
            requests.append((record.keyString, try WireCoding.decode(SendRequest.self, from: record.value)))
            if requests.count == 2 || ContinuousClock.now > deadline { break }
        }
        await consumer.close()
        #expect(requests.count == 2)
        for (key, request) in requests {
            #expect(key == request.notificationId, "keyed by the notification id")
            #expect(request.hub == "pushhub-dev")
        }
        #expect(python.1.contains("accepted \(requests.map(\.request.notificationId).last ?? "?")"), "\(python.1)")
    }
}
