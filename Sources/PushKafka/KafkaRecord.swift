import Foundation

/// A Kafka record header.
public struct KafkaHeader: Hashable, Sendable {
    public var key: String
    public var value: Data?

    public init(key: String, value: Data?) {
        self.key = key
        self.value = value
    }

    public init(key: String, value: String) {
        self.init(key: key, value: Data(value.utf8))
    }
}

/// A record to produce.
public struct KafkaOutgoingRecord: Sendable {
    public var topic: String
    /// `nil` lets the partitioner choose by key (murmur2, as the Java client does).
    public var partition: Int32?
    public var key: Data?
    public var value: Data
    public var headers: [KafkaHeader]
    /// With no `partition`: whether the record may go to any partition rather than its key's.
    /// The producer then fills one partition for a few milliseconds before moving to the next
    /// (`StickyPartitions`), so records produced close together share one record batch.
    public var sticky: Bool

    public init(topic: String, partition: Int32? = nil, key: Data?, value: Data, headers: [KafkaHeader] = [], sticky: Bool = false) {
        self.topic = topic
        self.partition = partition
        self.key = key
        self.value = value
        self.headers = headers
        self.sticky = sticky
    }

    public init(topic: String, key: String, value: Data, headers: [KafkaHeader] = [], sticky: Bool = false) {
        self.init(topic: topic, key: Data(key.utf8), value: value, headers: headers, sticky: sticky)
    }
}

/// Where the broker stored an acknowledged record.
public struct KafkaDeliveryReport: Hashable, Sendable {
    public var topic: String
    public var partition: Int32
    public var offset: Int64
}

/// A consumed record.
public struct KafkaRecord: Sendable {
    public var topic: String
    public var partition: Int32
    public var offset: Int64
    public var key: Data?
    public var value: Data
    public var headers: [KafkaHeader]
    /// Milliseconds since the epoch, as the producer or broker stamped it; `nil` when absent.
    public var timestampMilliseconds: Int64?
    /// The assignment this record was fetched under; a record of an earlier one is stale.
    let generation: UInt64

    public var topicPartition: KafkaTopicPartition { KafkaTopicPartition(topic: topic, partition: partition) }

    public var keyString: String? { key.flatMap { String(data: $0, encoding: .utf8) } }

    /// The value of the first header named `key`.
    public func header(_ key: String) -> Data? {
        headers.first { $0.key == key }?.value
    }
}
