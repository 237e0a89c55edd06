import Foundation
import Logging
import PushConfiguration
import PushKafka
import PushModel
import PushProviders
import ServiceLifecycle

/// The provider of one platform, with the credentials of every hub that has some.
public enum ProviderFactory {
    public static func make(
        _ platform: Platform, hubs: HubsConfiguration, http: any PNSTransport, now: @escaping @Sendable () -> Date = { Date() }
    ) throws -> any PushProvider {
        switch platform {
        case .apns:
            return try APNsProvider(hubs: hubs.hubs.reduce(into: [:]) { $0[$1.name] = $1.credentials.apns }, transport: http, now: now)
        case .fcm:
            return try FCMProvider(hubs: hubs.hubs.reduce(into: [:]) { $0[$1.name] = $1.credentials.fcm }, transport: http, now: now)
        case .wns:
            return WNSProvider(
                hubs: hubs.hubs.reduce(into: [:]) { $0[$1.name] = $1.credentials.wns }, endpoints: endpoints(hubs), transport: http, now: now)
        case .webpush:
            return try WebPushProvider(
                credentials: hubs.hubs.reduce(into: [:]) { $0[$1.name] = $1.credentials.webPush }, endpoints: endpoints(hubs), transport: http)
        case .hms:
            return HMSProvider(HMSService(), hubs: hubs.hubs.reduce(into: [:]) { $0[$1.name] = $1.credentials.hms }, transport: http, now: now)
        case .adm:
            return ADMProvider(ADMService(), hubs: hubs.hubs.reduce(into: [:]) { $0[$1.name] = $1.credentials.adm }, transport: http, now: now)
        case .xiaomi:
            return XiaomiProvider(
                XiaomiService(), hubs: hubs.hubs.reduce(into: [:]) { $0[$1.name] = $1.credentials.xiaomi }, transport: http, now: now)
        case .baidu:
            return BaiduProvider(BaiduService(), hubs: hubs.hubs.reduce(into: [:]) { $0[$1.name] = $1.credentials.baidu }, transport: http, now: now)
        }
    }

    static func endpoints(_ hubs: HubsConfiguration) -> [String: EndpointPolicy] {
        Dictionary(hubs.hubs.map { ($0.name, $0.endpointPolicy) }) { first, _ in first }
    }
}

/// One platform's worker as part of a process, in start order: its consumer of
/// `pushhub.deliveries.<pns>` (group `pushhub-<pns>-worker` unless named) and the worker, with
/// the hubs' credentials (or `provider`). The producer in `kafka` runs before them, as its
/// maker's service.
public func makeWorkerServices(
    settings: WorkerSettings, hubs: HubsConfiguration, kafka: KafkaWiring, http: PNSHTTPClient, group: String? = nil,
    provider: (any PushProvider)? = nil, logger: Logger
) throws -> ProcessPart {
    let name = settings.platform.workerGroup
    // A delivery record is a batch of up to 500 targets (a broadcast's, about 60 kB) or of
    // one (a single-user send's): records are taken from librdkafka up to 1 MiB at a time,
    // and it keeps 4 MiB ahead. 500 records a fetch held hundreds of full batches in the
    // worker beside librdkafka's queue, 22 MB at the APNs worker's peak in a broadcast;
    // 8 a fetch cost single-user sends 100 µs of CPU each across the workers and Kafka.
    let consumer = try kafka.consumer(group: group ?? name, clientID: name, topics: [settings.topics.deliveries(settings.platform)], logger: logger) {
        $0.fetchBytes = 1 << 20
        $0.prefetchBytes = 4 << 20
        $0.takesWhatIsThereUnderLoad = true
    }
    let worker = DeliveryWorker(
        consumer: consumer, producer: kafka.producer, provider: try provider ?? ProviderFactory.make(settings.platform, hubs: hubs, http: http),
        settings: settings, logger: logger)
    return ProcessPart(consumers: [consumer], workers: [.init(service: worker)])
}
