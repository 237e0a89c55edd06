import ArgumentParser
import Foundation
import PushConfiguration
import PushEnvironment
import PushIngress
import PushModel
import PushOps
import PushProviders
import PushSimulator
import ServiceLifecycle

/// `pushhub sim`: the PNS simulators on loopback.
struct SimCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sim",
        abstract: "Simulate APNs (HTTP/2, TLS), FCM v1, WNS, Web Push, Huawei Push Kit, ADM, Xiaomi and Baidu, with fault injection, until SIGTERM.",
        discussion: """
            Requests are checked against the credentials in pushhub.yaml. With --attach HUB, the hub \
            gets simulated credentials for all four platforms (when it has none) and its endpoints are \
            pointed at this simulator, in the file, so workers started afterwards deliver here. Prints \
            PUSHHUB_SIM_APNS_URL=, PUSHHUB_SIM_URL= and PUSHHUB_PNS_CA= (the CA the workers must trust) \
            once it listens. GET /sim/stats and /sim/deliveries?handle= report; POST /sim/faults changes \
            the faults.

            Examples:
              pushhub sim --attach pushhub-dev
              pushhub sim --attach pushhub-dev --dead-handles 'dead*' --throttle-rate 0.1 --latency-ms 20
            """)

    @Option(help: "pushhub.yaml (default: $PUSHHUB_CONFIG or ./data/pushhub.yaml; a development hub is written when it is missing).")
    var config: String?

    @Option(help: "A hub to give simulated credentials and point at this simulator (repeatable).")
    var attach: [String] = []

    @Option(help: "Address to listen on; loopback unless --listen-anywhere.")
    var host = "127.0.0.1"

    @Flag(help: "Allow a non-loopback --host, for an isolated network such as docker-compose's. Never on a reachable network.")
    var listenAnywhere = false

    @Option(help: "Extra DNS names for the APNs certificate (repeatable), e.g. the compose service name.")
    var tlsName: [String] = []

    @Option(help: "Port of every service over HTTP/2 and TLS (APNs, FCM, WNS, Web Push, the token endpoints); 0 picks a free one.")
    var apnsPort = 0

    @Option(help: "Port of FCM, WNS, Web Push, the token endpoints and /sim/… over plain HTTP/1.1; 0 picks a free one.")
    var port = 0

    @Option(
        help:
            "Handles whose deliveries are kept for /sim/deliveries (Web Push payloads are decrypted only for these); fewer make the simulator cheaper under load."
    )
    var recordedHandles = 100_000

    @Option(help: "Where the generated CA is written (ca.pem).")
    var dataDir = "data/sim"

    @Option(help: "Handles that are dead, comma-separated patterns where * matches anything.")
    var deadHandles = ""

    @Option(help: "Share of requests answered 429 (WNS 406), 0 to 1.")
    var throttleRate = 0.0

    @Option(help: "Share of requests answered 503, 0 to 1.")
    var errorRate = 0.0

    @Option(help: "Milliseconds added before each answer.")
    var latencyMs = 0

    @Option(help: "Retry-After seconds on 429 and 503.")
    var retryAfter = 1

    @Option(
        help: """
            Requests a minute the --attach hubs' simulated FCM project may send, written as their fcm.ratePerMinute (default: \
            FCM's own default quota, 600000, at which 300,000 FCM targets alone take 30 s). For load tests of PushHub rather than \
            of the quota, as a project granted a higher quota would.
            """)
    var fcmQuota: Int?

    func validate() throws {
        guard (0...1).contains(throttleRate) else { throw ValidationError("--throttle-rate must be between 0 and 1") }
        guard (0...1).contains(errorRate) else { throw ValidationError("--error-rate must be between 0 and 1") }
        guard latencyMs >= 0, retryAfter >= 0 else { throw ValidationError("--latency-ms and --retry-after must not be negative") }
        if let fcmQuota, fcmQuota < 1 { throw ValidationError("--fcm-quota must be 1 or more") }
        if fcmQuota != nil, attach.isEmpty { throw ValidationError("--fcm-quota sets the quota of the --attach hubs: name one") }
        guard (0...1_000_000).contains(recordedHandles) else { throw ValidationError("--recorded-handles must be between 0 and 1000000") }
        guard listenAnywhere || PushEndpointPolicy.isLoopback(host) else {
            throw ValidationError("--host must be a loopback address unless --listen-anywhere: the simulators are for development and tests")
        }
    }

    func run() async throws {
        let logger = makeLogger("pushhub.sim")
        let path = config ?? PushHubEnvironment.current.configPath
        var hubs = try HubsConfiguration.loadOrCreateDevelopment(at: path) { _ in emit("Wrote a development hub to \(path).") }
        for name in attach where !hubs.hubs.contains(where: { CaseFolding.equal($0.name, name) }) {
            throw ValidationError("--attach \(name): no hub of that name in \(path)")
        }
        // Credentials first: the simulator checks requests against them.
        try hubs.attachSimulatedCredentials(to: attach)
        if let fcmQuota {
            for index in hubs.hubs.indices where attach.contains(where: { CaseFolding.equal($0, hubs.hubs[index].name) }) {
                hubs.hubs[index].credentials.fcm?.ratePerMinute = fcmQuota
            }
        }
        let certificates = try SimulatorCertificates.generate(names: tlsName)
        try FileManager.default.createDirectory(atPath: dataDir, withIntermediateDirectories: true)
        let caPath = URL(fileURLWithPath: dataDir).appendingPathComponent("ca.pem").path
        try certificates.caPEM.write(toFile: caPath, atomically: true, encoding: .utf8)

        var settings = SimulatorSettings(hubs: hubs, certificates: certificates)
        settings.host = host
        settings.apnsPort = apnsPort
        settings.httpPort = port
        settings.recordedHandles = recordedHandles
        settings.faults.deadHandles = deadHandles.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        settings.faults.throttleRate = throttleRate
        settings.faults.errorRate = errorRate
        settings.faults.latencyMs = latencyMs
        settings.faults.retryAfterSeconds = retryAfter
        let simulator = try PNSSimulator(settings: settings, logger: logger)
        let group = ProcessLifecycle.group([.init(service: simulator)], logger: logger)
        async let running: Void = group.run()
        let (apnsURL, httpURL) = try await simulator.ready()
        if !attach.isEmpty {
            try hubs.pointed(at: apnsURL, http: httpURL, hubs: attach).write(to: path)
            emit("Pointed \(attach.joined(separator: ", ")) at the simulator in \(path).")
        }
        emit(
            "PushHub PNS simulator: every service over HTTP/2 and TLS at \(apnsURL) (APNs there only); FCM, WNS, Web Push and /sim/… over plain HTTP/1.1 at \(httpURL). Stop with Ctrl-C or SIGTERM."
        )
        emit("PUSHHUB_SIM_APNS_URL=\(apnsURL)")
        emit("PUSHHUB_SIM_URL=\(httpURL)")
        emit("PUSHHUB_PNS_CA=\(caPath)")
        try await running
        emit("PushHub PNS simulator stopped.")
    }
}
