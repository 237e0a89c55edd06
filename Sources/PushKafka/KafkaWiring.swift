import Logging
import PushModel
import ServiceLifecycle

/// What the parts of one process share on Kafka: the cluster, the topic names, one producer,
/// and how their consumers are made. The process builders (`makeIngressServices`,
/// `makeDispatcherServices`, `makeWorkerServices`) take one; whoever made the producer runs it
/// as a service before theirs.
public struct KafkaWiring: Sendable {
    public var servers: [String]
    public var topics: PushTopics
    public var producer: KafkaProducer
    /// Applied to every consumer's configuration (tests shorten the session time-out).
    public var tuneConsumer: @Sendable (inout KafkaConsumerConfiguration) -> Void

    public init(
        servers: [String], topics: PushTopics, producer: KafkaProducer,
        tuneConsumer: @escaping @Sendable (inout KafkaConsumerConfiguration) -> Void = { _ in }
    ) {
        self.servers = servers
        self.topics = topics
        self.producer = producer
        self.tuneConsumer = tuneConsumer
    }

    /// A producer for `servers`, which learns `ahead` as it starts and any other topic as its
    /// first record comes, and the wiring around it. `ahead` is what the process writes to
    /// whatever its traffic (its results, its requests); a platform's deliveries topic is
    /// learnt when the first batch for it comes, so platforms that no device uses cost the
    /// producer nothing (`KafkaProducer.prepare`).
    public static func make(servers: [String], topics: PushTopics, ahead: [String], logger: Logger) throws(KafkaError) -> KafkaWiring {
        var configuration = KafkaProducerConfiguration(bootstrapServers: servers)
        configuration.topics = ahead
        return KafkaWiring(servers: servers, topics: topics, producer: try KafkaProducer.make(configuration: configuration, logger: logger))
    }

    /// A consumer in `group` of `topics`; `part` sets what the process part needs of it
    /// (before `tuneConsumer`).
    public func consumer(
        group: String, clientID: String? = nil, topics names: [String], logger: Logger,
        part: (inout KafkaConsumerConfiguration) -> Void = { _ in }
    ) throws(KafkaError) -> KafkaConsumer {
        var configuration = KafkaConsumerConfiguration(bootstrapServers: servers, groupID: group)
        if let clientID { configuration.clientID = clientID }
        part(&configuration)
        tuneConsumer(&configuration)
        return try KafkaConsumer.make(configuration: configuration, topics: names, logger: logger)
    }
}

/// A process part as its builder makes it: its consumers, which start before and close after
/// the services that use them, and those services. A process puts its own services (the
/// operations endpoints) between the two, so they answer until the work has stopped.
public struct ProcessPart: Sendable {
    public var consumers: [KafkaConsumer]
    public var workers: [ServiceGroupConfiguration.ServiceConfiguration]

    public init(consumers: [KafkaConsumer], workers: [ServiceGroupConfiguration.ServiceConfiguration]) {
        self.consumers = consumers
        self.workers = workers
    }

    /// Consumers first, then the workers.
    public var services: [ServiceGroupConfiguration.ServiceConfiguration] { consumers.map { .init(service: $0) } + workers }
}

extension [KafkaConsumer] {
    /// Whether every consumer's brokers answer a metadata request in time.
    public func allReachable(timeout: Duration = .seconds(2)) async -> Bool {
        for consumer in self where await !consumer.isReachable(timeout: timeout) { return false }
        return true
    }
}
