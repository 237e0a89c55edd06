import Foundation
import Logging
import PushConfiguration
import PushKafka
import PushModel
import PushOps
import PushProviders
import PushStore
import ServiceLifecycle

/// The ingress's part of a process, in start order: with Kafka, its results consumer, the HTTP
/// application, the outcome recorder, the scheduled-send releaser and the recovery of stalled
/// sends; without, the HTTP application only (registrations, no messages API). The producer in
/// `kafka` runs before them, as its maker's service. A ServiceGroup shuts them down in
/// reverse: stop recovering, recording and releasing, stop taking requests, close the
/// consumer. `onRecovered` hears how many unfinished sends the first recovery check published
/// again.
public func makeIngressServices(
    configuration: IngressConfiguration, store: SQLRegistrationStore, kafka: KafkaWiring?, logger: Logger,
    onListening: @escaping @Sendable (Int) -> Void, onRecovered: @escaping @Sendable (Int) -> Void = { _ in }
) throws -> [ServiceGroupConfiguration.ServiceConfiguration] {
    let storeCheck = ReadinessCheck("store") { await store.isReachable() }
    let stores = IngressStores(store)
    // Import and export jobs run beside the API, with or without Kafka.
    let jobSignal = JobSignal()
    let jobs: [ServiceGroupConfiguration.ServiceConfiguration] =
        configuration.jobFiles.map { files in
            [.init(service: JobRunner(store: store, files: files, hubs: configuration.hubs, signal: jobSignal, logger: logger))]
        } ?? []
    guard let kafka else {
        logger.notice("no Kafka configured (--kafka or PUSHHUB_KAFKA): the messages API is off")
        return [
            .init(
                service: try buildIngressApplication(
                    configuration: configuration, stores: stores, readiness: [storeCheck], jobSignal: jobSignal, logger: logger,
                    onListening: onListening))
        ] + jobs
    }
    let producer = kafka.producer
    let results = try kafka.consumer(group: "pushhub-ingress-outcomes", topics: [kafka.topics.results], logger: logger)
    let backlogConfiguration = configuration.hubs.backlog ?? BacklogConfiguration()
    let backlog = try backlogConfiguration.bound.map { bytes in
        var settings = ConsumerBacklog.Settings()
        settings.boundPerPartition = bytes
        // The ingress only routes by it, so a reading a second does: at every 200 ms, the
        // readings cost the embedded cluster about 23 CPU-µs a send at 2,000 sends/s.
        settings.refreshInterval = .seconds(1)
        return try ConsumerBacklog(
            servers: kafka.servers,
            watches: Platform.allCases.map { ConsumerBacklog.Watch(topic: kafka.topics.deliveries($0), group: backlogConfiguration.workerGroup($0)) },
            settings: settings, logger: logger)
    }
    let publisher = KafkaNotificationPublisher(producer: producer, topics: kafka.topics, backlog: backlog, servers: kafka.servers, logger: logger)
    let app = try buildIngressApplication(
        configuration: configuration, stores: stores, publisher: publisher,
        readiness: [storeCheck, ReadinessCheck("kafka") { await producer.isReachable() }], jobSignal: jobSignal, logger: logger,
        onListening: onListening)
    // A consumer and a sender per webhook, each group with its own progress.
    var webhooks: [ServiceGroupConfiguration.ServiceConfiguration] = []
    for hub in configuration.hubs.hubs {
        for webhook in hub.webhooks ?? [] {
            let consumer = try kafka.consumer(
                group: WebhookSender.group(hub: hub.name, url: webhook.url), topics: [kafka.topics.results], logger: logger, part: WebhookSender.tune)
            let topics = kafka.topics
            let sender = WebhookSender(
                consumer: consumer, hub: hub.name, webhook: webhook, http: PNSHTTPClient(connections: 1, requestTimeout: .seconds(30)), logger: logger
            ) { body, reason in
                try await WebhookSender.deadLetter(body, reason: reason, hub: hub.name, topics: topics, producer: producer, logger: logger)
            }
            webhooks += [.init(service: consumer), .init(service: sender)]
        }
    }
    return webhooks + [
        .init(service: results), .init(service: app),
        .init(service: OutcomeRecorder(consumer: results, store: store, producer: producer, topics: kafka.topics, logger: logger)),
        .init(service: ScheduledReleaser(store: store, publisher: publisher, recovery: configuration.recovery, logger: logger)),
        .init(service: SendRecovery(store: store, publisher: publisher, settings: configuration.recovery, logger: logger, onStart: onRecovered)),
    ] + jobs
}
