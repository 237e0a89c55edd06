import PushEnvironment
import ArgumentParser
import PushModel

/// Where Kafka is and what its topics are called.
struct KafkaOptions: ParsableArguments {
    @Option(name: .customLong("kafka"), help: "Bootstrap servers, comma-separated (default: $PUSHHUB_KAFKA).")
    var bootstrapServers: String?

    @Option(help: "Prefix of every topic name (default: $PUSHHUB_TOPIC_PREFIX or pushhub.).")
    var topicPrefix: String?

    func servers() throws -> [String] {
        if let bootstrapServers {
            let servers = PushHubEnvironment.servers(bootstrapServers)
            guard !servers.isEmpty else { throw ValidationError("--kafka names no server") }
            return servers
        }
        guard let servers = PushHubEnvironment.current.kafkaBootstrapServers else {
            throw ValidationError("say where Kafka is: --kafka HOST:PORT,... or PUSHHUB_KAFKA")
        }
        return servers
    }

    var topics: PushTopics {
        PushTopics(prefix: topicPrefix ?? PushHubEnvironment.current.topicPrefix ?? PushTopics.defaultPrefix)
    }
}
