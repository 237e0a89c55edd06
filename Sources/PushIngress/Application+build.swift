import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import PushConfiguration
import PushDispatcher
import PushOps
import PushStore

/// The hash PushHub stores for an app-backend user's password (bcrypt).
public func hashPassword(_ password: String) -> String {
    UserAuthenticator.hash(password: password)
}

/// How the ingress runs.
public struct IngressConfiguration: Sendable {
    public var host: String = "127.0.0.1"
    /// 0 picks a free port.
    public var port: Int = 8080
    public var hubs: HubsConfiguration
    /// Connections served at once; past that new ones wait in the listen backlog.
    public var maximumConnections = 1_000
    /// A connection that has not sent a complete request head (or the next part of a body)
    /// for this long, or that sits idle this long between requests, is closed. This is the
    /// header-read and the idle time-out in one. The server also waits for a request's bytes at
    /// most this long plus their time at 4 KiB/s (`RequestDeadline`): a body trickled a byte at
    /// a time resets the idle time-out at every byte.
    public var idleTimeout: Duration = .seconds(30)
    /// Kafka is the embedded cluster, which keeps nothing across a restart: accepted sends are
    /// kept in the store and published again, whatever `recovery` says.
    public var embeddedKafka = false
    /// Where import and export jobs keep their files (`jobs.directory` of `pushhub.yaml`,
    /// resolved); nil turns the jobs API off (503).
    public var jobsDirectory: String?

    /// The jobs' files, when there is a jobs directory.
    public var jobFiles: JobFiles? {
        jobsDirectory.map { JobFiles(directory: $0, settings: hubs.jobs ?? JobsConfiguration()) }
    }

    /// What happens to sends that stall, from `recovery` and where Kafka is.
    public var recovery: SendRecoverySettings {
        var settings = SendRecoverySettings(hubs.sendRecovery, embeddedKafka: embeddedKafka)
        settings.dispatchDedupeWindow = hubs.dispatchDedupeWindow
        return settings
    }

    public init(hubs: HubsConfiguration) {
        self.hubs = hubs
    }
}

/// The ingress's routes; tests drive them through `app.test(.router)`.
public func buildIngressRouter(
    hubs: HubsConfiguration, stores: IngressStores, publisher: (any NotificationPublisher)? = nil,
    readiness: [ReadinessCheck] = [], richQuota: RichPayloadQuota = RichPayloadQuota(), logins: LoginLimits = LoginLimits(),
    recovery: SendRecoverySettings? = nil, debugSendTimeout: Duration = .seconds(15), jobs: JobFiles? = nil, jobSignal: JobSignal? = nil,
    now: @escaping @Sendable () -> Date = { Date() }
) throws -> Router<IngressContext> {
    let router = Router(context: IngressContext.self)
    router.add(middleware: HTTPMetricsMiddleware())
    router.add(middleware: StoreFailureMiddleware())
    router.add(middleware: AcceptTracing())
    let access = HubAccess(hubs: hubs, now: now)
    let hubRoutes = HubRoutes(router: router, access: access)
    let queue = publisher.map {
        NotificationQueue(
            publisher: $0, outcomes: stores.outcomes,
            recovery: recovery ?? SendRecoverySettings(hubs.sendRecovery, embeddedKafka: false), now: now,
            audiences: AudienceResolver(store: stores.registrations), readsWhileNoting: stores.outcomesHoldRegistrations)
    }
    addOperationsRoutes(to: router, checks: readiness)
    InstallationController(store: stores.registrations, access: access).addRoutes(to: hubRoutes)
    RegistrationController(store: stores.registrations, access: access).addRoutes(to: hubRoutes)
    JobsController(store: stores.jobs, files: jobs, signal: jobSignal, access: access).addRoutes(to: hubRoutes)
    // One debug-send gate for the API's test sends and the console's.
    let debug = queue.map { DebugSend(queue: $0, audiences: AudienceResolver(store: stores.registrations), timeout: debugSendTimeout) }
    if let queue {
        MessageController(
            access: access, queue: queue, outcomes: stores.outcomes, schedules: stores.schedules, debug: debug,
            idempotency: IdempotentSends(store: stores.idempotency)
        ).addRoutes(to: hubRoutes)
    }
    if hubs.console?.isEnabled ?? true {
        try ConsoleController(hubs: hubs, stores: stores, debug: debug, logins: logins, now: now).addRoutes(to: router)
    }
    if let outcomes = stores.outcomes { FeedbackController(outcomes: outcomes).addRoutes(to: hubRoutes) }
    if let appBackend = hubs.appBackend, let hub = hubs.hub(named: appBackend.hub) {
        let authenticator = UserAuthenticator(users: stores.users, jwt: try appBackend.jwt.map(JWTVerifier.init), limits: logins, now: now)
        let api = router.group("api").add(middleware: AppBackendAuthentication(authenticator: authenticator))
        RegisterController(store: stores.registrations, hub: hub.name, endpoints: hub.endpointPolicy).addRoutes(to: api)
        NotificationsController(
            hub: hub.name, queue: queue, richPayloads: stores.richPayloads, quota: richQuota, idempotency: IdempotentSends(store: stores.idempotency)
        ).addRoutes(to: api)
    }
    return router
}

/// The ingress as an application: what `pushhub-ingress` runs.
/// `onListening` is called with the bound port once the server listens.
public func buildIngressApplication(
    configuration: IngressConfiguration, stores: IngressStores, publisher: (any NotificationPublisher)? = nil,
    readiness: [ReadinessCheck] = [], logins: LoginLimits = LoginLimits(), jobSignal: JobSignal? = nil, logger: Logger,
    onListening: @escaping @Sendable (Int) -> Void = { _ in }
) throws -> some ApplicationProtocol {
    let idleTimeout = TimeAmount(configuration.idleTimeout)
    return Application(
        router: try buildIngressRouter(
            hubs: configuration.hubs, stores: stores, publisher: publisher, readiness: readiness, logins: logins, recovery: configuration.recovery,
            jobs: configuration.jobFiles, jobSignal: jobSignal),
        server: .http1(
            configuration: .init(
                additionalChannelHandlers: [RequestDeadline(allowance: idleTimeout)],
                idleTimeout: idleTimeout)),
        configuration: .init(
            address: .hostname(configuration.host, port: configuration.port), serverName: "PushHub",
            availableConnectionsDelegate: MaximumAvailableConnections(configuration.maximumConnections)),
        onServerRunning: { channel in onListening(channel.localAddress?.port ?? configuration.port) },
        logger: logger)
}
