import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import PushConfiguration
import PushModel
import PushOps
import PushProviders
import ServiceLifecycle
import Synchronization
import _CryptoExtras

/// What the simulator does wrong on purpose.
public struct SimulatorFaults: Codable, Sendable, Equatable {
    /// Handles matching one of these (`*` matches any run of characters) are dead: 410
    /// `Unregistered`, 404 `UNREGISTERED`, 410 Gone.
    public var deadHandles: [String] = []
    /// Share of requests answered 429 (WNS: 406), with `Retry-After: retryAfterSeconds`.
    public var throttleRate: Double = 0
    /// Share of requests answered 503.
    public var errorRate: Double = 0
    /// Added before every answer.
    public var latencyMs: Int = 0
    public var retryAfterSeconds: Int = 1
    /// APNs provider tokens issued before this UNIX time are answered `ExpiredProviderToken`.
    public var expireProviderTokensBefore: Int?

    public init() {}

    func isDead(_ handle: String) -> Bool { deadHandles.contains { Self.matches(handle, $0) } }

    /// A glob with `*` only.
    static func matches(_ text: String, _ pattern: String) -> Bool {
        let parts = pattern.split(separator: "*", omittingEmptySubsequences: false).map(String.init)
        guard parts.count > 1 else { return text == pattern }
        guard text.hasPrefix(parts[0]), text.hasSuffix(parts[parts.count - 1]) else { return false }
        var rest = text.dropFirst(parts[0].count).dropLast(parts[parts.count - 1].count)
        for middle in parts.dropFirst().dropLast() where !middle.isEmpty {
            guard let range = rest.range(of: middle) else { return false }
            rest = rest[range.upperBound...]
        }
        return text.count >= parts[0].count + parts[parts.count - 1].count
    }
}

/// Where and how the simulator runs.
public struct SimulatorSettings: Sendable {
    public var host = "127.0.0.1"
    /// Every service (APNs, FCM, WNS, Web Push, the token endpoints) over HTTP/2 and TLS, as
    /// the real services speak it. 0 picks a free port.
    public var apnsPort = 0
    /// The same services but APNs, and `/sim/…`, on plain HTTP/1.1.
    public var httpPort = 0
    /// The credentials requests are checked against.
    public var hubs: HubsConfiguration
    public var faults = SimulatorFaults()
    public var certificates: SimulatorCertificates
    /// Deliveries kept per handle, and handles kept, for `GET /sim/deliveries`.
    public var deliveriesPerHandle = 20
    public var recordedHandles = 100_000
    /// Event-loop threads of the simulator's own, or nil for NIO's shared ones. Inside the hub's
    /// process (`pushhub dev`) it has loops of its own: a real push service never runs on the
    /// hub's event loops, and on shared ones every connection of the hub's (its API's too) waited
    /// its turn behind the stand-in's work.
    public var eventLoopThreads: Int?

    public init(hubs: HubsConfiguration, certificates: SimulatorCertificates) {
        self.hubs = hubs
        self.certificates = certificates
    }
}

/// `pushhub sim`: APNs (HTTP/2, TLS, provider-token JWTs), FCM HTTP v1 and Google's token
/// endpoint, WNS and its token endpoint, Web Push (VAPID checked, payload decrypted), Huawei
/// Push Kit and ADM with their token endpoints, Xiaomi Mi Push and Baidu Push (signature checked),
/// answering with the services' status codes and error bodies, with fault injection, and
/// `GET /sim/stats` and `GET /sim/deliveries?handle=` for tests.
public final class PNSSimulator: Service, Sendable {
    let settings: SimulatorSettings
    let state: SimulatorState
    let logger: Logger
    private let ports = Ports()

    public init(settings: SimulatorSettings, logger: Logger) throws {
        self.settings = settings
        self.logger = logger
        state = try SimulatorState(
            hubs: settings.hubs, faults: settings.faults, deliveriesPerHandle: settings.deliveriesPerHandle, recordedHandles: settings.recordedHandles
        )
    }

    /// The HTTP/2 base URL (`https://127.0.0.1:PORT`: APNs, and the other services) and the
    /// plain one, once both listen.
    public func ready() async throws -> (apns: String, http: String) {
        // Generous: on a loaded machine (a test suite's first minute) binding can wait its turn.
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            let (apns, http) = ports.value.withLock { $0 }
            if let apns, let http { return ("https://\(settings.host):\(apns)", "http://\(settings.host):\(http)") }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw SimulatorError(description: "the simulator did not start listening")
    }

