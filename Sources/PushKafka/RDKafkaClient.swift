import CRdKafka
import Dispatch
import Logging
import PushModel
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// librdkafka calls back into Swift through C function pointers that cannot capture
/// context; this object is registered as the client's opaque and holds what they need.
final class ClientCallbacks: Sendable {
    let logger: Logger
    /// The producer's table of records awaiting their delivery report.
    let deliveries: DeliveryWaiters?
    /// The consumer's handler of group rebalances; set once, right after the handle exists.
    let rebalance = Mutex<(@Sendable (Rebalance) -> ConsumerStateMachine.RebalanceAction)?>(nil)

    init(logger: Logger, deliveries: DeliveryWaiters? = nil) {
        self.logger = logger
        self.deliveries = deliveries
    }

    static func from(_ rk: OpaquePointer?) -> ClientCallbacks? {
        guard let rk, let opaque = rd_kafka_opaque(rk) else { return nil }
        return Unmanaged<ClientCallbacks>.fromOpaque(opaque).takeUnretainedValue()
    }
}

/// Owns one `rd_kafka_t`. Created only through `make`, destroyed exactly once in `deinit`.
final class RDKafkaClient: @unchecked Sendable {
    // @unchecked: the handle is a thread-safe librdkafka object; it is never reassigned.
    let handle: OpaquePointer
    let callbacks: ClientCallbacks

    private init(handle: OpaquePointer, callbacks: ClientCallbacks) {
        self.handle = handle
        self.callbacks = callbacks
    }

    deinit {
        rd_kafka_destroy(handle)
    }

    /// Builds a configuration from `properties`, lets `configure` add callbacks, and creates
    /// the handle. The configuration is freed on every failure path; on success librdkafka
    /// owns it.
    static func make(
        type: rd_kafka_type_t,
        properties: [String: String],
        callbacks: ClientCallbacks,
        configure: (OpaquePointer) -> Void = { _ in }
    ) throws(KafkaError) -> RDKafkaClient {
        guard let conf = rd_kafka_conf_new() else {
            throw KafkaError(kind: .clientCreation, context: "rd_kafka_conf_new returned nothing")
        }
        var errorText = [CChar](repeating: 0, count: 512)
        for (name, value) in properties.sorted(by: { $0.key < $1.key }) {
            let result = rd_kafka_conf_set(conf, name, value, &errorText, errorText.count)
            if result != RD_KAFKA_CONF_OK {
                rd_kafka_conf_destroy(conf)
                throw KafkaError(
                    kind: .configuration,
                    context: "invalid Kafka property \(name)",
                    detail: text(ofCString: errorText))
            }
        }
        rd_kafka_conf_set_opaque(conf, Unmanaged.passUnretained(callbacks).toOpaque())
        rd_kafka_conf_set_log_cb(conf, logCallback)
        rd_kafka_conf_set_error_cb(conf, errorCallback)
        configure(conf)
        guard let handle = withSignalsBlocked({ rd_kafka_new(type, conf, &errorText, errorText.count) }) else {
            rd_kafka_conf_destroy(conf)
            throw KafkaError(
                kind: .clientCreation, context: "librdkafka could not create a client",
                detail: text(ofCString: errorText))
        }
        return RDKafkaClient(handle: handle, callbacks: callbacks)
    }
}

private let logCallback: @convention(c) (OpaquePointer?, Int32, UnsafePointer<CChar>?, UnsafePointer<CChar>?) -> Void = {
    rk, level, facility, message in
    guard let callbacks = ClientCallbacks.from(rk) else { return }
    let text = message.map { String(cString: $0) } ?? ""
    let facilityText = facility.map { String(cString: $0) } ?? ""
    // syslog levels, as librdkafka uses them.
    let swiftLevel: Logger.Level =
        switch level {
        case ...4 where StoppedBrokers.mentioned(in: text): .debug
        case ...2: .critical
        case 3: .error
        case 4: .warning
        case 5: .notice
        case 6: .info
        default: .debug
        }
    callbacks.logger.log(
        level: swiftLevel, "librdkafka",
        metadata: ["kafka.facility": "\(facilityText)", "kafka.message": "\(text)"])
}

private let errorCallback: @convention(c) (OpaquePointer?, Int32, UnsafePointer<CChar>?, UnsafeMutableRawPointer?) -> Void = {
    rk, code, reason, _ in
    guard let callbacks = ClientCallbacks.from(rk) else { return }
    let error = KafkaErrorCode(rawValue: code)
    let reasonText = reason.map { String(cString: $0) } ?? ""
    // "1/1 brokers are down" names no address: after this process stopped its embedded
    // cluster, only a client of that cluster says it (pushhub dev, tests).
    let afterStop = StoppedBrokers.any && error.name == "_ALL_BROKERS_DOWN"
    callbacks.logger.log(
        level: afterStop || StoppedBrokers.mentioned(in: reasonText) ? .debug : .warning,
        "Kafka client error",
        metadata: [
            "kafka.error": "\(error.name)",
            "kafka.reason": "\(reasonText)",
        ])
}

/// Brokers of embedded clusters this process stopped: clients that still try them are not in
/// trouble, the process is stopping.
enum StoppedBrokers {
    private static let addresses = Mutex<[String]>([])

    static func add(_ servers: [String]) {
        addresses.withLock { $0.append(contentsOf: servers) }
    }

    static var any: Bool { addresses.withLock { !$0.isEmpty } }

