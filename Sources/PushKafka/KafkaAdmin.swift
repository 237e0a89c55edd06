import CRdKafka
import Logging

/// A topic to create.
public struct KafkaTopicSpecification: Sendable, Hashable {
    public var name: String
    public var partitions: Int
    public var replicationFactor: Int
    /// Topic configuration such as `retention.ms`.
    public var configuration: [String: String]

    public init(name: String, partitions: Int, replicationFactor: Int, configuration: [String: String] = [:]) {
        self.name = name
        self.partitions = partitions
        self.replicationFactor = replicationFactor
        self.configuration = configuration
    }
}

/// What the cluster said about its brokers and topics.
public struct KafkaClusterMetadata: Sendable {
    public struct Broker: Sendable, Hashable {
        public var id: Int32
        public var host: String
        public var port: Int
    }

    public struct Partition: Sendable, Hashable {
        public var id: Int32
        public var leader: Int32
        public var replicas: [Int32]
        public var inSyncReplicas: [Int32]
    }

    public struct Topic: Sendable, Hashable {
        public var name: String
        public var partitions: [Partition]
        /// Set when the broker reported an error for this topic.
        public var error: KafkaErrorCode?
    }

    public var brokers: [Broker]
    public var topics: [Topic]
}

/// Creates topics and reads metadata.
public final class KafkaAdmin: Sendable {
    public enum CreationOutcome: Sendable, Hashable {
        case created
        case alreadyExisted
    }

    private let client: RDKafkaClient
    private let configuration: KafkaAdminConfiguration

    private init(client: RDKafkaClient, configuration: KafkaAdminConfiguration) {
        self.client = client
        self.configuration = configuration
    }

    public static func make(configuration: KafkaAdminConfiguration, logger: Logger) throws(KafkaError) -> KafkaAdmin {
        let client = try RDKafkaClient.makeAdmin(properties: configuration.properties, logger: logger)
        return KafkaAdmin(client: client, configuration: configuration)
    }

    /// Creates the topics that do not exist yet; a topic that exists is left as it is.
    public func createTopics(_ specifications: [KafkaTopicSpecification]) async throws(KafkaError) -> [String: CreationOutcome] {
        try await client.createTopics(specifications, timeout: configuration.requestTimeout)
    }

    /// Brokers and topics of the cluster.
    public func metadata() async throws(KafkaError) -> KafkaClusterMetadata {
        try await client.clusterMetadata(timeout: configuration.requestTimeout)
    }
}

/// Whether a cluster answers at all, asked before anything else is made of it.
public enum KafkaReachability {
    /// Whether a broker of `servers` answers a metadata request within `timeout`. librdkafka's
    /// own complaints meanwhile (one a second per broker it cannot reach) are not logged: the
    /// caller says what went wrong, once.
    public static func answers(_ servers: [String], timeout: Duration) async -> Bool {
        let quiet = Logger(label: "pushhub.kafka.check") { _ in SwiftLogNoOpLogHandler() }
        let properties = ["bootstrap.servers": servers.joined(separator: ","), "client.id": "pushhub-check"]
        guard let client = try? RDKafkaClient.makeAdmin(properties: properties, logger: quiet) else { return false }
        return await client.isReachable(timeout: timeout)
    }
}

/// The librdkafka this process runs on.
public enum KafkaLibrary {
    /// Its version, as it reports it (e.g. `2.0.2`).
    public static var version: String { String(cString: rd_kafka_version_str()) }
}