    public func run() async throws {
        let tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(try NIOSSLCertificate(bytes: Array(settings.certificates.serverCertificatePEM.utf8), format: .pem))],
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(settings.certificates.serverKeyPEM.utf8), format: .pem)))
        var quiet = logger
        quiet.logLevel = max(logger.logLevel, .warning)
        let own = settings.eventLoopThreads.map { MultiThreadedEventLoopGroup(numberOfThreads: $0) }
        let group: any EventLoopGroup = own ?? MultiThreadedEventLoopGroup.singleton
        let connections = PNSHTTP2Server.Connections()
        let apns: any Channel
        do {
            apns = try await PNSHTTP2Server.bind(
                host: settings.host, port: settings.apnsPort, tls: tls, state: state, connections: connections, group: group)
        } catch {
            try? await own?.shutdownGracefully()
            throw error
        }
        ports.value.withLock { $0.apns = apns.localAddress?.port }
        let http = Application(
            router: makeRouter(), configuration: .init(address: .hostname(settings.host, port: settings.httpPort), serverName: nil),
            onServerRunning: { [ports] channel in ports.value.withLock { $0.http = channel.localAddress?.port } },
            eventLoopGroupProvider: .shared(group), logger: quiet)
        // The APNs listener closes when the HTTP application stops (graceful shutdown).
        var failure: (any Error)?
        // `run`, not `runService`: the simulator stops when its service group says, never on a
        // signal of its own (`pushhub dev` stops it last, after the stack).
        do { try await http.run() } catch { failure = error }
        try? await apns.close()
        await connections.closeAll()
        try? await own?.shutdownGracefully()
        if let failure { throw failure }
    }

    /// Changes the faults while running (tests, and `POST /sim/faults`).
    public func setFaults(_ faults: SimulatorFaults) { state.setFaults(faults) }

    /// Forgets the FCM and WNS access tokens issued, as when they expire early.
    public func revokeAccessTokens() { state.revokeAccessTokens() }

    func makeRouter() -> Router<BasicRequestContext> {
        let router = Router()
        let state = self.state
        // The services on plain HTTP/1.1, through the same routes as the HTTP/2 listener.
        let serve: @Sendable (Request, BasicRequestContext) async throws -> Response = { request, _ in
            let path = request.uri.path
            let faults = SimulatorState.isTokenEndpoint(path) ? state.faults : await state.prelude()
            let body = try await request.body.collect(upTo: PNSFrameHandler.maximumBody)
            let headers = request.headers
            let simRequest = SimRequest(
                header: { name in HTTPField.Name(name).flatMap { headers[$0] } }, body: body, scheme: "http", authority: request.head.authority)
            let answer = state.serve(method: request.method.rawValue, path: path, simRequest, faults: faults) ?? SimulatorState.json(404, "{}")
            return Self.response(answer)
        }
        for path in [
            "/v1/projects/:project/messages:send", "/oauth2/token", "/wns/token", "/wns/channel/:id", "/webpush/:id", "/v1/:app/messages:send",
            "/hms/token", "/adm/token", "/messaging/registrations/:id/messages", "/v3/message/regid", SimulatorState.baiduPath,
        ] {
            router.post(RouterPath(path), use: serve)
        }
        router.get("/sim/stats") { _, _ in Self.response(SimulatorState.json(200, state.statsJSON())) }
        router.get("/sim/deliveries") { request, _ in
            guard let handle = request.uri.queryParameters.get("handle") else {
                return Self.response(SimulatorState.json(400, #"{"error":"handle: missing"}"#))
            }
            return Self.response(SimulatorState.json(200, state.deliveriesJSON(handle: handle)))
        }
        addOperationsRoutes(to: router, checks: [])
        router.post("/sim/revoke-tokens") { _, _ in
            state.revokeAccessTokens()
            return Self.response(SimulatorState.json(200, "{}"))
        }
        router.post("/sim/faults") { request, _ in
            let body = try await request.body.collect(upTo: 64 * 1024)
            guard let faults = try? JSONDecoder().decode(SimulatorFaults.self, from: Data(body.readableBytesView)) else {
                return Self.response(SimulatorState.json(400, #"{"error":"body: not a SimulatorFaults JSON object"}"#))
            }
            state.setFaults(faults)
            return Self.response(SimulatorState.json(200, "{}"))
        }
        return router
    }

    /// An answer as Hummingbird's response.
    static func response(_ answer: SimAnswer) -> Response {
        var headers = HTTPFields()
        for (name, value) in answer.headers { if let name = HTTPField.Name(name) { headers.append(HTTPField(name: name, value: value)) } }
        return Response(
            status: .init(code: answer.status), headers: headers, body: answer.body.map { .init(byteBuffer: ByteBuffer(string: $0)) } ?? .init())
    }
}

public struct SimulatorError: Error, CustomStringConvertible {
    public var description: String
}

/// The ports the listeners bound, once they did.
final class Ports: Sendable {
    let value = Mutex<(apns: Int?, http: Int?)>((nil, nil))
}
