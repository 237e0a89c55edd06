import ArgumentParser
import PushModel

/// Where Kafka is and what its topics are called.
public struct KafkaOptions: ParsableArguments {
    @Option(name: .customLong("kafka"), help: "Bootstrap servers, comma-separated (default: $PUSHHUB_KAFKA).")
    public var bootstrapServers: String?

    @Option(help: "Prefix of every topic name (default: $PUSHHUB_TOPIC_PREFIX or pushhub.).")
    public var topicPrefix: String?

    public init() {}

    /// Whether Kafka is named at all (by option or environment).
    public var isConfigured: Bool { bootstrapServers != nil || PushHubEnvironment.current.kafkaBootstrapServers != nil }

    public func servers() throws -> [String] {
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

    public var topics: PushTopics {
        PushTopics(prefix: topicPrefix ?? PushHubEnvironment.current.topicPrefix ?? PushTopics.defaultPrefix)
    }
}
