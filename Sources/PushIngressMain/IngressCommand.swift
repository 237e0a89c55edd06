// PushIngressMain: the `pushhub-ingress` executable: options, the store, Kafka when one is named, and
// a ServiceGroup around PushIngress.

import ArgumentParser
import Foundation
import Hummingbird
import Logging
import NIOCore
import PushConfiguration
import PushEnvironment
import PushIngress
import PushKafka
import PushOps
import PushStore
import ServiceLifecycle

/// `pushhub-ingress`: the hub API and the app-backend API over HTTP.
@main
struct IngressCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pushhub-ingress",
        abstract: "PushHub's HTTP ingress: the hub API (Azure Notification Hubs REST) and the tutorials' app-backend API.")

    @Option(help: "Address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "Port to listen on; 0 picks a free one.")
    var port = 8080

    @Option(help: "pushhub.yaml (default: $PUSHHUB_CONFIG or ./data/pushhub.yaml); a development hub is written there when it does not exist.")
    var config: String?

    @Option(help: "The registration store: postgres://… or an SQLite path (default: $PUSHHUB_DATABASE or ./data/pushhub.sqlite).")
    var database: String?

    @OptionGroup var kafka: KafkaOptions

    @Option(
        help: """
            NIO event loops of the process, which read and write its HTTP connections, served and made (default: \
            $NIO_SINGLETON_GROUP_LOOP_COUNT, else half the cores, at least one). A request's own work runs on Swift's pool.
            """)
    var eventLoops: Int?

    func validate() throws {
        if let eventLoops, !(1...Self.mostEventLoops).contains(eventLoops) {
            throw ValidationError("--event-loops must be between 1 and \(Self.mostEventLoops), not \(eventLoops)")
        }
    }

    static let mostEventLoops = 256

    /// The event loops of the process: those asked for, or half the cores, at least one. The
    /// loops only read, parse and write HTTP; on two cores, one loop beside Swift's two pool
    /// threads made fewer threads hand requests to each other, and a single-user send cost the
    /// ingress 2–11 % less CPU than with a loop per core in four pairs of runs
    /// (docs/benchmarks.md, sixteenth round).
    static func eventLoopCount(requested: Int?, cores: Int) -> Int {
        requested ?? max(1, cores / 2)
    }

    func run() async throws {
        // Before anything uses NIO's shared event loops (it traps once they exist), and once.
        // NIO's own variable stands when the option is not given.
        if eventLoops != nil || ProcessInfo.processInfo.environment["NIO_SINGLETON_GROUP_LOOP_COUNT"] == nil {
            NIOSingletons.groupLoopCountSuggestion = Self.eventLoopCount(requested: eventLoops, cores: System.coreCount)
        }
        let environment = PushHubEnvironment.current
        let logger = makeLogger("pushhub.ingress")
        let tracing = try ProcessTracing.service(serviceName: "pushhub-ingress", logger: logger)
        let configPath = config ?? environment.configPath
        let location = StoreLocation(database ?? environment.database)

        var created: HubsConfiguration?
        let hubs = try HubsConfiguration.loadOrCreateDevelopment(at: configPath) { created = $0 }
        // The development hub's keys are printed at every start (a file of real hubs' keys is
        // never printed): a newcomer who lost the first start's output still finds them.
        let developmentHubs = created ?? (hubs.hubs.count == 1 && hubs.hubs[0].name == "pushhub-dev" ? hubs : nil)
        let createdHubs = developmentHubs
        if createdHubs != nil { logger.notice("development hub created", metadata: ["pushhub.config": "\(configPath)"]) }
        let store = try await location.open(logger: logger)
        logger.info("registration store open", metadata: ["pushhub.store": "\(location)"])

        var configuration = IngressConfiguration(hubs: hubs)
        configuration.jobsDirectory = (hubs.jobs ?? JobsConfiguration()).resolvedDirectory(configurationPath: configPath)
        configuration.host = host
        configuration.port = port
        let host = self.host
        let wiring =
            kafka.isConfigured
            ? try KafkaWiring.make(
                servers: try kafka.servers(), topics: kafka.topics, ahead: [kafka.topics.requests, kafka.topics.results], logger: logger) : nil
        let services = try makeIngressServices(configuration: configuration, store: store, kafka: wiring, logger: logger) { boundPort in
            let endpoint = "\(host):\(boundPort)"
            var lines = ["PUSHHUB_URL=http://\(endpoint)"]
            if let createdHubs {
                for hub in createdHubs.hubs {
                    lines.append("PUSHHUB_HUB=\(hub.name)")
                    for rule in hub.sasRules {
                        lines.append("\(rule.name): \(HubsConfiguration.connectionString(endpoint: endpoint, rule: rule))")
                    }
                }
            }
            // Straight to the file descriptor: scripts read these lines as they come.
            FileHandle.standardOutput.write(Data((lines.joined(separator: "\n") + "\n").utf8))
        }
        try await ProcessLifecycle.group(
            (tracing.map { [.init(service: $0)] } ?? []) + (wiring.map { [.init(service: $0.producer)] } ?? []) + services, logger: logger
        ).run()
        await store.close()
    }
}
