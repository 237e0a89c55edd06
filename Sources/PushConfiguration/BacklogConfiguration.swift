import PushModel

/// `backlog` in `pushhub.yaml`: how many bytes a partition may hold that its consumers have
/// not committed before PushHub stops adding to it. The dispatcher waits before producing
/// more DeliveryBatches; the ingress sends small audiences through the dispatcher instead of
/// straight to the workers. A group that commits nothing for a minute while records wait is
/// no longer waited for (logged), so workers in a group not named here cannot stop sends.
///
/// ```yaml
/// backlog:
///   bytesPerPartition: 2097152   # the default; 0 never waits
///   groups:                      # only when workers run in consumer groups of their own (--group)
///     apns: my-apns-workers      # apns, fcm, wns, webpush, hms, adm, xiaomi, baidu
/// ```
///
/// librdkafka's embedded cluster (`pushhub dev`, `pushhub kafka-dev`) keeps at most 5 MiB a
/// partition and drops the oldest records beyond that, read or not; a real Kafka keeps them,
/// and a larger bound only lets a broadcast run further ahead of the workers.
public struct BacklogConfiguration: Codable, Sendable, Equatable {
    public var bytesPerPartition: Int?
    public var groups: [String: String]?

    public static let defaultBytesPerPartition = 2 << 20
    public init(bytesPerPartition: Int? = nil, groups: [String: String]? = nil) {
        self.bytesPerPartition = bytesPerPartition
        self.groups = groups
    }

    /// The bound, nil when waiting is off.
    public var bound: Int? {
        let bytes = bytesPerPartition ?? Self.defaultBytesPerPartition
        return bytes > 0 ? bytes : nil
    }

    /// The consumer group of `platform`'s workers.
    public func workerGroup(_ platform: Platform) -> String { groups?[platform.rawValue] ?? platform.workerGroup }

    func validate(at path: String) throws {
        if let bytesPerPartition, bytesPerPartition < 0 || (bytesPerPartition > 0 && bytesPerPartition < 64 << 10) {
            throw ConfigurationError("\(path).bytesPerPartition: 0 (never wait) or at least 65536, not \(bytesPerPartition)")
        }
        let names = Platform.allCases.map(\.rawValue)
        for (name, group) in groups ?? [:] {
            guard names.contains(name) else { throw ConfigurationError("\(path).groups.\(name): one of \(names.joined(separator: ", "))") }
            guard !group.isEmpty, group.utf8.count <= 255 else { throw ConfigurationError("\(path).groups.\(name): a consumer group name") }
        }
    }
}
