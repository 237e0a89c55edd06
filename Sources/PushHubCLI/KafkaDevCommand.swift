import ArgumentParser
import Foundation
import Logging
import PushEnvironment
import PushKafka
import PushModel
import PushOps
import ServiceLifecycle

/// `pushhub kafka-dev`: the embedded Kafka-protocol cluster as a process of its own.
struct KafkaDevCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kafka-dev",
        abstract: "Run librdkafka's embedded Kafka cluster (memory only) with PushHub's topics until SIGTERM.",
        discussion: """
            Prints PUSHHUB_KAFKA=HOST:PORT,... once the brokers listen. Reads control commands on \
            standard input, one per line (`help` lists them), and answers each with `ok` or `error: ...`.

            Examples:
              pushhub kafka-dev --brokers 1
              pushhub kafka-dev --brokers 3 --partitions 12 # then type: broker down 1, broker up 1, help
            """)

    @Option(help: "Number of brokers.")
    var brokers: Int = 3

    @Option(help: "Partitions of each PushHub topic.")
    var partitions: Int = 6

    @Option(help: "Prefix of every topic name (default: $PUSHHUB_TOPIC_PREFIX or pushhub.).")
    var topicPrefix: String?

    func validate() throws {
        guard (1...16).contains(brokers) else { throw ValidationError("--brokers must be 1 to 16") }
        guard (1...256).contains(partitions) else { throw ValidationError("--partitions must be 1 to 256") }
    }

    func run() async throws {
        let logger = makeLogger("pushhub.kafka-dev")
        let cluster = try EmbeddedKafkaCluster.start(brokers: brokers, logger: logger)
        let topics = PushTopics(prefix: topicPrefix ?? PushHubEnvironment.current.topicPrefix ?? PushTopics.defaultPrefix)
        for topic in topics.all {
            try cluster.createTopic(topic, partitions: partitions, replicationFactor: min(3, brokers))
        }
        emit(
            "PushHub embedded Kafka: \(brokers) broker(s), memory only; topics \(topics.all.joined(separator: ", ")) with \(partitions) partitions each."
        )
        emit("PUSHHUB_KAFKA=\(cluster.bootstrapServers.joined(separator: ","))")
        emit("Control commands on standard input (`help` lists them). Stop with Ctrl-C or SIGTERM.")

        // Standard input is read on a thread of its own: reading blocks.
        let reader = Thread {
            while let line = readLine() {
                guard !line.trimmingCharacters(in: .whitespaces).isEmpty else { continue }
                emit(EmbeddedClusterControl.execute(line, on: cluster))
            }
        }
        reader.start()

        let group = ProcessLifecycle.group([.init(service: UntilShutdown())], logger: logger)
        try await group.run()
        cluster.shutdown()
        emit("PushHub embedded Kafka stopped.")
    }
}

/// A service that does nothing until graceful shutdown.
struct UntilShutdown: Service {
    func run() async throws {
        try? await gracefulShutdown()
    }
}
