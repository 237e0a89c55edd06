import ArgumentParser
import Crypto
import Foundation
import Logging
import PushConfiguration
import PushDispatcher
import PushEnvironment
import PushIngress
import PushKafka
import PushModel
import PushOps
import PushProviders
import PushSimulator
import PushStore
import PushWorker
import ServiceLifecycle

/// `pushhub dev`: the whole stack in one process on the embedded defaults.
struct DevCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dev",
        abstract: "Run all of PushHub in one process: embedded Kafka, SQLite, ingress, dispatcher, the four workers and the PNS simulators.",
        discussion: """
            Prints, once each and as soon as the stack is ready: PUSHHUB_URL=, PUSHHUB_HUB=, \
            PUSHHUB_CONNECTION_STRING=, PUSHHUB_LISTEN_CONNECTION_STRING=, PUSHHUB_DEMO_USER=NAME:PASSWORD \
            and PUSHHUB_KAFKA=. State lives in --data-dir (pushhub.yaml, pushhub.sqlite, the simulator's CA, \
            the demo user's password). Kafka is in memory unless --kafka names a cluster. Ctrl-C or \
            SIGTERM stops everything gracefully.

            Examples:
              pushhub dev
              pushhub dev --port 0 --data-dir /tmp/ph | tee dev.log
              pushhub dev --kafka 127.0.0.1:9092
            """)

    @Option(help: "HTTP port of the ingress; 0 picks a free one.")
    var port = 8080

    @Option(help: "Where PushHub keeps its files.")
    var dataDir = "data"

    @Option(help: "Partitions of each topic on the embedded cluster.")
    var partitions = 4

    @OptionGroup var kafka: KafkaOptions

    static let demoUser = "demo"

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be 0 to 65535") }
        guard (1...64).contains(partitions) else { throw ValidationError("--partitions must be 1 to 64") }
    }

    func run() async throws {
        let logger = makeLogger("pushhub.dev")
        let tracing = try ProcessTracing.service(serviceName: "pushhub-dev", logger: logger)
        let data = URL(fileURLWithPath: dataDir)
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)

        // Kafka: the embedded cluster, or the one named.
        var cluster: EmbeddedKafkaCluster?
        let servers: [String]
        let topics = kafka.topics
        if kafka.isConfigured {
            // A PUSHHUB_KAFKA left from an earlier run names a cluster that went away with it.
            servers = try await kafka.reachableServers()
        } else {
            let embedded = try EmbeddedKafkaCluster.start(brokers: 1, logger: logger)
            for topic in topics.all { try embedded.createTopic(topic, partitions: partitions) }
            cluster = embedded
            servers = embedded.bootstrapServers
        }

        // The development hub, with simulated credentials pointed at the simulators.
        let configPath = data.appendingPathComponent("pushhub.yaml").path
        var hubs = try HubsConfiguration.loadOrCreateDevelopment(at: configPath) { _ in
            logger.notice("development hub created", metadata: ["pushhub.config": "\(configPath)"])
        }
        let hubName = hubs.appBackend?.hub ?? hubs.hubs[0].name
        guard let hubIndex = hubs.hubs.firstIndex(where: { $0.name == hubName }) else {
            throw CommandFailure(description: "\(configPath): no hub \(hubName)")
        }
        try hubs.attachSimulatedCredentials(to: [hubName])

        let certificates = try SimulatorCertificates.generate()
        let caPath = data.appendingPathComponent("sim-ca.pem").path
        try certificates.caPEM.write(toFile: caPath, atomically: true, encoding: .utf8)
        var simulatorSettings = SimulatorSettings(hubs: hubs, certificates: certificates)
        // Off the hub's event loops, as a real push service is: on them, the hub's API waited
        // behind the stand-in's answers while a backlog was delivered (up to 11.6 s a registration).
        // As many as the cores: with one on two cores, the debug build delivered less (383
        // against 543 a second in the README's mixed run, three runs each).
        simulatorSettings.eventLoopThreads = max(1, ProcessInfo.processInfo.activeProcessorCount)
        let simulator = try PNSSimulator(settings: simulatorSettings, logger: logger)
        // The simulators stop last, after the stack: a group of their own, without signals.
        let simulatorGroup = ProcessLifecycle.group([.init(service: simulator)], signals: false, logger: logger)
        let simulatorTask = Task { try await simulatorGroup.run() }
        // The stack, from the simulators' addresses to its end. Whether it ends or fails to
        // start, the simulators and the embedded cluster stop after it.
        func stack() async throws {
            let (apnsURL, simURL) = try await simulator.ready()
            hubs = hubs.pointed(at: apnsURL, http: simURL, hubs: [hubName])
            try hubs.write(to: configPath)

            // The store and the demo user, and the client of the push services.
            let store = try await StoreLocation(data.appendingPathComponent("pushhub.sqlite").path).open(logger: logger)
            let http = PNSHTTPClient(trustRootsFile: caPath)
            // Both shut down however the stack ends: a client left running is a fault when it goes.
            do {
                let password = try Self.demoPassword(at: data.appendingPathComponent("demo-user.secret").path)
                try await store.setUser(name: Self.demoUser, passwordHash: hashPassword(password))

                // One producer for everything; each part makes its consumers.
                let wiring = try KafkaWiring.make(servers: servers, topics: topics, ahead: [topics.requests, topics.results], logger: logger)
                var dispatcherSettings = DispatcherSettings(topics: topics, hubs: hubs.hubs.map(\.name))
                dispatcherSettings.dedupeWindow = hubs.dispatchDedupeWindow
                let backlog = hubs.backlog ?? BacklogConfiguration()
                dispatcherSettings.waitForWorkers(bound: backlog.bound, group: backlog.workerGroup)
                let dispatcher = try makeDispatcherServices(kafka: wiring, store: store, ledger: store, settings: dispatcherSettings, logger: logger)
                // The platforms' workers stop together, before their consumers: stopped one after
                // another, the last went on taking batches while the first finished its own.
                var consumers: [ServiceGroupConfiguration.ServiceConfiguration] = []
                var workers: [any Service] = []
                for platform in Platform.allCases {
                    let part = try makeWorkerServices(
                        settings: WorkerSettings(platform: platform, topics: topics), hubs: hubs, kafka: wiring, http: http, logger: logger)
                    consumers += part.consumers.map { .init(service: $0) }
                    workers += part.workers.map(\.service)
                }

                var ingress = IngressConfiguration(hubs: hubs)
                ingress.jobsDirectory = (hubs.jobs ?? JobsConfiguration()).resolvedDirectory(configurationPath: configPath)
                ingress.port = port
                ingress.embeddedKafka = cluster != nil
                let hub = hubs.hubs[hubIndex]
                let banner = Banner(
                    hub: hub, demo: "\(Self.demoUser):\(password)", kafka: servers, kafkaSource: kafka.source.map { "from \($0)" },
                    simulator: (apnsURL, simURL))
                let ingressServices = try makeIngressServices(
                    configuration: ingress, store: store, kafka: wiring, logger: logger, onListening: { banner.print(port: $0) },
                    onRecovered: { count in
                        emit("PushHub recovered \(count) unfinished send(s) from the store and published them again.")
                    })

                // Started in this order, stopped in reverse: the workers hand back and finish first (all
                // at once), their consumers commit and leave, then the dispatcher and its consumer, the
                // ingress (outcomes last), and the producer flushes.
                let group = ProcessLifecycle.group(
                    (tracing.map { [.init(service: $0)] } ?? []) + [.init(service: wiring.producer)] + ingressServices + dispatcher.services
                        + consumers + [.init(service: ConcurrentServices(workers))],
                    logger: logger)
                try await group.run()
            } catch {
                await http.shutdown()
                await store.close()
                throw error
            }
            await http.shutdown()
            await store.close()
        }
        let ended: Result<Void, any Error>
        do {
            try await stack()
            ended = .success(())
        } catch {
            ended = .failure(error)
        }
        await simulatorGroup.triggerGracefulShutdown()
        _ = try? await simulatorTask.value
        cluster?.shutdown()
        try ended.get()
        emit("PushHub stopped.")
    }

    /// The demo user's password: read from `path`, or made and written there (owner-only).
    static func demoPassword(at path: String) throws -> String {
        if let saved = try? String(contentsOfFile: path, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines), saved.count >= 12 {
            return saved
        }
        let password = Base64URL.encode(Data(SymmetricKey(size: .bits128).withUnsafeBytes { Array($0) }))
        guard FileManager.default.createFile(atPath: path, contents: Data(password.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw CommandFailure(description: "\(path): could not be written")
        }
        return password
    }

    /// What `pushhub dev` prints once the ingress listens: friendly text, then the lines scripts read.
    struct Banner: Sendable {
        let hub: HubsConfiguration.Hub
        let demo: String
        let kafka: [String]
        /// Where the Kafka cluster was named; nil for the embedded one.
        let kafkaSource: String?
        let simulator: (apns: String, http: String)

        func print(port: Int) {
            let endpoint = "127.0.0.1:\(port)"
            let full = hub.sasRules.first { $0.rights.contains(.manage) } ?? hub.sasRules[0]
            let listen = hub.sasRules.first { $0.rights == [.listen] } ?? full
            emit(
                """
                PushHub is running: ingress at http://\(endpoint), hub \(hub.name), \(kafkaSource == nil ? "embedded defaults" : "SQLite and simulators embedded").
                Kafka: \(kafkaSource.map { "\(kafka.joined(separator: ",")) (\($0))" } ?? "embedded, in this process, at \(kafka.joined(separator: ",")) (memory only)").
                Console: http://\(endpoint)/console (sign in with hub \(hub.name) and PUSHHUB_CONNECTION_STRING below).
                PNS simulators: every service over HTTP/2 and TLS at \(simulator.apns), and FCM/WNS/Web Push over plain HTTP/1.1 at \(simulator.http) (see /sim/stats and /sim/deliveries?handle= there).
                Stop with Ctrl-C.
                PUSHHUB_URL=http://\(endpoint)
                PUSHHUB_HUB=\(hub.name)
                PUSHHUB_CONNECTION_STRING=\(HubsConfiguration.connectionString(endpoint: endpoint, rule: full))
                PUSHHUB_LISTEN_CONNECTION_STRING=\(HubsConfiguration.connectionString(endpoint: endpoint, rule: listen))
                PUSHHUB_DEMO_USER=\(demo)
                PUSHHUB_KAFKA=\(kafka.joined(separator: ","))
                PUSHHUB_SIM_URL=\(simulator.http)
                PUSHHUB_SIM_APNS_URL=\(simulator.apns)
                """)
        }
    }
}
