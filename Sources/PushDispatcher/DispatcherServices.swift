import Logging
import PushKafka
import PushModel
import PushStore
import ServiceLifecycle

/// The dispatcher's part of a process, in start order: its consumer of `pushhub.requests` (in
/// `group`) and the dispatcher. The producer in `kafka` runs before them, as its maker's service.
/// `ledger` remembers the notification ids dispatched, so a SendRequest produced twice is
/// dispatched once (`settings.dedupeWindow`); nil remembers none.
public func makeDispatcherServices(
    kafka: KafkaWiring, store: any RegistrationStore, ledger: (any IdempotencyStore)? = nil, settings: DispatcherSettings,
    group: String = "pushhub-dispatcher", logger: Logger
) throws -> ProcessPart {
    let consumer = try kafka.consumer(group: group, topics: [settings.topics.requests], logger: logger)
    let backlog = try settings.deliveryBacklog.map { backlogSettings in
        try ConsumerBacklog(
            servers: kafka.servers,
            watches: Platform.allCases.map {
                ConsumerBacklog.Watch(topic: settings.topics.deliveries($0), group: settings.workerGroups[$0] ?? $0.workerGroup)
            },
            settings: backlogSettings, logger: logger)
    }
    let dispatcher = Dispatcher(
        consumer: consumer, producer: kafka.producer, store: store, ledger: ledger, settings: settings, backlog: backlog, logger: logger)
    return ProcessPart(consumers: [consumer], workers: [.init(service: dispatcher)])
}
