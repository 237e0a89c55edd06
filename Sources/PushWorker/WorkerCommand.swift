import ArgumentParser
import Foundation
import PushConfiguration
import PushEnvironment
import PushKafka
import PushModel
import PushOps
import PushProviders
import ServiceLifecycle

/// The command line of `pushhub-apns-worker`, `-fcm-worker`, `-wns-worker` and `-webpush-worker`.
public struct WorkerOptions: ParsableArguments {
    @OptionGroup public var kafka: KafkaOptions

    @OptionGroup public var operations: OperationsOptions

    @Option(help: "pushhub.yaml, with the hubs' PNS credentials (default: $PUSHHUB_CONFIG or ./data/pushhub.yaml).")
    public var config: String?

    @Option(help: "Consumer group; workers of one platform in one group share its partitions (default: pushhub-<pns>-worker).")
    public var group: String?

    @Option(help: "A PEM CA file to trust besides the system's, e.g. pushhub sim's (default: $PUSHHUB_PNS_CA).")
    public var trustCA: String?

    @Option(help: "Targets being delivered at most; about as many again may wait for Kafka to take their results. Intake waits while either is full.")
    public var window = 2_000

    @Option(help: "HTTP/2 connections per PNS host (APNs, FCM), each carrying many streams.")
    public var connections = 4

    @Option(help: "HTTP/1.1 connections per PNS host at most (WNS, Web Push).")
    public var http1Connections = 16

    /// At 400 (100 streams on each of the four connections), a stream that ended left its
    /// place empty for a round trip through the worker's task (slots freed, the task woken,
    /// the next requests written); with 800 open, the places the task has not filled again yet
    /// are fewer of them (0.66× → 0.71× of h2load, docs/benchmarks.md, nineteenth round). A
    /// server that allows fewer streams has the rest wait in their connection, which opens one
    /// as a stream ends.
    @Option(help: "PNS requests in flight at most.")
    public var maxRequests = 800

    public init() {}

    /// Runs the worker for `platform` until SIGTERM or SIGINT.
    public func run(_ platform: Platform) async throws {
        let environment = PushHubEnvironment.current
        let logger = makeLogger("pushhub.\(platform.rawValue)-worker")
        let tracing = try ProcessTracing.service(serviceName: "pushhub-\(platform.rawValue)-worker", logger: logger)
        let hubs = try HubsConfiguration.load(from: config ?? environment.configPath)
        let servers = try await kafka.reachableServers()
        let http = PNSHTTPClient(
            trustRootsFile: trustCA ?? environment.pnsTrustRoots, connections: connections, connectionsPerHost: http1Connections,
            maximumInFlight: maxRequests)
        // Its results and its own topic (a retry's next attempt); a dead letter's topic when
        // one comes.
        let wiring = try KafkaWiring.make(
            servers: servers, topics: kafka.topics, ahead: [kafka.topics.results, kafka.topics.deliveries(platform)], logger: logger)
        var settings = WorkerSettings(platform: platform, topics: kafka.topics)
        settings.window = window
        let worker = try makeWorkerServices(settings: settings, hubs: hubs, kafka: wiring, http: http, group: group, logger: logger)
        logger.info("worker starting", metadata: ["pushhub.platform": "\(platform.rawValue)", "pushhub.hubs": "\(hubs.hubs.count)"])
        // Shut down in reverse: finish or hand back in-flight targets, commit and leave the group, flush.
        let consumers = worker.consumers
        let operations = operations.application(
            checks: [ReadinessCheck("kafka") { await consumers.allReachable() }], logger: logger)
        try await ProcessLifecycle.group(
            (tracing.map { [.init(service: $0)] } ?? []) + [.init(service: wiring.producer)] + worker.consumers.map { .init(service: $0) }
                + [.init(service: operations)] + worker.workers,
            logger: logger
        ).run()
        await http.shutdown()
    }
}

/// Names the platform of a worker executable.
public protocol WorkerPlatform: Sendable {
    static var platform: Platform { get }
}

/// `pushhub-<pns>-worker`: delivers `pushhub.deliveries.<pns>` and publishes the results.
public struct WorkerCommand<Target: WorkerPlatform>: AsyncParsableCommand {
    public static var configuration: CommandConfiguration {
        let name = Target.platform.rawValue
        return CommandConfiguration(
            commandName: "pushhub-\(name)-worker", abstract: "Deliver the batches of pushhub.deliveries.\(name) and publish their results.")
    }

    @OptionGroup var options: WorkerOptions

    public init() {}

    public func run() async throws { try await options.run(Target.platform) }

    /// Parses the command line and runs. (ArgumentParser's own `main` does not see that a
    /// generic root command is asynchronous.)
    public static func start() async {
        do {
            let command = try parse()
            try await command.run()
        } catch {
            exit(withError: error)
        }
    }
}
