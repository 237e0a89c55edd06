import ArgumentParser
import PushEnvironment
import PushKafka
import PushModel

/// `pushhub topics create|list`.
struct TopicsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "topics", abstract: "Create or list PushHub's Kafka topics.",
        discussion: "Examples:\n  pushhub topics create --kafka kafka:9092 --partitions 12 --replication-factor 3\n  pushhub topics list",
        subcommands: [Create.self, List.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create PushHub's topics where they are missing; existing topics are left as they are.",
            discussion:
                "Examples:\n  pushhub topics create --kafka kafka:9092 --partitions 12 --replication-factor 3\n  pushhub topics create --topic-prefix staging. --partitions 6"
        )

        @OptionGroup var kafka: KafkaOptions

        @Option(help: "Partitions of each topic.")
        var partitions: Int = 12

        @Option(help: "Replication factor of each topic.")
        var replicationFactor: Int = 3

        func validate() throws {
            guard partitions >= 1 else { throw ValidationError("--partitions must be at least 1") }
            guard replicationFactor >= 1 else { throw ValidationError("--replication-factor must be at least 1") }
        }

        func run() async throws {
            let admin = try KafkaAdmin.make(
                configuration: KafkaAdminConfiguration(bootstrapServers: try await kafka.reachableServers()), logger: makeLogger("pushhub.topics"))
            let specifications = kafka.topics.all.map {
                KafkaTopicSpecification(name: $0, partitions: partitions, replicationFactor: replicationFactor)
            }
            do {
                let outcomes = try await admin.createTopics(specifications)
                for topic in kafka.topics.all {
                    emit("\(topic): \(outcomes[topic] == .created ? "created" : "already existed")")
                }
            } catch {
                // librdkafka's embedded cluster has no controller and cannot create topics over the protocol.
                guard error.detail?.contains("controller") == true else { throw error }
                throw CommandFailure(
                    description:
                        "\(error)\n(An embedded cluster cannot create topics over the protocol; `pushhub kafka-dev` creates PushHub's topics itself, and its `topic create` command adds others.)"
                )
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the cluster's brokers and topics.",
            discussion: "Examples:\n  pushhub topics list\n  pushhub topics list --kafka kafka:9092 --topic-prefix staging.")

        @OptionGroup var kafka: KafkaOptions

        func run() async throws {
            let admin = try KafkaAdmin.make(
                configuration: KafkaAdminConfiguration(bootstrapServers: try await kafka.reachableServers()), logger: makeLogger("pushhub.topics"))
            let metadata = try await admin.metadata()
            for broker in metadata.brokers {
                emit("broker \(broker.id) \(broker.host):\(broker.port)")
            }
            for topic in metadata.topics {
                let leaders = topic.partitions.map { "\($0.id):\($0.leader)" }.joined(separator: " ")
                let error = topic.error.map { " error \($0)" } ?? ""
                emit(
                    "topic \(topic.name) partitions \(topic.partitions.count) replicas \(topic.partitions.first?.replicas.count ?? 0) leaders \(leaders)\(error)"
                )
            }
        }
    }
}
