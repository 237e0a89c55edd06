// PushHubCLI: the `pushhub` command (dev, kafka-dev, topics, users, token, send, sim, bench, load, installations):
// parses options, runs services.

import ArgumentParser
import PushEnvironment

@main
struct PushHubCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pushhub",
        abstract: "PushHub: a self-hosted notification hub on Kafka.",
        version: PushHubVersion.line("pushhub"),
        subcommands: [
            KafkaDevCommand.self, TopicsCommand.self, SendCommand.self, UsersCommand.self, TokenCommand.self, BenchCommand.self, SimCommand.self,
            DevCommand.self, LoadCommand.self, InstallationsCommand.self, ImportCommand.self, ExportCommand.self,
        ])
}
