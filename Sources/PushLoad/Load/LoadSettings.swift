import Foundation
import PushIngress
import PushModel
import PushProviders

/// What a load run does.
public enum LoadScenario: String, CaseIterable, Sendable, Codable {
    /// Registers the population's devices (installations) through the hub API.
    case register
    /// Sends at a target rate for a duration.
    case send
    /// One send to every registration, timed until its last result.
    case broadcast
    /// Sends at a rate, one in ten to a tag expression, while devices re-register.
    case mixed

    var measuresResults: Bool { self != .register }
}

/// Who a send in the `send` scenario is for.
public enum LoadAudience: String, CaseIterable, Sendable, Codable {
    /// One user's devices, a different user each send (`$UserId:{id}`).
    case user
    /// The tag expression of `--tag`.
    case tag
    /// Every registration.
    case broadcast
}

/// How sends are made.
public enum LoadFormat: String, CaseIterable, Sendable, Codable {
    /// In the native format of the device's platform (a user's), or of `--platform`.
    case native
    /// One template send, each device's `load` template.
    case template
}

/// Where sends go in.
public enum LoadVia: String, CaseIterable, Sendable, Codable {
    /// `POST /{hub}/messages` on the ingress.
    case http
    /// SendRequests produced straight into `pushhub.requests`.
    case kafka
}

/// Everything a load run needs to know; `check()` enforces the bounds.
public struct LoadSettings: Sendable {
    public var scenario: LoadScenario
    public var via: LoadVia = .http
    /// The ingress, e.g. `http://127.0.0.1:8080`.
    public var url: String
    public var hub: String
    public var connection: ConnectionString
    /// Kafka's bootstrap servers: where results are read, and sends produced with `via: .kafka`.
    public var kafka: [String]?
    public var topics = PushTopics()
    public var population: LoadPopulation
    /// Sends per second (`send`, `mixed`).
    public var rate: Double = 100
    /// Seconds of sending (`send`, `mixed`).
    public var duration: Double = 10
    public var audience: LoadAudience = .user
    public var format: LoadFormat = .template
    /// The tag expression of tag sends.
    public var tagExpression = "Sports && !Politics"
    /// The platform of native sends to a tag expression or to everyone.
    public var nativePlatform: Platform = .apns
    /// Registrations per second; nil registers as fast as `concurrency` allows (`register`).
    /// `mixed` re-registers at a tenth of `rate` unless told.
    public var registerRate: Double?
    /// Requests in flight at most.
    public var concurrency = 64
    /// Seconds to wait for the last results after the last send.
    public var drainTimeout: Double = 120
    /// The whole run stops after this many seconds, whatever is left.
    public var timeout: Double = 3600
    /// Allows an ingress, Kafka or simulator that is not on this machine.
    public var allowRemote = false

    public static let maximumRate: Double = 100_000
    public static let maximumDuration: Double = 3600
    public static let maximumConcurrency = 4096
    /// Most sends one run may make.
    public static let maximumSends = 10_000_000

    public init(scenario: LoadScenario, url: String, hub: String, connection: ConnectionString, kafka: [String]?, population: LoadPopulation) {
        self.scenario = scenario
        self.url = url.hasSuffix("/") ? String(url.dropLast()) : url
        self.hub = hub
        self.connection = connection
        self.kafka = kafka
        self.population = population
    }

    /// Sends the run will make.
    public var plannedSends: Int {
        switch scenario {
        case .register: 0
        case .broadcast: 1
        case .send, .mixed: Int((rate * duration).rounded())
        }
    }

    public func check() throws(LoadFailure) {
        guard let parsed = URL(string: url), ["http", "https"].contains(parsed.scheme ?? ""), let host = parsed.host, !host.isEmpty else {
            throw LoadFailure("--url must be the ingress's http(s)://HOST:PORT, not \(url)")
        }
        do { try FieldCheck.hubName(hub, "--hub") } catch { throw LoadFailure("\(error)") }
        if scenario == .send || scenario == .mixed {
            guard rate > 0, rate <= Self.maximumRate else {
                throw LoadFailure("--rate must be more than 0 and at most \(Int(Self.maximumRate)) sends/s, not \(rate)")
            }
            guard duration > 0, duration <= Self.maximumDuration else {
                throw LoadFailure("--duration must be more than 0 and at most \(Int(Self.maximumDuration)) seconds, not \(duration)")
            }
            guard plannedSends >= 1, plannedSends <= Self.maximumSends else {
                throw LoadFailure("--rate × --duration must make 1 to \(Self.maximumSends) sends, not \(plannedSends)")
            }
        }
        if let registerRate, !(registerRate > 0 && registerRate <= Self.maximumRate) {
            throw LoadFailure("--register-rate must be more than 0 and at most \(Int(Self.maximumRate)) per second, not \(registerRate)")
        }
        guard (1...Self.maximumConcurrency).contains(concurrency) else {
            throw LoadFailure("--concurrency must be 1 to \(Self.maximumConcurrency), not \(concurrency)")
        }
        guard drainTimeout >= 0, drainTimeout <= 3600 else { throw LoadFailure("--drain-timeout must be 0 to 3600 seconds, not \(drainTimeout)") }
        guard timeout > 0, timeout <= 2 * 3600 else { throw LoadFailure("--timeout must be more than 0 and at most 7200 seconds, not \(timeout)") }
        if scenario == .register, via == .kafka { throw LoadFailure("--via kafka: registrations go through the hub API; register takes --via http") }
        if scenario.measuresResults || via == .kafka {
            guard let kafka, !kafka.isEmpty else {
                throw LoadFailure("\(scenario.rawValue) reads pushhub.results: say where Kafka is with --kafka HOST:PORT or PUSHHUB_KAFKA")
            }
        }
        guard !allowRemote else { return }
        guard PushEndpointPolicy.isLoopback(host) else {
            throw LoadFailure("--url \(url) is not on this machine; load runs drive loopback targets only unless --allow-remote")
        }
        for server in kafka ?? [] {
            let serverHost = server.split(separator: ":").dropLast().joined(separator: ":")
            guard PushEndpointPolicy.isLoopback(EndpointPolicy.unbracketed(serverHost)) else {
                throw LoadFailure("--kafka \(server) is not on this machine; load runs drive loopback targets only unless --allow-remote")
            }
        }
        guard let simulator = URL(string: population.simulatorURL), let simulatorHost = simulator.host, PushEndpointPolicy.isLoopback(simulatorHost)
        else {
            throw LoadFailure(
                "--sim-url \(population.simulatorURL) is not on this machine; devices point at loopback simulators only unless --allow-remote")
        }
    }
}
