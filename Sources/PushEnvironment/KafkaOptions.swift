import ArgumentParser
import PushKafka
import PushModel

/// Where Kafka is and what its topics are called.
public struct KafkaOptions: ParsableArguments {
    @Option(name: .customLong("kafka"), help: "Bootstrap servers, comma-separated (default: $PUSHHUB_KAFKA).")
    public var bootstrapServers: String?

    @Option(help: "Prefix of every topic name (default: $PUSHHUB_TOPIC_PREFIX or pushhub.).")
    public var topicPrefix: String?

    public init() {}

    /// Where the servers are named: `--kafka` (which wins), `PUSHHUB_KAFKA`, or nil for nowhere.
    public var source: String? {
        bootstrapServers != nil ? "--kafka" : PushHubEnvironment.current.kafkaBootstrapServers != nil ? "PUSHHUB_KAFKA" : nil
    }

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

    /// `servers()`, once one of them answered: a cluster that does not answer within `timeout`
    /// is an error that names the address and where it came from, not minutes of librdkafka
    /// retrying a cluster that went away with the `pushhub dev` that started it.
    public func reachableServers(timeout: Duration = .seconds(5)) async throws -> [String] {
        let servers = try servers()
        guard await KafkaReachability.answers(servers, timeout: timeout) else {
            throw KafkaUnreachable(servers: servers, source: source ?? "--kafka", timeout: timeout)
        }
        return servers
    }

    public var topics: PushTopics {
        PushTopics(prefix: topicPrefix ?? PushHubEnvironment.current.topicPrefix ?? PushTopics.defaultPrefix)
    }
}

/// No broker answered at the address a command was given.
public struct KafkaUnreachable: Error, CustomStringConvertible {
    public var servers: [String]
    public var source: String
    public var timeout: Duration

    public var description: String {
        "Kafka at \(servers.joined(separator: ",")) (from \(source)) did not answer within \(timeout.components.seconds) s. Is it running? "
            + "pushhub dev and pushhub kafka-dev print a new PUSHHUB_KAFKA each time they start: export the new one, or unset PUSHHUB_KAFKA."
    }
}
