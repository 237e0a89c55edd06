import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// Kafka protocol requests whose answers the embedded cluster can be told to fail.
public enum KafkaProtocolRequest: Int16, Sendable, CaseIterable {
    case produce = 0
    case fetch = 1
    case listOffsets = 2
    case metadata = 3
    case offsetCommit = 8
    case offsetFetch = 9
    case findCoordinator = 10
    case joinGroup = 11
    case heartbeat = 12
    case syncGroup = 14
    case initProducerID = 22
}

/// librdkafka's in-memory Kafka-protocol cluster (`rdkafka_mock.h`): real brokers on
/// loopback ports that any Kafka client can use, for tests and `pushhub dev`. Nothing is
/// kept on disk. Brokers are numbered from 1.
///
/// The cluster cannot create topics over the protocol (it has no controller); create them
/// with `createTopic`. Topics a producer names before that are created with 4 partitions.
public final class EmbeddedKafkaCluster: Sendable {
    private let cluster: RDKafkaMockCluster
    /// `host:port` of every broker.
    public let bootstrapServers: [String]
    public let brokerCount: Int

    private init(cluster: RDKafkaMockCluster, brokerCount: Int) {
        self.cluster = cluster
        self.brokerCount = brokerCount
        self.bootstrapServers = cluster.bootstrapServers
    }

    deinit {
        shutdown()
    }

    /// Starts a cluster of `brokers` brokers on loopback.
    public static func start(brokers: Int = 3, logger: Logger) throws(KafkaError) -> EmbeddedKafkaCluster {
        guard brokers >= 1 else {
            throw KafkaError(kind: .configuration, context: "an embedded cluster needs at least one broker, not \(brokers)")
        }
        let cluster = try RDKafkaMockCluster.start(brokers: brokers, logger: logger)
        return EmbeddedKafkaCluster(cluster: cluster, brokerCount: brokers)
    }

    /// Stops every broker. Idempotent; also done when the object goes away.
    public func shutdown() {
        // Clients still running (a process stopping in order) fail to reach it from now on:
        // expected, so their complaints about it are no longer errors.
        StoppedBrokers.add(bootstrapServers)
        cluster.destroy()
    }

    /// Creates `name` with `partitions` partitions; the replication factor is capped by the
    /// broker count.
    public func createTopic(_ name: String, partitions: Int, replicationFactor: Int = 1) throws(KafkaError) {
        let replicas = min(replicationFactor, brokerCount)
        try perform("could not create topic \(name)") { $0.createTopic(name, partitions: partitions, replicationFactor: replicas) }
    }

    /// Makes `broker` lead `partition` of `topic`.
    public func setPartitionLeader(topic: String, partition: Int32, broker: Int32) throws(KafkaError) {
        try perform("could not move the leader of \(topic)[\(partition)]") {
            $0.setPartitionLeader(topic: topic, partition: partition, broker: broker)
        }
    }

    /// Disconnects `broker` and refuses new connections to it. Leadership does not move.
    public func setBrokerDown(_ broker: Int32) throws(KafkaError) {
        try perform("could not take broker \(broker) down") { $0.setBrokerDown(broker) }
    }

    /// Lets `broker` accept connections again, on the port it had.
    ///
    /// librdkafka listens on that port again and aborts the process when it cannot: while the
    /// broker was down, another socket on this machine (an outgoing connection's local port,
    /// which comes from the same range) may have taken it. So the port is first waited for,
    /// up to 10 s, until a socket can bind it.
    public func setBrokerUp(_ broker: Int32) throws(KafkaError) {
        if broker >= 1, Int(broker) <= bootstrapServers.count,
            let port = bootstrapServers[Int(broker) - 1].split(separator: ":").last.flatMap({ UInt16($0) })
        {
            var tries = 0
            while !Self.canBind(port: port), tries < 500 {
                usleep(20_000)
                tries += 1
            }
        }
        try perform("could not bring broker \(broker) up") { $0.setBrokerUp(broker) }
    }

    /// Whether a socket can bind 127.0.0.1:`port` now (with SO_REUSEADDR, as a listener would).
    static func canBind(port: UInt16) -> Bool {
        let probe = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard probe >= 0 else { return true }
        defer { close(probe) }
        var reuse: Int32 = 1
        setsockopt(probe, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(probe, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    /// Delays every answer of `broker` by `delay`.
    public func setBrokerLatency(_ broker: Int32, _ delay: Duration) throws(KafkaError) {
        try perform("could not set the latency of broker \(broker)") { $0.setBrokerRoundTripTime(broker, delay) }
    }

    /// Makes the next `errors.count` requests of this kind, on any broker, fail with these
    /// errors in order.
    public func injectErrors(_ errors: [KafkaErrorCode], on request: KafkaProtocolRequest) throws(KafkaError) {
        try perform("could not inject errors") { $0.pushRequestErrors(errors, on: request) }
    }

    /// Forgets errors injected for this kind of request and not yet returned.
    public func clearInjectedErrors(on request: KafkaProtocolRequest) throws(KafkaError) {
        try perform("could not clear injected errors") { $0.clearRequestErrors(on: request) }
    }

    /// Runs one mock-cluster call and turns its code into an error naming `context`; the
    /// call gives no code when the cluster is already shut down.
    private func perform(_ context: String, _ call: (RDKafkaMockCluster) -> KafkaErrorCode?) throws(KafkaError) {
        guard let code = call(cluster) else { throw KafkaError(kind: .shutDown, context: "\(context): the embedded cluster is shut down") }
        guard code == .noError else { throw KafkaError(kind: .operation, code: code, context: context) }
    }
}
