// PushDispatcherMain: the `pushhub-dispatcher` executable: options, the store, Kafka and a ServiceGroup
// around PushDispatcher.

import ArgumentParser
import Foundation
import PushConfiguration
import PushDispatcher
import PushEnvironment
import PushKafka
import PushOps
import PushStore
import ServiceLifecycle

/// `pushhub-dispatcher`: SendRequests from `pushhub.requests` to DeliveryBatches per platform.
@main
struct DispatcherCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pushhub-dispatcher",
        abstract: "Resolve each SendRequest's audience from the store into DeliveryBatches on the platforms' topics.")

    @OptionGroup var kafka: KafkaOptions

    @OptionGroup var operations: OperationsOptions

    @Option(help: "pushhub.yaml, for the hubs this deployment serves (default: $PUSHHUB_CONFIG or ./data/pushhub.yaml).")
    var config: String?

    @Option(help: "The registration store: postgres://… or an SQLite path (default: $PUSHHUB_DATABASE or ./data/pushhub.sqlite).")
    var database: String?

    @Option(help: "Consumer group; dispatchers in one group share the requests' partitions.")
    var group = "pushhub-dispatcher"

    func run() async throws {
        let environment = PushHubEnvironment.current
        let logger = makeLogger("pushhub.dispatcher")
        let tracing = try ProcessTracing.service(serviceName: "pushhub-dispatcher", logger: logger)
        let hubs = try HubsConfiguration.load(from: config ?? environment.configPath)
        let store = try await StoreLocation(database ?? environment.database).open(logger: logger)
        let wiring = try KafkaWiring.make(
            servers: try await kafka.reachableServers(), topics: kafka.topics, ahead: [kafka.topics.results], logger: logger)
        var settings = DispatcherSettings(topics: kafka.topics, hubs: hubs.hubs.map(\.name))
        settings.dedupeWindow = hubs.dispatchDedupeWindow
        let backlog = hubs.backlog ?? BacklogConfiguration()
        settings.waitForWorkers(bound: backlog.bound, group: backlog.workerGroup)
        let dispatcher = try makeDispatcherServices(kafka: wiring, store: store, ledger: store, settings: settings, group: group, logger: logger)
        let operations = operations.application(
            checks: [ReadinessCheck("kafka") { await wiring.producer.isReachable() }, ReadinessCheck("store") { await store.isReachable() }],
            logger: logger)
        // Shut down in reverse: stop dispatching, stop answering, commit and leave the group, flush.
        try await ProcessLifecycle.group(
            (tracing.map { [.init(service: $0)] } ?? []) + [.init(service: wiring.producer)] + dispatcher.consumers.map { .init(service: $0) }
                + [.init(service: operations)] + dispatcher.workers,
            logger: logger
        ).run()
        await store.close()
    }
}
