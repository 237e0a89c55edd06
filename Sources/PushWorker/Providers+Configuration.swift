import Foundation
import PushModel
import PushProviders
import PushKafka
import Logging
import ServiceLifecycle
import PushConfiguration

/// The provider of one platform, with the credentials of every hub that has some.
public enum ProviderFactory {
    public static func make(
        _ platform: Platform, hubs: HubsConfiguration, http: PNSHTTPClient, now: @escaping @Sendable () -> Date = { Date() }
    ) throws -> any PushProvider {
        switch platform {
        case .apns:
            var credentials: [String: APNsCredentials] = [:]
            for hub in hubs.hubs {
                guard let apns = hub.credentials.apns else { continue }
                let endpoint = apns.endpoint ?? (apns.environment == .production ? APNsCredentials.production : APNsCredentials.sandbox)
                credentials[hub.name] = APNsCredentials(
                    keyId: apns.keyId, teamId: apns.teamId, bundleId: apns.bundleId, privateKeyPEM: apns.privateKey, endpoint: endpoint)
            }
            return try APNsProvider(hubs: credentials, http: http, now: now)
        case .fcm:
            var credentials: [String: FCMCredentials] = [:]
            for hub in hubs.hubs {
                guard let fcm = hub.credentials.fcm else { continue }
                credentials[hub.name] = FCMCredentials(
                    projectId: fcm.projectId, clientEmail: fcm.clientEmail, privateKeyPEM: fcm.privateKey, tokenURI: fcm.tokenURI,
                    endpoint: fcm.endpoint ?? FCMCredentials.production, ratePerMinute: fcm.ratePerMinute ?? FCMCredentials.defaultRatePerMinute)
            }
            return try FCMProvider(hubs: credentials, http: http, now: now)
        case .wns:
            var credentials: [String: WNSCredentials] = [:]
            for hub in hubs.hubs {
                guard let wns = hub.credentials.wns else { continue }
                credentials[hub.name] = WNSCredentials(packageSid: wns.packageSid, secret: wns.secret, tokenURI: wns.tokenURI)
            }
            return WNSProvider(hubs: credentials, endpoints: endpoints(hubs), http: http, now: now)
        case .webpush:
            var keys: [String: VAPID] = [:]
            for hub in hubs.hubs {
                guard let webPush = hub.credentials.webPush, let privateKey = Base64URL.decode(webPush.privateKey) else { continue }
                keys[hub.name] = try VAPID(subject: webPush.subject, privateKey: privateKey)
            }
            return WebPushProvider(hubs: keys, endpoints: endpoints(hubs), http: http)
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
) throws -> [ServiceGroupConfiguration.ServiceConfiguration] {
    let name = "pushhub-\(settings.platform.rawValue)-worker"
    let consumer = try kafka.consumer(group: group ?? name, clientID: name, topics: [settings.topics.deliveries(settings.platform)], logger: logger)
    let worker = DeliveryWorker(
        consumer: consumer, producer: kafka.producer, provider: try provider ?? ProviderFactory.make(settings.platform, hubs: hubs, http: http),
        settings: settings, logger: logger)
    return [.init(service: consumer), .init(service: worker)]
}
