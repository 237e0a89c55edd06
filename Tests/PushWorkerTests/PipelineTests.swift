import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import PushIngress
import PushKafka
import PushMetrics
import PushModel
import PushProviders
import PushSimulator
import PushStore
import PushWorker
import ServiceLifecycle
import Testing

/// HTTP send → dispatcher → workers → simulator → results → `GET /{hub}/messages/{id}`.
@Suite("Pipeline through the workers and the simulators", .timeLimit(.minutes(5)))
struct PipelineTests {
    static func installation(_ id: String, platform: String, channel: String, tags: [String] = ["news"], templates: String? = nil) -> String {
        #"{"installationId":"\#(id)","platform":"\#(platform)","pushChannel":\#(channel),"tags":[\#(tags.map { "\"\($0)\"" }.joined(separator: ","))]"#
            + (templates.map { #","templates":\#($0)"# } ?? "") + "}"
    }

    static func put(_ client: some TestClientProtocol, _ id: String, _ json: String) async throws {
        var headers = PipelineFixture.access
        headers[.contentType] = "application/json"
        let response = try await client.execute(
            uri: "/myhub/installations/\(id)", method: .put, headers: headers,
            body: ByteBuffer(string: json))
        #expect(response.status == .ok, "\(String(buffer: response.body))")
    }

    @Test("a native send to each platform ends Completed with one success each, and the device got it")
    func nativeSends() async throws {
        var faults = SimulatorFaults()
        faults.deadHandles = ["dead*"]
        let pipeline = try await PipelineFixture(faults: faults)
        defer { Task { await pipeline.stop() } }
        let sim = pipeline.sim
        let token = SimulatedHandle.apns("phone")
        let channel = SimulatedHandle.wnsChannel(base: sim.http, id: "pc")
        let subscription = SimulatedSubscription(id: "browser")
        try await Application(router: try pipeline.router()).test(.router) { client in
            try await Self.put(client, "i-apns", Self.installation("i-apns", platform: "apns", channel: "\"\(token)\""))
            try await Self.put(client, "i-dead", Self.installation("i-dead", platform: "apns", channel: "\"dead\(token.dropFirst(4))\""))
            try await Self.put(client, "i-fcm", Self.installation("i-fcm", platform: "fcmv1", channel: "\"fcm-registration\""))
            try await Self.put(client, "i-wns", Self.installation("i-wns", platform: "wns", channel: "\"\(channel)\""))
            try await Self.put(
                client, "i-web",
                Self.installation(
                    "i-web", platform: "browser",
                    channel:
                        #"{"endpoint":"\#(subscription.endpoint(base: sim.http))","p256dh":"\#(subscription.keys.p256dh)","auth":"\#(subscription.keys.auth)"}"#
                ))

            let sends: [(format: String, body: String, headers: [String: String], element: String, counts: String)] = [
                (
                    "apple", #"{"aps":{"alert":"apns news"}}"#, [:], "ApnsOutcomeCounts",
                    "<Outcome><Name>Success</Name><Count>1</Count></Outcome><Outcome><Name>BadChannel</Name><Count>1</Count></Outcome>"
                ),
                (
                    "fcmv1", #"{"message":{"notification":{"title":"fcm news"}}}"#, [:], "FcmV1OutcomeCounts",
                    "<Outcome><Name>Success</Name><Count>1</Count></Outcome>"
                ),
                (
                    "windows", #"<toast><visual><binding template="ToastText01"><text id="1">wns news</text></binding></visual></toast>"#,
                    ["X-WNS-Type": "wns/toast"], "WnsOutcomeCounts", "<Outcome><Name>Success</Name><Count>1</Count></Outcome>"
                ),
                ("browser", #"{"title":"web news"}"#, [:], "BrowserOutcomeCounts", "<Outcome><Name>Success</Name><Count>1</Count></Outcome>"),
            ]
            for send in sends {
                let id = try await PipelineFixture.send(client, format: send.format, tags: "news", body: send.body, headers: send.headers)
                let details = try await PipelineFixture.completed(client, id)
                #expect(details.contains("<State>Completed</State>"), "\(send.format): \(details)")
                #expect(details.contains("<\(send.element)>\(send.counts)</\(send.element)>"), "\(send.format): \(details)")
            }
        }
        #expect(try await sim.deliveries(token).first?["payload"] as? String == #"{"aps":{"alert":"apns news"}}"#)
        let fcm = try #require(try await sim.deliveries("fcm-registration").first?["payload"] as? String)
        #expect(fcm.contains("fcm news") && fcm.contains(#""token":"fcm-registration""#))
        #expect((try await sim.deliveries(channel).first?["payload"] as? String)?.contains("wns news") == true)
        #expect(
            try await sim.deliveries(subscription.endpoint(base: sim.http)).first?["payload"] as? String == #"{"title":"web news"}"#,
            "decrypted by the simulator")
        // The dead installation's channel is marked expired, as Azure does, and no longer reached.
        #expect(try await pipeline.store.installation(hub: "myhub", id: "i-dead")?.pushChannelExpired == true)
    }

    @Test("one template send fills each platform's template, escaped for JSON and XML")
    func templateSend() async throws {
        let pipeline = try await PipelineFixture()
        defer { Task { await pipeline.stop() } }
        let sim = pipeline.sim
        let token = SimulatedHandle.apns("template-phone")
        let channel = SimulatedHandle.wnsChannel(base: sim.http, id: "template-pc")
        let subscription = SimulatedSubscription(id: "template-browser")
        let json = #"{"t":{"body":"{\"aps\":{\"alert\":\"$(message)\"}}","tags":["breaking"]}}"#
        try await Application(router: try pipeline.router()).test(.router) { client in
            try await Self.put(client, "t-apns", Self.installation("t-apns", platform: "apns", channel: "\"\(token)\"", templates: json))
            try await Self.put(
                client, "t-fcm",
                Self.installation(
                    "t-fcm", platform: "fcmv1", channel: "\"fcm-template\"",
                    templates: #"{"t":{"body":"{\"message\":{\"data\":{\"text\":\"$(message)\"}}}"}}"#))
            try await Self.put(
                client, "t-wns",
                Self.installation(
                    "t-wns", platform: "wns", channel: "\"\(channel)\"",
                    templates:
                        #"{"t":{"body":"<toast><visual><binding template=\"ToastText01\"><text id=\"1\">$(message)</text></binding></visual></toast>","headers":{"X-WNS-Type":"wns/toast"}}}"#
                ))
            try await Self.put(
                client, "t-web",
                Self.installation(
                    "t-web", platform: "browser",
                    channel:
                        #"{"endpoint":"\#(subscription.endpoint(base: sim.http))","p256dh":"\#(subscription.keys.p256dh)","auth":"\#(subscription.keys.auth)"}"#,
                    templates: #"{"t":{"body":"{\"title\":\"$(message)\"}"}}"#))

            let id = try await PipelineFixture.send(client, format: "template", tags: "news", body: #"{"message":"Fish & \"chips\" <today>"}"#)
            let details = try await PipelineFixture.completed(client, id)
            #expect(details.contains("<State>Completed</State>"), "\(details)")
            for element in ["ApnsOutcomeCounts", "FcmV1OutcomeCounts", "WnsOutcomeCounts", "BrowserOutcomeCounts"] {
                #expect(
                    details.contains("<\(element)><Outcome><Name>Success</Name><Count>1</Count></Outcome></\(element)>"), "\(element): \(details)")
            }
        }
        let apns = try #require(try await sim.deliveries(token).first?["payload"] as? String)
        let alert = ((try JSONSerialization.jsonObject(with: Data(apns.utf8)) as? [String: Any])?["aps"] as? [String: Any])?["alert"] as? String
        #expect(alert == #"Fish & "chips" <today>"#)
        let fcm = try #require(try await sim.deliveries("fcm-template").first?["payload"] as? String)
        let message = (try JSONSerialization.jsonObject(with: Data(fcm.utf8)) as? [String: Any])?["message"] as? [String: Any]
        #expect((message?["data"] as? [String: String])?["text"] == #"Fish & "chips" <today>"#)
        let wns = try #require(try await sim.deliveries(channel).first?["payload"] as? String)
        #expect(wns.contains("Fish &amp; &quot;chips&quot; &lt;today&gt;") || wns.contains("Fish &amp; \"chips\" &lt;today&gt;"), "\(wns)")
        let web = try #require(try await sim.deliveries(subscription.endpoint(base: sim.http)).first?["payload"] as? String)
        #expect((try JSONSerialization.jsonObject(with: Data(web.utf8)) as? [String: String])?["title"] == #"Fish & "chips" <today>"#)
    }

    @Test("the tutorial client's dead handle is pruned by the APNs answer, and it registers again")
    func deadHandleReregisters() async throws {
        var faults = SimulatorFaults()
        faults.deadHandles = ["dead*"]
        let pipeline = try await PipelineFixture(faults: faults, workers: [.apns])
        defer { Task { await pipeline.stop() } }
        try await pipeline.store.setUser(name: "alice", passwordHash: hashPassword("alice-secret"))
        let alice: HTTPFields = [.authorization: "Basic " + Data("alice:alice-secret".utf8).base64EncodedString()]
        let dead = "dead" + SimulatedHandle.apns("alice").dropFirst(4)
        try await Application(router: try pipeline.router()).test(.router) { client in
            let created = try await client.execute(uri: "/api/register", method: .post, headers: alice)
            let registrationId = try JSONDecoder().decode(String.self, from: Data(buffer: created.body))
            let device = #"{"Platform":"apns","Handle":"\#(dead)","Tags":[]}"#
            #expect(
                try await client.execute(uri: "/api/register/\(registrationId)", method: .put, headers: alice, body: ByteBuffer(string: device))
                    .status == .ok)
            let id = try await PipelineFixture.send(client, format: "apple", tags: "username:alice", body: #"{"aps":{"alert":"hi"}}"#)
            let details = try await PipelineFixture.completed(client, id)
            #expect(
                details.contains("<ApnsOutcomeCounts><Outcome><Name>BadChannel</Name><Count>1</Count></Outcome></ApnsOutcomeCounts>"), "\(details)")
            // The dead handle is pruned before the result that makes the send Completed is
            // recorded: gone by the time the client reads it so.
            #expect(try await pipeline.store.registration(hub: "myhub", id: registrationId) == nil, "the dead handle's registration is pruned")
            let stale = try await client.execute(
                uri: "/api/register/\(registrationId)", method: .put, headers: alice, body: ByteBuffer(string: device))
            #expect(stale.status == .gone)
            let live = SimulatedHandle.apns("alice-new")
            let fresh = try JSONDecoder().decode(
                String.self, from: Data(buffer: try await client.execute(uri: "/api/register?handle=\(live)", method: .post, headers: alice).body))
            #expect(
                try await client.execute(
                    uri: "/api/register/\(fresh)", method: .put, headers: alice,
                    body: ByteBuffer(string: #"{"Platform":"apns","Handle":"\#(live)","Tags":[]}"#)
                ).status == .ok)
            let again = try await PipelineFixture.send(client, format: "apple", tags: "username:alice", body: #"{"aps":{"alert":"hi again"}}"#)
            #expect(
                try await PipelineFixture.completed(client, again).contains(
                    "<ApnsOutcomeCounts><Outcome><Name>Success</Name><Count>1</Count></Outcome></ApnsOutcomeCounts>"))
        }
    }

    /// Waits until the simulator holds `count` deliveries for `handle`; their headers.
    static func deliveredHeaders(_ sim: SimulatorFixture, _ handle: String, _ count: Int) async throws -> [[String: String]] {
        let deadline = ContinuousClock.now + .seconds(30)
        var deliveries: [[String: Any]] = []
        while deliveries.count < count, ContinuousClock.now < deadline {
            deliveries = try await sim.deliveries(handle)
            try await Task.sleep(for: .milliseconds(50))
        }
        return deliveries.map { $0["headers"] as? [String: String] ?? [:] }
    }

    /// The same request published twice, as recovery publishes a send again.
    static func publishTwice(_ request: SendRequest, _ pipeline: PipelineFixture) async throws {
        for _ in 0..<2 {
            try await pipeline.producer.send(
                KafkaOutgoingRecord(topic: pipeline.topics.requests, key: request.notificationId, value: try WireCoding.encode(request)))
        }
    }

    @Test(
        "a send published twice reaches the device twice under one collapse key and counts once; each template has its own key, shared by the devices that have it; a send's own key stays"
    )
    func collapseKeys() async throws {
        let pipeline = try await PipelineFixture(workers: [.apns, .webpush])
        defer { Task { await pipeline.stop() } }
        let sim = pipeline.sim
        let token = SimulatedHandle.apns("collapse-phone")
        let otherToken = SimulatedHandle.apns("collapse-other-phone")
        let subscription = SimulatedSubscription(id: "collapse-browser")
        let endpoint = subscription.endpoint(base: sim.http)
        try await Application(router: try pipeline.router()).test(.router) { client in
            try await Self.put(
                client, "c-apns",
                Self.installation(
                    "c-apns", platform: "apns", channel: "\"\(token)\"", tags: ["collapse"],
                    templates: #"{"a":{"body":"{\"aps\":{\"alert\":\"a $(m)\"}}"},"b":{"body":"{\"aps\":{\"alert\":\"b $(m)\"}}"}}"#))
            // Another phone with template a only (for template sends; native ones are apple).
            try await Self.put(
                client, "c-apns-other",
                Self.installation(
                    "c-apns-other", platform: "apns", channel: "\"\(otherToken)\"", tags: ["collapse-template"],
                    templates: #"{"a":{"body":"{\"aps\":{\"alert\":\"a $(m)\"}}"}}"#))
            try await Self.put(
                client, "c-web",
                Self.installation(
                    "c-web", platform: "browser",
                    channel: #"{"endpoint":"\#(endpoint)","p256dh":"\#(subscription.keys.p256dh)","auth":"\#(subscription.keys.auth)"}"#,
                    tags: ["collapse"]))
        }
        func request(_ format: NotificationFormat, _ body: String, headers: [String: String] = [:]) -> SendRequest {
            SendRequest(
                notificationId: UUID().uuidString.lowercased(), hub: "myhub", audience: .tags("collapse"), format: format, body: body,
                headers: headers, enqueuedAt: Date())
        }

        // Native, twice: both pushes carry the notification id as their key; one success.
        let native = request(.apple, #"{"aps":{"alert":"twice"}}"#)
        try await Self.publishTwice(native, pipeline)
        let apns = try await Self.deliveredHeaders(sim, token, 2)
        #expect(apns.map { $0["apns-collapse-id"] } == [native.notificationId, native.notificationId], "\(apns)")
        let deadline = ContinuousClock.now + .seconds(30)
        var outcome = try await pipeline.store.notification(hub: "myhub", id: native.notificationId)
        while outcome?.state != .completed, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
            outcome = try await pipeline.store.notification(hub: "myhub", id: native.notificationId)
        }
        #expect(outcome?.counts == [.apns: [.delivered: 1]], "\(String(describing: outcome))")
        // The second attempt's result may come after Completed: it must not count either.
        try await Task.sleep(for: .seconds(2))
        #expect(try await pipeline.store.notification(hub: "myhub", id: native.notificationId)?.counts == [.apns: [.delivered: 1]])

        let web = request(.browser, #"{"title":"twice"}"#)
        try await Self.publishTwice(web, pipeline)
        let topics = try await Self.deliveredHeaders(sim, endpoint, 2).map { $0["Topic"] }
        #expect(topics == Array(repeating: web.notificationId.replacingOccurrences(of: "-", with: ""), count: 2), "\(topics)")

        // A template send, twice: each template's push has a key of its own, the same on
        // both attempts, and the same for every device with that template.
        var template = request(.template, #"{"m":"x"}"#)
        template.audience = .tags("collapse || collapse-template")
        try await Self.publishTwice(template, pipeline)
        let keys = try await Self.deliveredHeaders(sim, token, 6).dropFirst(2).compactMap { $0["apns-collapse-id"] }
        #expect(keys.count == 4 && Set(keys).count == 2 && !keys.contains(template.notificationId), "\(keys)")
        let otherKeys = try await Self.deliveredHeaders(sim, otherToken, 2).compactMap { $0["apns-collapse-id"] }
        #expect(otherKeys.count == 2 && Set(otherKeys).count == 1 && keys.contains(otherKeys[0]), "\(otherKeys) against \(keys)")

        // A send's own keys are left alone.
        for own in [
            request(.apple, #"{"aps":{"alert":"own"}}"#, headers: ["apns-collapse-id": "mine"]),
            request(.browser, #"{"title":"own"}"#, headers: ["Topic": "news"]),
        ] {
            try await pipeline.producer.send(
                KafkaOutgoingRecord(topic: pipeline.topics.requests, key: own.notificationId, value: try WireCoding.encode(own)))
        }
        #expect(try await Self.deliveredHeaders(sim, token, 7).last?["apns-collapse-id"] == "mine")
        #expect(try await Self.deliveredHeaders(sim, endpoint, 3).last?["Topic"] == "news")
    }

    /// A SendRequest produced straight into Kafka, to `count` direct FCM handles.
    static func produceDirect(_ pipeline: PipelineFixture, platform: Platform, handles: [String]) async throws -> String {
        let id = UUID().uuidString.lowercased()
        let format: NotificationFormat = platform == .apns ? .apple : .fcmv1
        let request = SendRequest(
            notificationId: id, hub: "myhub", audience: .handles(handles.map { DirectHandle(platform: platform, handle: $0) }), format: format,
            body: platform == .apns ? #"{"aps":{"alert":"storm"}}"# : #"{"message":{"data":{"k":"v"}}}"#, enqueuedAt: Date())
        try await pipeline.producer.send(KafkaOutgoingRecord(topic: pipeline.topics.requests, key: id, value: try WireCoding.encode(request)))
        return id
    }

    @Test("a 429 storm ends delivered: retries in place, hand-backs with a not-before time")
    func throttleStorm() async throws {
        var faults = SimulatorFaults()
        faults.throttleRate = 0.6
        faults.retryAfterSeconds = 0
        // Two calls per pass and 30 passes: a target still throttled at the end has odds of 0.6^60.
        let pipeline = try await PipelineFixture(
            faults: faults,
            workerSettings: {
                $0.retriesInPlace = 1
                $0.maximumAttempts = 30
            }, workers: [.fcm])
        defer { Task { await pipeline.stop() } }
        let handles = (0..<300).map { "storm-\($0)" }
        let id = try await Self.produceDirect(pipeline, platform: .fcm, handles: handles)
        let results = try await pipeline.results(for: id, count: handles.count)
        let delivered = Set(results.filter { $0.outcome == .delivered }.compactMap(\.handle))
        #expect(
            delivered.count == handles.count,
            "not delivered: \(Set(handles).subtracting(delivered).count); outcomes \(Dictionary(grouping: results, by: \.outcome).mapValues(\.count))"
        )
        #expect(results.contains { $0.attempts > 2 }, "some targets needed a hand-back")
        let statuses = try #require(try await pipeline.sim.stats(.fcm)["statuses"] as? [String: Int])
        #expect((statuses["429"] ?? 0) > 100)
    }

    @Test("a worker killed mid-batch and restarted leaves every target with a result")
    func workerRestart() async throws {
        var faults = SimulatorFaults()
        faults.latencyMs = 150
        let pipeline = try await PipelineFixture(faults: faults, workers: [])
        defer { Task { await pipeline.stop() } }
        let handles = (0..<1_000).map { SimulatedHandle.apns("restart-\($0)") }
        let id = try await Self.produceDirect(pipeline, platform: .apns, handles: handles)

        // The first worker has its own producer and HTTP client, as a process would: killing it
        // loses whatever it had not published.
        let firstClient = PNSHTTPClient(trustRootsFile: pipeline.sim.caFile)
        let firstProducer = try KafkaProducer.make(
            configuration: KafkaProducerConfiguration(bootstrapServers: pipeline.cluster.bootstrapServers), logger: testLogger)
        let (_, firstTask) = try pipeline.startWorker(.apns, producer: firstProducer, client: firstClient, adjust: { $0.window = 500 })
        // Mid-batch: some requests reached the simulator, not all.
        let deadline = ContinuousClock.now + .seconds(30)
        // A poll that times out on a loaded machine is only a poll: the next one asks again.
        while ((try? await pipeline.sim.stats(.apns))?["requests"] as? Int ?? 0) < 50, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(((try? await pipeline.sim.stats(.apns))?["requests"] as? Int ?? 0) < handles.count)
        // Killed: nothing more is published, and the group is cancelled, not shut down.
        await firstProducer.shutdown()
        firstTask.cancel()
        _ = await firstTask.value
        await firstClient.shutdown()

        let results = try await pipeline.withWorker(.apns) { try await pipeline.results(for: id, count: handles.count) }
        let delivered = Set(results.filter { $0.outcome == .delivered }.compactMap(\.handle))
        #expect(delivered.count == handles.count && delivered.isSubset(of: Set(handles)), "lost: \(Set(handles).subtracting(delivered).count)")
    }

    @Test("graceful shutdown mid-batch hands back what waits for a retry, publishes, and stops; a new worker finishes")
    func gracefulStop() async throws {
        var faults = SimulatorFaults()
        faults.throttleRate = 0.5
        faults.retryAfterSeconds = 30
        let pipeline = try await PipelineFixture(faults: faults, workers: [])
        defer { Task { await pipeline.stop() } }
        let handles = (0..<400).map { SimulatedHandle.apns("graceful-\($0)") }
        let id = try await Self.produceDirect(pipeline, platform: .apns, handles: handles)

        let (group, running) = try pipeline.startWorker(.apns)
        let deadline = ContinuousClock.now + .seconds(30)
        while (try await pipeline.sim.stats(.apns)["statuses"] as? [String: Int])?["429"] ?? 0 < 50, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        // Targets now sleep out a 30 s Retry-After; shutdown must not wait for them.
        let stopping = ContinuousClock.now
        await group.triggerGracefulShutdown()
        await running.value
        #expect(ContinuousClock.now - stopping < .seconds(15), "waiting retries were handed back, not slept out")

        try await pipeline.sim.setFaults(SimulatorFaults())
        let results = try await pipeline.withWorker(.apns) { try await pipeline.results(for: id, count: handles.count) }
        let delivered = Set(results.filter { $0.outcome == .delivered }.compactMap(\.handle))
        #expect(delivered.count == handles.count, "lost: \(Set(handles).subtracting(delivered).count)")
        #expect(results.contains { $0.attempts >= 2 }, "handed-back targets were delivered on a later pass")
    }

    /// Where the pushes a graceful shutdown leaves unsent wait: for a place in flight (ten
    /// places), or in the one connection, past the simulator's 1,000 streams.
    struct Waiting: Sendable, CustomTestStringConvertible {
        var places: Int
        var connections: Int
        var pushes: Int
        /// The simulator's answer time: long enough that the stop comes while the first
        /// pushes are still on the wire, in a debug build on a loaded machine.
        var latencyMs: Int
        /// Sent by the first worker at most.
        var sentAtMost: Int
        /// How long the stop may take; sending every push first takes far longer (ten places)
        /// or sends more than `sentAtMost` (one connection).
        var stopWithin: Duration
        var testDescription: String { "\(places) places in flight, \(connections) connection(s), \(pushes) pushes" }
    }

    @Test(
        "graceful shutdown leaves unsent the pushes still waiting for a place in flight or for a stream: handed back at the same attempt, a new worker sends each once",
        .serialized,
        arguments: [
            Waiting(places: 10, connections: 4, pushes: 1_000, latencyMs: 300, sentAtMost: 200, stopWithin: .seconds(10)),
            // 15 s: at 5 s, a loaded run of the whole suite once saw its tenth request only after
            // the first answers came, and 147 waiting pushes had their streams before the stop.
            Waiting(places: 2_000, connections: 1, pushes: 1_500, latencyMs: 15_000, sentAtMost: 1_000, stopWithin: .seconds(30)),
        ])
    func gracefulStopUnsent(_ waiting: Waiting) async throws {
        var faults = SimulatorFaults()
        faults.latencyMs = waiting.latencyMs
        let pipeline = try await PipelineFixture(faults: faults, workers: [])
        defer { Task { await pipeline.stop() } }
        let handles = (0..<waiting.pushes).map { SimulatedHandle.apns("unsent-\($0)") }
        // A send names 1,000 devices at most.
        var sends: [(id: String, count: Int)] = []
        for start in stride(from: 0, to: handles.count, by: 750) {
            let some = Array(handles[start..<min(start + 750, handles.count)])
            sends.append((try await Self.produceDirect(pipeline, platform: .apns, handles: some), some.count))
        }

        // With ten places at 300 ms a push, the whole window would take 30 s to go out. With one
        // connection, 500 wait for the simulator's 1,000 streams.
        // A request's time-out past the simulator's answer time, so that nothing on the wire fails.
        let client = PNSHTTPClient(
            trustRootsFile: pipeline.sim.caFile, connections: waiting.connections, maximumInFlight: waiting.places, requestTimeout: .seconds(60))
        let (group, running) = try pipeline.startWorker(.apns, client: client)
        let requests = { (try? await pipeline.sim.stats(.apns))?["requests"] as? Int ?? 0 }
        let deadline = ContinuousClock.now + .seconds(30)
        while await requests() < 10, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        let stopping = ContinuousClock.now
        await group.triggerGracefulShutdown()
        await running.value
        await client.shutdown()
        let sentByFirst = await requests()
        #expect(ContinuousClock.now - stopping < waiting.stopWithin, "stopped once what was on the wire was answered")
        #expect(sentByFirst <= waiting.sentAtMost, "\(sentByFirst) sent by the first worker")

        try await pipeline.sim.setFaults(SimulatorFaults())
        let results = try await pipeline.withWorker(.apns) {
            var results: [DeliveryResult] = []
            for send in sends { results += try await pipeline.results(for: send.id, count: send.count) }
            return results
        }
        let delivered = Set(results.filter { $0.outcome == .delivered }.compactMap(\.handle))
        #expect(delivered.count == handles.count, "lost: \(Set(handles).subtracting(delivered).count)")
        // Every push went out once, and one sent once counts one attempt.
        #expect(await requests() == handles.count, "requests at the simulator")
        #expect(results.allSatisfy { $0.attempts == 1 }, "attempts: \(Set(results.map(\.attempts)))")
    }

    @Test(
        "single-target batches that arrive together are worked in runs: each ends with one result, no push twice; a dead handle, an expired batch, a waiting one and an unreadable record each end their own way"
    )
    func runs() async throws {
        var faults = SimulatorFaults()
        faults.deadHandles = [SimulatedHandle.apns("runs-dead")]
        // Some pushes throttled: their batches are left by their runs and finished alone.
        faults.throttleRate = 0.05
        faults.retryAfterSeconds = 0
        let pipeline = try await PipelineFixture(faults: faults, workers: [])
        defer { Task { await pipeline.stop() } }
        let topic = pipeline.topics.deliveries(.apns)
        let now = Date()
        func batch(_ seed: String, expiresAt: Date? = nil, notBefore: Date? = nil) -> DeliveryBatch {
            var batch = DeliveryBatch(
                notificationId: UUID().uuidString.lowercased(), hub: "myhub", platform: .apns, kind: .native, format: .apple,
                body: #"{"aps":{"alert":"runs"}}"#, expiresAt: expiresAt, enqueuedAt: now,
                targets: [.init(registrationId: "r-\(seed)", handle: SimulatedHandle.apns(seed))])
            batch.notBefore = notBefore
            return batch
        }
        var batches = (0..<300).map { batch("runs-\($0)") }
        batches[17] = batch("runs-dead")
        batches[40] = batch("runs-late", expiresAt: now.addingTimeInterval(-1))
        batches[41] = batch("runs-waiting", notBefore: now.addingTimeInterval(2))
        let unreadable = UUID().uuidString.lowercased()
        var records = try batches.map { KafkaOutgoingRecord(topic: topic, key: "\($0.notificationId):0", value: try WireCoding.encode($0)) }
        records.insert(
            KafkaOutgoingRecord(topic: topic, key: "\(unreadable):0", value: Data(#"{"schema":"pushhub.delivery-batch.v1","hub":7}"#.utf8)), at: 150)
        // Produced before the worker starts: its first polls take them by the hundred.
        try await pipeline.producer.sendAllAcknowledged(records)

        let reader = try PipelineFixture.consumer(pipeline.cluster, "runs-results", [pipeline.topics.results])
        defer { Task { await reader.close() } }
        let runCount = { MetricsRegistry.shared.counter("pushhub_worker_runs_total", help: "", labels: ["platform": "apns"]).value }
        let batchCount = { MetricsRegistry.shared.counter("pushhub_worker_run_batches_total", help: "", labels: ["platform": "apns"]).value }
        let (runsBefore, batchesBefore) = (runCount(), batchCount())
        let (group, running) = try pipeline.startWorker(.apns)
        defer {
            Task {
                await group.triggerGracefulShutdown()
                await running.value
            }
        }
        let wanted = Set(batches.map(\.notificationId) + [unreadable])
        let collecting = Task {
            var results: [String: [DeliveryResult]] = [:]
            for await record in reader.records {
                guard let batch = try? WireCoding.decode(ResultBatch.self, from: record.value), wanted.contains(batch.notificationId) else {
                    continue
                }
                results[batch.notificationId, default: []] += batch.results ?? []
            }
            return results
        }
        // Every send's result, then a second more for any that came twice. A request answered
        // 429 is not a send done: its retry is still to come (counting them had the wait end
        // with a few retries left, and their results missing, on a loaded machine).
        let timeout = Task {
            let deadline = ContinuousClock.now + .seconds(60)
            func answered() async -> Int {
                guard let stats = try? await pipeline.sim.stats(.apns), let requests = stats["requests"] as? Int else { return 0 }
                return requests - ((stats["statuses"] as? [String: Int])?["429"] ?? 0)
            }
            while ContinuousClock.now < deadline, await answered() < 299 {
                try? await Task.sleep(for: .milliseconds(100))
            }
            try? await Task.sleep(for: .seconds(3))
            collecting.cancel()
        }
        let results = await collecting.value
        timeout.cancel()
        #expect(results.count == wanted.count, "results for \(results.count) of \(wanted.count) sends")
        #expect(results.values.allSatisfy { $0.count == 1 }, "one result a send")
        let outcomes = results.mapValues { $0.first?.outcome }
        #expect(outcomes[batches[17].notificationId] == .invalidHandle)
        #expect(outcomes[batches[40].notificationId] == .expired)
        #expect(outcomes[batches[41].notificationId] == .delivered)
        #expect(outcomes[unreadable] == .rejected)
        #expect(outcomes.filter { $0.value == .delivered }.count == 298)
        // Every target with a request went once, and again only after a 429: 298 delivered and the dead handle.
        let stats = try await pipeline.sim.stats(.apns)
        let throttled = (stats["statuses"] as? [String: Int])?["429"] ?? 0
        #expect(stats["requests"] as? Int == 299 + throttled, "\(stats)")
        #expect(throttled > 0, "some pushes were throttled and retried")
        #expect(runCount() > runsBefore && batchCount() - batchesBefore >= 100, "batches were worked in runs: \(batchCount() - batchesBefore)")
    }

    @Test("past expiresAt a target ends expired without a request; a payload that is too large is not retried; an unreadable batch is rejected")
    func finalOutcomes() async throws {
        let pipeline = try await PipelineFixture(workers: [.apns])
        defer { Task { await pipeline.stop() } }
        let topic = pipeline.topics.deliveries(.apns)
        let now = Date()
        let expired = DeliveryBatch(
            notificationId: UUID().uuidString.lowercased(), hub: "myhub", platform: .apns, kind: .native, format: .apple, body: #"{"aps":{}}"#,
            expiresAt: now.addingTimeInterval(-1), enqueuedAt: now.addingTimeInterval(-60),
            targets: [.init(registrationId: "r1", handle: SimulatedHandle.apns("late"))])
        let large = DeliveryBatch(
            notificationId: UUID().uuidString.lowercased(), hub: "myhub", platform: .apns, kind: .native, format: .apple,
            body: #"{"aps":{"alert":"\#(String(repeating: "x", count: 5000))"}}"#, enqueuedAt: now,
            targets: [.init(registrationId: "r2", handle: SimulatedHandle.apns("large"))])
        let unreadable = UUID().uuidString.lowercased()
        try await pipeline.producer.sendAllAcknowledged([
            KafkaOutgoingRecord(topic: topic, key: "\(expired.notificationId):0", value: try WireCoding.encode(expired)),
            KafkaOutgoingRecord(topic: topic, key: "\(large.notificationId):0", value: try WireCoding.encode(large)),
            KafkaOutgoingRecord(topic: topic, key: "\(unreadable):0", value: Data(#"{"schema":"pushhub.delivery-batch.v1","hub":7}"#.utf8)),
        ])
        let late = try #require(try await pipeline.results(for: expired.notificationId, count: 1).first)
        #expect(late.outcome == .expired && late.registrationId == "r1" && late.attempts == 0)
        let big = try #require(try await pipeline.results(for: large.notificationId, count: 1).first)
        #expect(big.outcome == .payloadRejected && big.pnsReason == "PayloadTooLarge" && big.attempts == 1)
        #expect(try await pipeline.sim.stats(.apns)["requests"] as? Int == 0, "neither was sent")
        let rejected = try await pipeline.results(for: unreadable, count: 0)
        #expect(rejected.first?.outcome == .rejected, "\(rejected)")
    }

    @Test("hostile batches end or are refused, never trap or hold the worker: an expiry past 9999, an attempt past the bound, a far not-before")
    func hostileBatches() async throws {
        let pipeline = try await PipelineFixture(workerSettings: { $0.maximumBackoff = .seconds(1) }, workers: [.apns])
        defer { Task { await pipeline.stop() } }
        let topic = pipeline.topics.deliveries(.apns)
        let now = Date()
        func batch(_ name: String, kind: DeliveryBatch.Kind = .native, template: Template? = nil) -> DeliveryBatch {
            DeliveryBatch(
                notificationId: UUID().uuidString.lowercased(), hub: "myhub", platform: .apns, kind: kind, format: kind == .native ? .apple : nil,
                body: kind == .native ? #"{"aps":{"alert":"hi"}}"# : #"{"message":"hi"}"#, enqueuedAt: now,
                targets: [.init(registrationId: name, handle: SimulatedHandle.apns(name), template: template)])
        }
        // Int.max seconds: read as a Date and back to an Int, it trapped the worker, and the
        // record, never done, trapped it again at every start.
        let expiry = batch("expiry", kind: .template, template: Template(body: #"{"aps":{"alert":"$(message)"}}"#, expiry: "9223372036854775807"))
        var attempt = batch("attempt")
        attempt.attempt = .max
        // May not go before it expires: expired at once, not held until 9999.
        var never = batch("never")
        never.notBefore = RFC3339.parse("9999-12-31T00:00:00Z")
        never.expiresAt = now.addingTimeInterval(3600)
        // An hour ahead, within its expiry: waits no longer than `maximumBackoff`.
        var later = batch("later")
        later.notBefore = now.addingTimeInterval(3600)
        later.expiresAt = now.addingTimeInterval(7200)
        let good = batch("good")
        try await pipeline.producer.sendAllAcknowledged(
            try [expiry, attempt, never, later, good].map {
                KafkaOutgoingRecord(topic: topic, key: "\($0.notificationId):0", value: try WireCoding.encode($0))
            })
        let started = ContinuousClock.now
        let refusedExpiry = try #require(try await pipeline.results(for: expiry.notificationId, count: 1).first)
        #expect(refusedExpiry.outcome == .payloadRejected, "\(refusedExpiry)")
        #expect(refusedExpiry.pnsReason?.contains("is not a time from 1970 to 9999") == true, "\(refusedExpiry)")
        let refusedAttempt = try #require(try await pipeline.results(for: attempt.notificationId, count: 0).first)
        #expect(refusedAttempt.outcome == .rejected && refusedAttempt.pnsReason?.contains("attempt: must be 1 to 1000") == true, "\(refusedAttempt)")
        // Its rejected result names the hub the record names, so it settles the send's outcome
        // (a result of no hub counts for no send).
        var recorded = false
        let recording = ContinuousClock.now + .seconds(30)
        while !recorded, ContinuousClock.now < recording {
            recorded = try await pipeline.store.notification(hub: "myhub", id: attempt.notificationId) != nil
            if !recorded { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(recorded, "the refused batch's send has its outcome")
        let expired = try #require(try await pipeline.results(for: never.notificationId, count: 1).first)
        #expect(expired.outcome == .expired, "\(expired)")
        #expect(try await pipeline.results(for: later.notificationId, count: 1).first?.outcome == .delivered)
        #expect(try await pipeline.results(for: good.notificationId, count: 1).first?.outcome == .delivered)
        #expect(ContinuousClock.now - started < .seconds(30), "nothing waited for its not-before time")
        #expect(try await pipeline.sim.deliveries(SimulatedHandle.apns("never")).isEmpty)
    }

    @Test("results too large for one Kafka record go in several: a batch of 500 targets near Kafka's limit has all its results")
    func largeResultsCut() async throws {
        let pipeline = try await PipelineFixture(workers: [.apns])
        defer { Task { await pipeline.stop() } }
        // Not APNs tokens (hex, at most 200 bytes): each is refused unsent, and its result carries
        // its handle and id back with the answer: a batch just under Kafka's 1,000,000 bytes has
        // results over it.
        let targets = (0..<500).map { index in
            DeliveryBatch.Target(
                registrationId: String(format: "r%04d", index) + String(repeating: "i", count: 935),
                handle: String(format: "h%04d", index) + String(repeating: "z", count: 995))
        }
        let batch = DeliveryBatch(
            notificationId: UUID().uuidString.lowercased(), hub: "myhub", platform: .apns, kind: .native, format: .apple,
            body: #"{"aps":{"alert":"hi"}}"#, enqueuedAt: Date(), targets: targets)
        let value = try WireCoding.encode(batch)
        #expect(value.count < 1_000_000 && value.count > 950_000, "\(value.count) bytes")
        try await pipeline.producer.send(
            KafkaOutgoingRecord(topic: pipeline.topics.deliveries(.apns), key: "\(batch.notificationId):0", value: value))
        let results = try await pipeline.results(for: batch.notificationId, count: 500)
        #expect(Set(results.compactMap(\.handle)) == Set(targets.map(\.handle)))
        #expect(results.count == 500, "each once")
    }
}
