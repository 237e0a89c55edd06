import Logging
import PushKafka
import PushStore
import ServiceLifecycle

/// The dispatcher's part of a process, in start order: its consumer of `pushhub.requests` (in
/// `group`) and the dispatcher. The producer in `kafka` runs before them, as its maker's service.
public func makeDispatcherServices(
    kafka: KafkaWiring, store: any RegistrationStore, settings: DispatcherSettings, group: String = "pushhub-dispatcher", logger: Logger
) throws -> ProcessPart {
    let consumer = try kafka.consumer(group: group, topics: [settings.topics.requests], logger: logger)
    let dispatcher = Dispatcher(consumer: consumer, producer: kafka.producer, store: store, settings: settings, logger: logger)
    return ProcessPart(consumers: [consumer], workers: [.init(service: dispatcher)])
}
