import Foundation
import Logging
import PushConfiguration
import PushSimulator
import ServiceLifecycle
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `pushhub sim` on its own, driven over HTTP as a PNS client would: the WNS token endpoint and
/// channels, fault injection, and what it records.
@Suite("PNS simulator", .timeLimit(.minutes(2)))
struct SimulatorTests {
    struct Running {
        let hubs: HubsConfiguration
        let http: String
        let group: ServiceGroup
        let task: Task<Void, Error>

        static func start(eventLoopThreads: Int? = nil) async throws -> Running {
            var hubs = HubsConfiguration.development(hubName: "simhub")
            try hubs.attachSimulatedCredentials(to: ["simhub"])
            let logger = Logger(label: "pushhub.tests") { _ in SwiftLogNoOpLogHandler() }
            var settings = SimulatorSettings(hubs: hubs, certificates: try SimulatorCertificates.generate())
            settings.eventLoopThreads = eventLoopThreads
            let simulator = try PNSSimulator(settings: settings, logger: logger)
            let group = ServiceGroup(configuration: .init(services: [.init(service: simulator)], logger: logger))
            let task = Task { try await group.run() }
            let (_, http) = try await simulator.ready()
            return Running(hubs: hubs, http: http, group: group, task: task)
        }

        func stop() async {
            await group.triggerGracefulShutdown()
            _ = try? await task.value
        }

        func post(_ path: String, _ body: Data, headers: [String: String]) async throws -> (Int, [AnyHashable: Any], String) {
            var request = URLRequest(url: URL(string: http + path)!)
            request.httpMethod = "POST"
            for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
            request.httpBody = body
            let (data, response) = try await URLSession.shared.data(for: request)
            let answer = try #require(response as? HTTPURLResponse)
            return (answer.statusCode, answer.allHeaderFields, String(decoding: data, as: UTF8.self))
        }

        func token(secret: String) async throws -> (Int, String) {
            let sid = try #require(hubs.hubs[0].credentials.wns?.packageSid)
            let form =
                "grant_type=client_credentials&client_id=\(sid.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)&client_secret=\(secret.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)&scope=notify.windows.com"
            let (status, _, body) = try await post("/wns/token", Data(form.utf8), headers: ["Content-Type": "application/x-www-form-urlencoded"])
            return (status, body)
        }
    }

    @Test("on event loops of its own (as in pushhub dev): it answers, and a graceful shutdown stops it and frees its port")
    func ownEventLoops() async throws {
        let sim = try await Running.start(eventLoopThreads: 1)
        let secret = try #require(sim.hubs.hubs[0].credentials.wns?.secret)
        let (status, body) = try await sim.token(secret: secret)
        #expect(status == 200, "\(body)")
        let started = ContinuousClock.now
        await sim.stop()
        #expect(ContinuousClock.now - started < .seconds(10), "the simulator's run ended with its threads")
        var request = URLRequest(url: URL(string: sim.http + "/sim/stats")!)
        request.timeoutInterval = 5
        await #expect(throws: (any Error).self, "nothing listens after the shutdown") { _ = try await URLSession.shared.data(for: request) }
    }

    static let toast = #"<toast><visual><binding template="ToastText01"><text id="1">hi</text></binding></visual></toast>"#

    @Test("WNS: a token only for the configured secret; a channel takes a well-formed toast with it, and says why it refuses")
    func wns() async throws {
        let sim = try await Running.start()
        let secret = try #require(sim.hubs.hubs[0].credentials.wns?.secret)
        #expect(try await sim.token(secret: "wrong").0 == 400)
        let (status, body) = try await sim.token(secret: secret)
        #expect(status == 200, "\(body)")
        let token = try #require((try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])?["access_token"] as? String)

        let toast = ["Content-Type": "text/xml", "X-WNS-Type": "wns/toast", "Authorization": "Bearer \(token)"]
        #expect(try await sim.post("/wns/channel/pc1", Data(Self.toast.utf8), headers: toast).0 == 200)
        let (unsigned, unsignedHeaders, _) = try await sim.post(
            "/wns/channel/pc1", Data(Self.toast.utf8), headers: toast.merging(["Authorization": "Bearer forged"]) { $1 })
        #expect(unsigned == 401)
        #expect(unsignedHeaders["X-WNS-Error-Description"] as? String == "Token expired or invalid")
        #expect(try await sim.post("/wns/channel/pc1", Data("<toast>".utf8), headers: toast).0 == 400, "malformed XML")
        #expect(try await sim.post("/wns/channel/pc1", Data(String(repeating: "x", count: 5001).utf8), headers: toast).0 == 413)

        // Dead channels from the faults; a faults body that is not one is refused.
        #expect(try await sim.post("/sim/faults", Data(#"{"latencyMs":1}"#.utf8), headers: ["Content-Type": "application/json"]).0 == 400)
        let faults = #"{"deadHandles":["dead*"],"throttleRate":0,"errorRate":0,"latencyMs":0,"retryAfterSeconds":1}"#
        #expect(try await sim.post("/sim/faults", Data(faults.utf8), headers: ["Content-Type": "application/json"]).0 == 200)
        #expect(try await sim.post("/wns/channel/dead-pc", Data(Self.toast.utf8), headers: toast).0 == 410)

        // What it recorded: the one delivery, with its type.
        let (data, _) = try await URLSession.shared.data(from: URL(string: "\(sim.http)/sim/deliveries?handle=wns/channel/pc1")!)
        let deliveries = try #require(try JSONSerialization.jsonObject(with: data) as? [[String: Any]])
        #expect(deliveries.count == 1)
        #expect((deliveries.first?["headers"] as? [String: String])?["X-WNS-Type"] == "wns/toast")
        let (stats, _) = try await URLSession.shared.data(from: URL(string: "\(sim.http)/sim/stats")!)
        let wns = try #require((try JSONSerialization.jsonObject(with: stats) as? [String: Any])?["wns"] as? [String: Any])
        #expect(wns["delivered"] as? Int == 1, "\(wns)")
        await sim.stop()
    }
}
