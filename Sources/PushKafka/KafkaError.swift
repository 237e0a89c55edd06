import CRdKafka

/// A librdkafka error code, with names for the ones PushHub reacts to or injects in tests.
public struct KafkaErrorCode: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    init(_ code: rd_kafka_resp_err_t) { self.rawValue = code.rawValue }

    var cValue: rd_kafka_resp_err_t { rd_kafka_resp_err_t(rawValue: rawValue) }

    /// librdkafka's short name, e.g. `NOT_LEADER_FOR_PARTITION` or `_MSG_TIMED_OUT`.
    public var name: String { String(cString: rd_kafka_err2name(cValue)) }

    /// librdkafka's human-readable text for the code.
    public var message: String { String(cString: rd_kafka_err2str(cValue)) }

    public var description: String { "\(name) (\(message))" }

    public static let noError = KafkaErrorCode(RD_KAFKA_RESP_ERR_NO_ERROR)
    public static let messageTimedOut = KafkaErrorCode(RD_KAFKA_RESP_ERR__MSG_TIMED_OUT)
    public static let queueFull = KafkaErrorCode(RD_KAFKA_RESP_ERR__QUEUE_FULL)
    public static let timedOut = KafkaErrorCode(RD_KAFKA_RESP_ERR__TIMED_OUT)
    public static let topicAlreadyExists = KafkaErrorCode(RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
    public static let notLeaderForPartition = KafkaErrorCode(RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION)
    public static let leaderNotAvailable = KafkaErrorCode(RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE)
    public static let requestTimedOut = KafkaErrorCode(RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT)
    public static let notEnoughReplicas = KafkaErrorCode(RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS)
    public static let brokerNotAvailable = KafkaErrorCode(RD_KAFKA_RESP_ERR_BROKER_NOT_AVAILABLE)
    public static let coordinatorNotAvailable = KafkaErrorCode(RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE)
    public static let notCoordinator = KafkaErrorCode(RD_KAFKA_RESP_ERR_NOT_COORDINATOR)
    public static let unknownTopicOrPartition = KafkaErrorCode(RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
    /// librdkafka's own: a produce to a partition the topic does not have.
    public static let unknownPartition = KafkaErrorCode(RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION)
    public static let invalidCommitOffsetSize = KafkaErrorCode(RD_KAFKA_RESP_ERR_INVALID_COMMIT_OFFSET_SIZE)
    public static let messageTooLarge = KafkaErrorCode(RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE)
}

/// An error from the Kafka layer: what PushHub was doing, and what librdkafka said.
public struct KafkaError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// A configuration property was rejected by librdkafka.
        case configuration
        /// librdkafka could not create a client handle.
        case clientCreation
        /// The broker did not acknowledge a record (including delivery time-outs).
        case delivery
        /// A consumer, admin or cluster operation failed.
        case operation
        /// The client was shut down before the operation could run.
        case shutDown
    }

    public let kind: Kind
    /// The librdkafka error code, when there is one.
    public let code: KafkaErrorCode?
    /// What PushHub was doing, in words.
    public let context: String
    /// librdkafka's own explanation, when it gave one beyond the code.
    public let detail: String?

    public init(kind: Kind, code: KafkaErrorCode? = nil, context: String, detail: String? = nil) {
        self.kind = kind
        self.code = code
        self.context = context
        self.detail = detail
    }

    init(_ kind: Kind, _ code: rd_kafka_resp_err_t, _ context: String) {
        self.init(kind: kind, code: KafkaErrorCode(code), context: context)
    }

    public var description: String {
        var text = context
        if let code { text += ": \(code)" }
        if let detail, !detail.isEmpty { text += ": \(detail)" }
        return text
    }
}
