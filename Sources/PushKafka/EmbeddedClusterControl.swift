/// A line-based control language for an embedded cluster running as its own process
/// (`pushhub kafka-dev` reads it on standard input), so tests in other processes can inject
/// faults:
///
///     broker down 1          broker up 1
///     topic create NAME 6    errors produce NOT_ENOUGH_REPLICAS,REQUEST_TIMED_OUT
///     errors clear fetch     latency 2 250
public enum EmbeddedClusterControl {
    public static let help = """
        commands:
          broker down ID | broker up ID
          topic create NAME PARTITIONS [REPLICATION]
          errors REQUEST CODE[,CODE...]   (REQUEST: \(KafkaProtocolRequest.allCases.map(\.name).joined(separator: ", ")))
          errors clear REQUEST
          latency BROKER MILLISECONDS
        """

    /// Runs one command line; returns `ok` or `error: …`.
    public static func execute(_ line: String, on cluster: EmbeddedKafkaCluster) -> String {
        let words = line.split(whereSeparator: \.isWhitespace).map(String.init)
        do {
            switch words.first {
            case "broker" where words.count == 3:
                let broker = try int32(words[2], "broker id")
                switch words[1] {
                case "down": try cluster.setBrokerDown(broker)
                case "up": try cluster.setBrokerUp(broker)
                default: return "error: say broker down ID or broker up ID"
                }
            case "topic" where (4...5).contains(words.count) && words[1] == "create":
                let partitions = try int32(words[3], "partition count")
                let replication = words.count == 5 ? try int32(words[4], "replication factor") : 1
                try cluster.createTopic(words[2], partitions: Int(partitions), replicationFactor: Int(replication))
            case "errors" where words.count == 3 && words[1] == "clear":
                try cluster.clearInjectedErrors(on: try request(words[2]))
            case "errors" where words.count == 3:
                let codes = try words[2].split(separator: ",").map { try code(String($0)) }
                try cluster.injectErrors(codes, on: try request(words[1]))
            case "latency" where words.count == 3:
                try cluster.setBrokerLatency(try int32(words[1], "broker id"), .milliseconds(Int(try int32(words[2], "milliseconds"))))
            case "help":
                return help
            default:
                return "error: unknown command \"\(line)\"\n" + help
            }
            return "ok"
        } catch let error as ControlError {
            return "error: \(error.message)"
        } catch {
            return "error: \(error)"
        }
    }

    private struct ControlError: Error {
        var message: String
    }

    private static func int32(_ word: String, _ what: String) throws -> Int32 {
        guard let value = Int32(word), value >= 0 else { throw ControlError(message: "\(what) must be a number, not \"\(word)\"") }
        return value
    }

    private static func request(_ word: String) throws -> KafkaProtocolRequest {
        guard let request = KafkaProtocolRequest.allCases.first(where: { $0.name == word.lowercased() }) else {
            throw ControlError(message: "unknown request \"\(word)\"")
        }
        return request
    }

    /// A librdkafka error name such as `NOT_LEADER_FOR_PARTITION`, or its number.
    private static func code(_ word: String) throws -> KafkaErrorCode {
        if let number = Int32(word) { return KafkaErrorCode(rawValue: number) }
        // Broker error codes run from -1 to about 120 in librdkafka 2.0.
        for raw in Int32(-1)...Int32(200) where KafkaErrorCode(rawValue: raw).name == word.uppercased() {
            return KafkaErrorCode(rawValue: raw)
        }
        throw ControlError(message: "unknown error code \"\(word)\"")
    }
}

extension KafkaProtocolRequest {
    /// The name used in control commands, e.g. `offsetcommit`.
    public var name: String { String(describing: self).lowercased() }
}
