import ArgumentParser
import Foundation
import PushEnvironment
import PushIngress
import PushLoad
import PushModel

/// `pushhub load`: drives a running PushHub and measures it from `pushhub.results`.
struct LoadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "load",
        abstract: "Load test a running PushHub (pushhub dev or docker-compose): register devices, send at a rate, broadcast, or a mix.",
        discussion: """
            Scenarios: register (--devices installations through the hub API), send (--rate sends/s for --duration s \
            to users, a tag expression or everyone), broadcast (one send to every registration), mixed (sends, one in ten \
            to --tag, while devices re-register). Sends go through the hub API or, with --via kafka, straight into \
            pushhub.requests. Results are read from pushhub.results: accepted/s, delivered/s, accept and end-to-end latency \
            (HdrHistogram percentiles) and errors by kind. A progress line every second; a JSON and an HTML report at the end.
            The defaults come from what `pushhub dev` prints: PUSHHUB_URL, PUSHHUB_HUB, PUSHHUB_CONNECTION_STRING, \
            PUSHHUB_KAFKA and PUSHHUB_SIM_URL. Only loopback targets unless --allow-remote. Exits 1 when a send or \
            registration failed or results are missing.

            Examples:
              pushhub load register --devices 2000
              pushhub load send --devices 2000 --rate 100 --duration 20 --audience user --format native
              pushhub load mixed --devices 2000 --rate 20 --duration 10 --via kafka
            """)

    @Argument(help: "register, send, broadcast or mixed.")
    var scenario: String

    @OptionGroup var hubAPI: HubAPIOptions

    @Option(help: "The hub (default: $PUSHHUB_HUB or pushhub-dev).")
    var hub: String?

    @OptionGroup var kafka: KafkaOptions

    @Option(help: "http (the hub API) or kafka (SendRequests into pushhub.requests).")
    var via = "http"

    @Option(
        help:
            "The simulator listener where WNS channels and Web Push endpoints point (default: $PUSHHUB_SIM_APNS_URL, its HTTP/2 one, else $PUSHHUB_SIM_URL, else http://127.0.0.1)."
    )
    var simURL: String?

    @Option(help: "Devices in the population (register makes them; the others send to them).")
    var devices = 1000

    @Option(help: "Users the devices belong to, round-robin (default: one per device).")
    var users: Int?

    @Option(help: "Starts installation and user ids, so populations do not collide.")
    var prefix = "load"

    @Option(help: "Platform shares in percent.")
    var platforms = PlatformMix.default.description

    @Option(help: "Tags and the percent of devices carrying each, drawn independently.")
    var tags = TagMix.default.description

    @Option(help: "Sends per second (send, mixed).")
    var rate: Double = 100

    @Option(help: "Seconds of sending (send, mixed).")
    var duration: Double = 10

    @Option(help: "Who each send is for: user, tag or broadcast (send).")
    var audience = "user"

    @Option(
        help:
            "template (one send, each device's template), native, or a native format as pushhub send names it (apple or apns, fcmv1 or fcm, windows or wns, browser or webpush: native on that platform)."
    )
    var format = "template"

    @Option(help: "The tag expression of tag sends.")
    var tag = "Sports && !Politics"

    @Option(
        help:
            "The platform of native sends to a tag or to everyone: apns (or apple), fcm (fcmv1, gcm), wns (windows), webpush (browser), hms, adm, xiaomi, baidu."
    )
    var platform = "apns"

    @Option(help: "Registrations per second (default: as fast as --concurrency allows; mixed: a tenth of --rate).")
    var registerRate: Double?

    @Option(help: "Requests in flight at most.")
    var concurrency = 64

    @Option(help: "Seconds to wait for the last results after the last send.")
    var drainTimeout: Double = 120

    @Option(help: "Seconds after which the run stops, whatever is left.")
    var timeout: Double = 3600

    @Option(help: "The JSON report (default: pushhub-load-SCENARIO.json).")
    var json: String?

    @Option(help: "The HTML report with plots (default: pushhub-load-SCENARIO.html).")
    var html: String?

    @Flag(help: "Allow an ingress, Kafka or simulator that is not on this machine.")
    var allowRemote = false

    @Flag(help: "No progress line.")
    var quiet = false

    func validate() throws {
        do throws(LoadFailure) {
            try makeSettings(PushHubEnvironment.current).check()
        } catch {
            throw ValidationError(error.description)
        }
    }

    func run() async throws {
        let settings = try makeSettings(PushHubEnvironment.current)
        if settings.kafka != nil { _ = try await kafka.reachableServers() }
        var logger = makeLogger("pushhub.load")
        // Kafka's group notices are not news in a load run.
        logger.logLevel = max(logger.logLevel, .warning)
        let interactive = isatty(STDERR_FILENO) == 1
        let quiet = self.quiet
        let report: LoadReport
        do {
            report = try await LoadRunner(settings: settings, logger: logger).run { line in
                guard !quiet else { return }
                FileHandle.standardError.write(Data((interactive ? "\r\u{1B}[K" + line : line + "\n").utf8))
            }
        } catch {
            throw CommandFailure(description: error.description)
        }
        if interactive && !quiet { FileHandle.standardError.write(Data("\n".utf8)) }
        let jsonPath = json ?? "pushhub-load-\(settings.scenario.rawValue).json"
        let htmlPath = html ?? "pushhub-load-\(settings.scenario.rawValue).html"
        try report.json().write(to: URL(fileURLWithPath: jsonPath), options: .atomic)
        try Data(report.html().utf8).write(to: URL(fileURLWithPath: htmlPath), options: .atomic)
        emit(report.summary())
        emit("reports: \(jsonPath), \(htmlPath)")
        let failed = (report.sends?.failed ?? 0) + (report.registrations?.failed ?? 0)
        if failed > 0 || report.timedOut || report.results.map({ !$0.complete }) == true {
            throw CommandFailure(
                description: "the run did not finish cleanly: \(failed) failed requests"
                    + (report.results.map { $0.complete ? "" : ", \($0.missing) results missing, \($0.undispatchedSends) sends not dispatched" } ?? "")
                    + (report.timedOut ? ", stopped at --timeout" : ""))
        }
    }

    func makeSettings(_ environment: PushHubEnvironment) throws(LoadFailure) -> LoadSettings {
        guard let scenario = LoadScenario(rawValue: scenario) else {
            throw LoadFailure("the scenario must be register, send, broadcast or mixed, not \(scenario)")
        }
        guard let via = LoadVia(rawValue: via) else { throw LoadFailure("--via must be http or kafka, not \(via)") }
        guard let audience = LoadAudience(rawValue: audience) else { throw LoadFailure("--audience must be user, tag or broadcast, not \(audience)") }
        // --format takes send's names too: a native format is native sends on its platform.
        let namedFormat = NotificationFormat(named: format)
        guard let format = LoadFormat(rawValue: format.lowercased()) ?? namedFormat.map({ $0 == .template ? .template : .native }) else {
            throw LoadFailure("--format must be template, native or one of \(NotificationFormat.names), not \(format)")
        }
        guard let platform = namedFormat?.platform ?? Platform(named: platform) else {
            throw LoadFailure("--platform must be \(Platform.names), not \(platform)")
        }
        let connection: ConnectionString
        do { connection = try hubAPI.connection(environment) } catch { throw LoadFailure(error.description) }
        let population = try LoadPopulation(
            devices: devices, users: users, prefix: prefix, platforms: try PlatformMix(parsing: platforms), tags: try TagMix(parsing: tags),
            simulatorURL: simURL ?? environment.simulatorHTTP2URL ?? environment.simulatorURL ?? "http://127.0.0.1")
        var servers: [String]?
        if kafka.isConfigured {
            do { servers = try kafka.servers() } catch { throw LoadFailure("\(error)") }
        }
        var settings = LoadSettings(
            scenario: scenario, url: hubAPI.ingressURL(environment), hub: hub ?? environment.hub ?? "pushhub-dev",
            connection: connection, kafka: servers, population: population)
        settings.via = via
        settings.topics = kafka.topics
        settings.rate = rate
        settings.duration = duration
        settings.audience = audience
        settings.format = format
        settings.tagExpression = tag
        settings.nativePlatform = platform
        settings.registerRate = registerRate
        settings.concurrency = concurrency
        settings.drainTimeout = drainTimeout
        settings.timeout = timeout
        settings.allowRemote = allowRemote
        return settings
    }
}
