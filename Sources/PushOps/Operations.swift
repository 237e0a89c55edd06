import ArgumentParser
import Foundation
import Hummingbird
import Logging
import PushMetrics

/// Something `/health/ready` asks: Kafka answers, the store answers.
public struct ReadinessCheck: Sendable {
    public var name: String
    public var check: @Sendable () async -> Bool

    public init(_ name: String, check: @escaping @Sendable () async -> Bool) {
        self.name = name
        self.check = check
    }
}

/// `GET /health/live` (the process serves HTTP), `GET /health/ready` (200 only when every
/// check passes, else 503 naming the failures) and `GET /metrics` (Prometheus text).
public func addOperationsRoutes<Context: RequestContext>(to router: Router<Context>, checks: [ReadinessCheck], metrics: MetricsRegistry = .shared) {
    router.get("/health/live") { _, _ in
        Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: #"{"status":"live"}"#)))
    }
    router.get("/health/ready") { _, _ in
        let results = await withTaskGroup(of: (String, Bool).self, returning: [String: Bool].self) { group in
            for check in checks { group.addTask { (check.name, await check.check()) } }
            return await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
        }
        let ready = results.values.allSatisfy { $0 }
        let body = "{" + results.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\"\($0.value ? "ok" : "failing")\"" }.joined(separator: ",") + "}"
        return Response(
            status: ready ? .ok : .serviceUnavailable, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: body)))
    }
    router.get("/metrics") { _, _ in
        Response(
            status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(string: metrics.render())))
    }
}

/// The operations endpoints on a port of their own, for processes without an HTTP API.
public func makeOperationsApplication(
    host: String, port: Int, checks: [ReadinessCheck], logger: Logger, onListening: @escaping @Sendable (Int) -> Void = { _ in }
) -> some ApplicationProtocol {
    let router = Router()
    addOperationsRoutes(to: router, checks: checks)
    var quiet = logger
    quiet.logLevel = max(logger.logLevel, .warning)
    return Application(
        router: router, configuration: .init(address: .hostname(host, port: port), serverName: "PushHub"),
        onServerRunning: { channel in onListening(channel.localAddress?.port ?? port) }, logger: quiet)
}

/// Requests by route and status, and their latency, for the ingress.
public struct HTTPMetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    let metrics: MetricsRegistry
    /// The series of each method, route and status, made once: a lookup in the registry builds
    /// its labels' text, twice a request.
    private let series = SeriesCache<SeriesKey, (Counter, Histogram)>()

    struct SeriesKey: Hashable {
        var method: String
        var route: String
        var status: Int
    }

    public init(metrics: MetricsRegistry = .shared) { self.metrics = metrics }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let started = ContinuousClock.now
        let route = context.endpointPath ?? "unmatched"
        do {
            let response = try await next(request, context)
            record(request, route: route, status: response.status.code, since: started)
            return response
        } catch {
            record(request, route: route, status: (error as? any HTTPResponseError)?.status.code ?? 500, since: started)
            throw error
        }
    }

    /// The methods a label names; any other is `other`, so a client's made-up methods do not
    /// make a series each.
    static func methodLabel(_ method: HTTPRequest.Method) -> String {
        switch method {
        case .get, .post, .put, .patch, .delete, .head, .options: method.rawValue
        default: "other"
        }
    }

    private func record(_ request: Request, route: String, status: Int, since started: ContinuousClock.Instant) {
        let key = SeriesKey(method: Self.methodLabel(request.method), route: route, status: status)
        let (requests, latency) = series.series(key) {
            let labels = ["method": key.method, "route": route]
            return (
                metrics.counter(
                    "pushhub_http_requests_total", help: "HTTP requests by method, route and status.",
                    labels: labels.merging(["status": String(status)]) { $1 }),
                metrics.histogram("pushhub_http_request_duration_seconds", help: "HTTP request latency by method and route.", labels: labels)
            )
        }
        requests.increment()
        latency.observe(ContinuousClock.now - started)
    }

}

/// `--ops-host` and `--ops-port` of processes without an HTTP API of their own.
public struct OperationsOptions: ParsableArguments {
    @Option(help: "Address of /health/live, /health/ready and /metrics (0.0.0.0 in containers).")
    public var opsHost = "127.0.0.1"

    @Option(help: "Port of /health/live, /health/ready and /metrics; 0 picks a free one.")
    public var opsPort = 0

    public init() {}

    /// The operations application; prints `PUSHHUB_OPS_URL=http://HOST:PORT` once it listens.
    public func application(checks: [ReadinessCheck], logger: Logger) -> some ApplicationProtocol {
        let host = opsHost
        return makeOperationsApplication(host: host, port: opsPort, checks: checks, logger: logger) { port in
            FileHandle.standardOutput.write(Data("PUSHHUB_OPS_URL=http://\(host):\(port)\n".utf8))
        }
    }
}
