import Foundation
import Logging
import PushConfiguration
import PushIngress
import PushModel
import PushProviders
import PushSimulator
import PushWorker
import ServiceLifecycle

/// Quiet unless `PUSHHUB_TEST_LOG` names a level.
let testLogger: Logger = {
    guard let level = ProcessInfo.processInfo.environment["PUSHHUB_TEST_LOG"].flatMap(Logger.Level.init(rawValue:)) else {
        return Logger(label: "pushhub.tests") { _ in SwiftLogNoOpLogHandler() }
    }
    var logger = Logger(label: "pushhub.tests") { StreamLogHandler.standardError(label: $0) }
    logger.logLevel = level
    return logger
}()

/// `pushhub sim` in process, with one hub `myhub` whose credentials for all four platforms
/// point at it, and an HTTP client that trusts its CA.
final class SimulatorFixture: Sendable {
    let simulator: PNSSimulator
    let group: ServiceGroup
    let task: Task<Void, any Error>
    let apns: String
    let http: String
    let caFile: String
    /// The hub configuration the workers use (endpoints are the simulator's).
    let hubs: HubsConfiguration
    let client: PNSHTTPClient

    static func start(
        faults: SimulatorFaults = SimulatorFaults(), extraHubs: [HubsConfiguration.Hub] = [], replacing previous: SimulatorFixture? = nil
    ) async throws -> SimulatorFixture {
        // Keys first (the simulator checks against them), endpoints once it listens. A
        // replacement keeps its predecessor's keys, certificates and APNs port.
        let placeholder = try HubsConfiguration.Credentials.simulated(apns: "https://placeholder", http: "http://placeholder", hub: "myhub")
        let hubs = previous?.hubs ?? HubsConfiguration(hubs: [.init(name: "myhub", sasRules: [], credentials: placeholder)] + extraHubs)
        let certificates = try previous?.certificates ?? SimulatorCertificates.generate()
        var settings = SimulatorSettings(hubs: hubs, certificates: certificates)
        settings.faults = faults
        if let previous, let port = URL(string: previous.apns)?.port { settings.apnsPort = port }
        let simulator = try PNSSimulator(settings: settings, logger: testLogger)
        let group = ServiceGroup(configuration: .init(services: [.init(service: simulator)], logger: testLogger))
        let task = Task { try await group.run() }
        let (apns, http) = try await simulator.ready()
        let caFile = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-sim-ca-\(UUID().uuidString).pem").path
        try certificates.caPEM.write(toFile: caFile, atomically: true, encoding: .utf8)
        return SimulatorFixture(
            simulator: simulator, group: group, task: task, apns: apns, http: http, caFile: caFile, hubs: hubs.pointed(at: apns, http: http),
            certificates: certificates)
    }

    let certificates: SimulatorCertificates

    init(
        simulator: PNSSimulator, group: ServiceGroup, task: Task<Void, any Error>, apns: String, http: String, caFile: String,
        hubs: HubsConfiguration,
        certificates: SimulatorCertificates
    ) {
        self.certificates = certificates
        self.simulator = simulator
        self.group = group
        self.task = task
        self.apns = apns
        self.http = http
        self.caFile = caFile
        self.hubs = hubs
        // A loaded test machine can keep a pooled connection waiting past the 5 s default.
        client = PNSHTTPClient(trustRootsFile: caFile, connectTimeout: .seconds(30))
    }

    func provider(_ platform: Platform, now: @escaping @Sendable () -> Date = { Date() }) throws -> any PushProvider {
        try ProviderFactory.make(platform, hubs: hubs, http: client, now: now)
    }

    func webPushEndpoint(_ id: String) -> String { SimulatedSubscription(id: id).endpoint(base: http) }

    /// `GET /sim/<path>` as JSON.
    func get(_ path: String) async throws -> Any {
        let response = try await client.send(.GET, "\(http)/sim/\(path)", headers: [], body: nil)
        return try JSONSerialization.jsonObject(with: response.body)
    }

    /// `POST /sim/faults`: the simulator's own control route.
    func setFaults(_ faults: SimulatorFaults) async throws {
        let response = try await client.send(
            .POST, "\(http)/sim/faults", headers: [("content-type", "application/json")], body: try JSONEncoder().encode(faults))
        guard response.status == 200 else { throw PipelineError(description: "POST /sim/faults: \(response.status)") }
    }

    /// `POST /sim/revoke-tokens`: FCM and WNS access tokens issued so far stop working.
    func revokeTokens() async throws {
        let response = try await client.send(.POST, "\(http)/sim/revoke-tokens", headers: [], body: nil)
        guard response.status == 200 else { throw PipelineError(description: "POST /sim/revoke-tokens: \(response.status)") }
    }

    func deliveries(_ handle: String) async throws -> [[String: Any]] {
        let encoded = handle.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? handle
        return try await get("deliveries?handle=\(encoded)") as? [[String: Any]] ?? []
    }

    func stats(_ platform: Platform) async throws -> [String: Any] {
        (try await get("stats") as? [String: Any])?[platform.rawValue] as? [String: Any] ?? [:]
    }

    func stop() async {
        await client.shutdown()
        await group.triggerGracefulShutdown()
        _ = try? await task.value
        try? FileManager.default.removeItem(atPath: caFile)
    }
}