    /// Whether `text` names one of them (`127.0.0.1:3999` is not named by `127.0.0.1:39991`).
    static func mentioned(in text: String) -> Bool {
        addresses.withLock { addresses in
            addresses.contains { address in
                var rest = text[...]
                while let found = rest.range(of: address) {
                    if found.upperBound == rest.endIndex || !rest[found.upperBound].isNumber { return true }
                    rest = rest[found.upperBound...]
                }
                return false
            }
        }
    }
}

/// The text in a NUL-terminated C buffer librdkafka wrote into.
func text(ofCString buffer: [CChar]) -> String {
    let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
    return String(decoding: bytes, as: UTF8.self)
}

/// Runs librdkafka calls that block (flush, polls with a time-out, synchronous commits)
/// on Dispatch threads, never on Swift's cooperative pool.
enum BlockingCalls {
    private static let queue = DispatchQueue(label: "pushhub.kafka.blocking", attributes: .concurrent)

    static func run<T: Sendable>(
        on queue: DispatchQueue = BlockingCalls.queue, _ body: @escaping @Sendable () -> T
    ) async -> T {
        await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: body()) }
        }
    }

    /// Drops a reference to `object` on this queue's threads, so that a deinit that blocks (a
    /// client's `rd_kafka_destroy`) runs there when it is the last.
    static func release(_ object: some AnyObject & Sendable) {
        queue.async { withExtendedLifetime(object) {} }
    }
}

/// Builds an `rd_kafka_topic_partition_list_t` from Swift values, for the duration of `body`.
func withPartitionList<T>(
    _ partitions: [(topic: String, partition: Int32, offset: Int64?)],
    _ body: (UnsafeMutablePointer<rd_kafka_topic_partition_list_t>) -> T
) -> T {
    let list = rd_kafka_topic_partition_list_new(Int32(partitions.count))!
    defer { rd_kafka_topic_partition_list_destroy(list) }
    for entry in partitions {
        let element = rd_kafka_topic_partition_list_add(list, entry.topic, entry.partition)!
        if let offset = entry.offset { element.pointee.offset = offset }
    }
    return body(list)
}

/// The entries of an `rd_kafka_topic_partition_list_t`.
func partitions(of list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?) -> [KafkaTopicPartition] {
    guard let list, let elements = list.pointee.elems else { return [] }
    return (0..<Int(list.pointee.cnt)).map { index in
        KafkaTopicPartition(
            topic: String(cString: elements[index].topic), partition: elements[index].partition)
    }
}

/// One partition of one topic.
public struct KafkaTopicPartition: Hashable, Sendable, CustomStringConvertible {
    public var topic: String
    public var partition: Int32

    public init(topic: String, partition: Int32) {
        self.topic = topic
        self.partition = partition
    }

    public var description: String { "\(topic)[\(partition)]" }
}

/// Owns one reference to an `rd_kafka_queue_t`; keeps its client alive so the queue is
/// released before the handle is destroyed.
final class RDKafkaQueue: @unchecked Sendable {
    // @unchecked: librdkafka queues are thread-safe; the pointer is never reassigned.
    let pointer: OpaquePointer
    private let client: RDKafkaClient

    init(pointer: OpaquePointer, client: RDKafkaClient) {
        self.pointer = pointer
        self.client = client
    }

    deinit {
        rd_kafka_queue_destroy(pointer)
    }
}

extension RDKafkaClient {
    /// Serves the handle's queued callbacks (delivery reports, logs, errors), waiting up to
    /// `timeoutMilliseconds` for the first; returns how many it served. Blocks the calling thread.
    @discardableResult
    func poll(timeoutMilliseconds: Int32) -> Int32 {
        rd_kafka_poll(handle, timeoutMilliseconds)
    }

    /// The high watermark of `partition` as librdkafka last saw it in a fetch response; no
    /// broker is asked. `nil` when it has not seen one yet.
    func lastSeenHighWatermark(of partition: KafkaTopicPartition) -> Int64? {
        var low: Int64 = 0
        var high: Int64 = 0
        let code = rd_kafka_get_watermark_offsets(handle, partition.topic, partition.partition, &low, &high)
        guard code == RD_KAFKA_RESP_ERR_NO_ERROR, high >= 0 else { return nil }
        return high
    }

    /// Whether a broker answers a metadata request within `timeout` (readiness checks).
    func isReachable(timeout: Duration) async -> Bool {
        let milliseconds = Int32(clamping: timeout.wholeMilliseconds)
        return await BlockingCalls.run { [self] in
            var metadata: UnsafePointer<rd_kafka_metadata>? = nil
            let code = rd_kafka_metadata(handle, 0, nil, &metadata, milliseconds)
            if let metadata { rd_kafka_metadata_destroy(metadata) }
            return code == RD_KAFKA_RESP_ERR_NO_ERROR
        }
    }
}

/// Runs `body` with every signal blocked in the calling thread, so the threads librdkafka
/// starts inside it inherit that mask. Otherwise a signal handled by the process (SIGCHLD when
/// a child exits, SIGTERM at shutdown) can land on one of them and interrupt its poll(2); the
/// embedded cluster's thread gives up on EINTR, and its clients then wait for ever. The
/// librdkafka FAQ recommends the same.
func withSignalsBlocked<T>(_ body: () throws -> T) rethrows -> T {
    var all = sigset_t()
    var previous = sigset_t()
    sigfillset(&all)
    pthread_sigmask(SIG_BLOCK, &all, &previous)
    defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
    return try body()
}
