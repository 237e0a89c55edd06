import Foundation
import Logging
import PushKafka
import PushModel
import Testing

@Suite("pushhub kafka-dev and topics", .timeLimit(.minutes(2)))
struct KafkaDevCommandTests {
    let logger = Logger(label: "pushhub.tests") { _ in SwiftLogNoOpLogHandler() }

    @Test("kafka-dev serves PushHub's topics, takes fault commands, and stops cleanly on SIGTERM")
    func kafkaDevLifecycle() async throws {
        let kafkaDev = try ChildProcess(arguments: ["kafka-dev", "--brokers", "2", "--partitions", "3"])
        let banner = try #require(await kafkaDev.line(startingWith: "PUSHHUB_KAFKA="))
        let servers = String(banner.dropFirst("PUSHHUB_KAFKA=".count)).split(separator: ",").map(String.init)
        #expect(servers.count == 2)
        #expect(kafkaDev.output.filter { $0.hasPrefix("PUSHHUB_KAFKA=") }.count == 1, "the banner line comes once")

        // `pushhub topics list` sees the topics kafka-dev created.
        let list = try ChildProcess(
            arguments: ["topics", "list", "--kafka", servers.joined(separator: ",")], environment: ["PUSHHUB_LOG_LEVEL": "critical"])
        #expect(await list.exitStatus(within: .seconds(30)) == 0)
        for topic in ["pushhub.requests", "pushhub.deliveries.apns", "pushhub.deliveries.webpush", "pushhub.results", "pushhub.deadletter"] {
            #expect(list.output.contains { $0.hasPrefix("topic \(topic) partitions 3 replicas 2") }, "\(list.output)")
        }

        // A record produced to it is acknowledged and read back.
        let producer = try KafkaProducer.make(configuration: KafkaProducerConfiguration(bootstrapServers: servers), logger: logger)
        let report = try await producer.send(KafkaOutgoingRecord(topic: "pushhub.requests", key: "n1", value: Data("hello".utf8)))
        #expect(report.topic == "pushhub.requests")

        // Fault commands over standard input.
        let answered = kafkaDev.output.count
        kafkaDev.send("errors produce NOT_ENOUGH_REPLICAS,NOT_ENOUGH_REPLICAS")
        #expect(await kafkaDev.line(startingWith: "ok", after: answered) != nil)
        kafkaDev.send("broker down 9")
        #expect(await kafkaDev.line(startingWith: "error:", after: answered) != nil, "an unknown broker is refused")
        let retried = try await producer.send(KafkaOutgoingRecord(topic: "pushhub.requests", key: "n1", value: Data("again".utf8)))
        #expect(retried.offset == report.offset + 1, "retried through the injected errors, written once")

        kafkaDev.signal(SIGTERM)
        #expect(await kafkaDev.exitStatus(within: .seconds(10)) == 0)
        #expect(kafkaDev.output.last == "PushHub embedded Kafka stopped.")
    }

    @Test("topics create against a cluster that cannot create topics explains why")
    func topicsCreateExplains() async throws {
        let cluster = try EmbeddedKafkaCluster.start(brokers: 1, logger: logger)
        let create = try ChildProcess(
            arguments: ["topics", "create", "--kafka", cluster.bootstrapServers.joined(separator: ",")],
            environment: ["PUSHHUB_LOG_LEVEL": "critical"])
        #expect(await create.exitStatus(within: .seconds(60)) == 1)
    }

    @Test("commands that need Kafka say how to name it")
    func missingKafka() async throws {
        let list = try ChildProcess(arguments: ["topics", "list"], environment: ["PUSHHUB_KAFKA": ""])
        #expect(await list.exitStatus(within: .seconds(10)) == 64, "a usage error")
    }
}

@Suite("pushhub send", .timeLimit(.minutes(2)))
struct SendCommandTests {
    let logger = Logger(label: "pushhub.tests") { _ in SwiftLogNoOpLogHandler() }

    @Test("produces a checked SendRequest into pushhub.requests and prints its id; bad sends produce nothing")
    func send() async throws {
        let cluster = try EmbeddedKafkaCluster.start(brokers: 1, logger: logger)
        try cluster.createTopic("pushhub.requests", partitions: 1)
        let servers = cluster.bootstrapServers.joined(separator: ",")
        let refused = try ChildProcess(arguments: [
            "send", "--kafka", servers, "--hub", "myhub", "--format", "apple", "--tags", "a &&", "--body", "{}",
        ])
        #expect(await refused.exitStatus(within: .seconds(30)) == 64, "an invalid tag expression is a usage error")

        let sent = try ChildProcess(
            arguments: [
                "send", "--kafka", servers, "--hub", "myhub", "--format", "template", "--tags", "Sports || News", "--header", "apns-priority:5",
                "--body", #"{"messageParam":"hello"}"#,
            ],
            environment: ["PUSHHUB_LOG_LEVEL": "critical"])
        #expect(await sent.exitStatus(within: .seconds(30)) == 0)
        let id = try #require(sent.output.last)

        var configuration = KafkaConsumerConfiguration(bootstrapServers: cluster.bootstrapServers, groupID: "reader")
        configuration.sessionTimeout = .seconds(3)
        let consumer = try KafkaConsumer.make(configuration: configuration, topics: ["pushhub.requests"], logger: logger)
        var found: SendRequest?
        for await record in consumer.records {
            found = try WireCoding.decode(SendRequest.self, from: record.value)
            break
        }
        await consumer.close()
        #expect(found?.notificationId == id)
        #expect(found?.audience == .tags("Sports || News"))
        #expect(found?.format == .template)
        #expect(found?.headers == ["apns-priority": "5"])
    }
}
