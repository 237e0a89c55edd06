import Foundation
import HTTPTypes
import Hummingbird
import Logging
import PushConfiguration
import PushIngress
import PushKafka
import PushModel
import PushOps
import PushProviders
import PushTestSupport
import ServiceLifecycle
import Synchronization
import Testing

/// A receiver of webhook POSTs on a free port, answering each from `answers` in turn (then 200).
final class WebhookReceiver: Sendable {
    struct Post: Sendable {
        var id: String
        var signature: String
        var body: Data
    }

    /// What the server's handler and the test share.
    final class State: Sendable {
        let posts = Mutex<[Post]>([])
        let answers: Mutex<[HTTPResponse.Status]>
        let port = Mutex<Int?>(nil)

        /// Bytes of body every answer carries.
        let answerBytes: Int

        init(answers: [HTTPResponse.Status], answerBytes: Int) {
            self.answers = Mutex(answers)
            self.answerBytes = answerBytes
        }
    }

    let state: State
    let task: Task<Void, Never>

    init(answers: [HTTPResponse.Status], answerBytes: Int = 0) async throws {
        let state = State(answers: answers, answerBytes: answerBytes)
        self.state = state
        let router = Router()
        router.post("/hook") { request, _ -> Response in
            var request = request
            let body = Data(buffer: try await request.collectBody(upTo: 1 << 20))
            let post = Post(
                id: request.headers[HTTPField.Name("PushHub-Webhook-Id")!] ?? "",
                signature: request.headers[HTTPField.Name("PushHub-Signature")!] ?? "", body: body)
            state.posts.withLock { $0.append(post) }
            return Response(
                status: state.answers.withLock { $0.isEmpty ? .ok : $0.removeFirst() },
                body: .init(byteBuffer: ByteBuffer(repeating: UInt8(ascii: "x"), count: state.answerBytes)))
        }
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in state.port.withLock { $0 = channel.localAddress?.port } },
            logger: Logger(label: "receiver") { _ in SwiftLogNoOpLogHandler() })
        task = Task { try? await app.runService() }
        let deadline = ContinuousClock.now + .seconds(10)
        while state.port.withLock({ $0 }) == nil, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
    }

    var url: String { "http://127.0.0.1:\(state.port.withLock { $0 } ?? 0)/hook" }

    /// The posts so far, once there are `count`.
    func posts(_ count: Int, timeout: Duration = .seconds(30)) async throws -> [Post] {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let seen = state.posts.withLock { $0 }
            if seen.count >= count { return seen }
            try await Task.sleep(for: .milliseconds(20))
        }
        return state.posts.withLock { $0 }
    }

    deinit { task.cancel() }
}

@Suite("Webhooks", .timeLimit(.minutes(2)))
struct WebhookTests {
    static let secret = "a secret of more than thirty-two characters"

    /// A sender for `myhub` reading the fixture's results topic, running in a group of its own.
    /// Returns once its consumer has its partitions (a new webhook group starts at the end).
    static func run(_ fixture: MessagingFixture, webhook: WebhookConfiguration, group: String = "hooks-\(UUID().uuidString)") async throws -> (
        ServiceGroup, Task<Void, Never>
    ) {
        var configuration = KafkaConsumerConfiguration(bootstrapServers: fixture.cluster.bootstrapServers, groupID: group)
        WebhookSender.tune(&configuration)
        configuration.sessionTimeout = .seconds(3)
        let consumer = try KafkaConsumer.make(configuration: configuration, topics: [fixture.topics.results], logger: MessagingFixture.logger)
        let topics = fixture.topics
        let producer = fixture.producer
        let sender = WebhookSender(
            consumer: consumer, hub: "myhub", webhook: webhook, http: PNSHTTPClient(connections: 1, requestTimeout: .seconds(5)),
            backoff: (.milliseconds(100), .milliseconds(400)), logger: MessagingFixture.logger
        ) { body, reason in
            try await WebhookSender.deadLetter(
                body, reason: reason, hub: "myhub", topics: topics, producer: producer, logger: MessagingFixture.logger)
        }
        let group = ProcessLifecycle.group([.init(service: consumer), .init(service: sender)], signals: false, logger: MessagingFixture.logger)
        let task = Task { _ = try? await group.run() }
        #expect(await consumer.positioned(within: .seconds(20)))
        return (group, task)
    }

    /// A worker's results for `hub`: one delivered, one invalid handle.
    static func results(_ fixture: MessagingFixture, hub: String = "myhub") async throws -> String {
        let id = UUID().uuidString.lowercased()
        let batch = ResultBatch(
            notificationId: id, hub: hub, platform: .apns,
            results: [
                DeliveryResult(registrationId: "r-ok", handle: "aa11", outcome: .delivered, pnsStatus: 200, attempts: 1, dwellMs: 5),
                DeliveryResult(
                    registrationId: "r-dead", handle: "dead22", outcome: .invalidHandle, pnsStatus: 410, pnsReason: "Unregistered", attempts: 1,
                    dwellMs: 5),
            ])
        try await fixture.producer.send(KafkaOutgoingRecord(topic: fixture.topics.results, key: id, value: WireCoding.encode(batch)))
        return id
    }

    @Test("failures only, signed, tried again with the same id while the receiver fails, and the signature verifies as docs/webhooks.md shows")
    func failuresSignedAndRetried() async throws {
        let fixture = try await MessagingFixture()
        let receiver = try await WebhookReceiver(answers: [.serviceUnavailable, .badGateway])
        let (group, task) = try await Self.run(fixture, webhook: WebhookConfiguration(url: receiver.url, secret: Self.secret, outcomes: .failures))
        _ = try await Self.results(fixture, hub: "otherhub")
        let id = try await Self.results(fixture)
        let posts = try await receiver.posts(3)
        #expect(posts.count == 3, "two refusals, then taken")
        #expect(Set(posts.map(\.id)).count == 1, "every try of the batch has one id")
        let body = try #require(try JSONSerialization.jsonObject(with: posts[2].body) as? [String: Any])
        #expect(body["hub"] as? String == "myhub")
        let events = try #require(body["events"] as? [[String: Any]])
        #expect(events.count == 1, "only the failure, only this hub's: \(events)")
        #expect(events.first?["notificationId"] as? String == id && events.first?["handle"] as? String == "dead22")
        #expect(events.first?["outcome"] as? String == "invalidHandle" && events.first?["pnsStatus"] as? Int == 410)
        #expect(events.first?["time"] != nil && events.first?["platform"] as? String == "apns")
        // The signature, checked here, and by the documentation's own Python.
        let fields = Dictionary(
            uniqueKeysWithValues: posts[2].signature.split(separator: ",").map { $0.split(separator: "=", maxSplits: 1) }.map {
                (String($0[0]), String($0[1]))
            })
        let timestamp = try #require(fields["t"].flatMap(Int.init))
        #expect(fields["v1"] == WebhookSender.signature(secret: Self.secret, timestamp: timestamp, id: posts[2].id, body: posts[2].body))
        let post = posts[2]
        #expect(try await Self.verifiedByTheDocs(post, secret: Self.secret))
        #expect(
            try await Self.verifiedByTheDocs(.init(id: post.id, signature: post.signature, body: post.body + Data(" ".utf8)), secret: Self.secret)
                == false)
        #expect(try await Self.verifiedByTheDocs(.init(id: post.id + "0", signature: post.signature, body: post.body), secret: Self.secret) == false)
        #expect(try await Self.verifiedByTheDocs(post, secret: Self.secret + "x") == false)
        #expect(events.first?["id"] as? String != nil, "each event names its record")
        await group.triggerGracefulShutdown()
        await task.value
    }

    @Test("a receiver that says a lot with its 2xx has taken the POST")
    func chattyReceiver() async throws {
        let fixture = try await MessagingFixture()
        let receiver = try await WebhookReceiver(answers: [], answerBytes: 200_000)
        let (group, task) = try await Self.run(fixture, webhook: WebhookConfiguration(url: receiver.url, secret: Self.secret))
        _ = try await Self.results(fixture)
        _ = try await receiver.posts(1)
        try await Task.sleep(for: .seconds(1))
        #expect(receiver.state.posts.withLock { $0.count } == 1, "taken once, not tried again")
        await group.triggerGracefulShutdown()
        await task.value
    }

    @Test("a receiver down across a restart loses nothing: the next start posts the batch again, with its id")
    func downAcrossRestart() async throws {
        let fixture = try await MessagingFixture()
        let receiver = try await WebhookReceiver(answers: Array(repeating: .serviceUnavailable, count: 1000))
        let webhook = WebhookConfiguration(url: receiver.url, secret: Self.secret)
        let group = "hooks-\(UUID().uuidString)"
        let (first, firstTask) = try await Self.run(fixture, webhook: webhook, group: group)
        let id = try await Self.results(fixture)
        let failed = try await receiver.posts(2)
        await first.triggerGracefulShutdown()
        await firstTask.value
        receiver.state.answers.withLock { $0 = [] }
        let (second, secondTask) = try await Self.run(fixture, webhook: webhook, group: group)
        let posts = try await receiver.posts(failed.count + 1)
        let taken = try #require(posts.last)
        #expect(taken.id == failed[0].id, "the same batch")
        let events = try #require((try JSONSerialization.jsonObject(with: taken.body) as? [String: Any])?["events"] as? [[String: Any]])
        #expect(events.count == 2 && events.allSatisfy { $0["notificationId"] as? String == id })
        await second.triggerGracefulShutdown()
        await secondTask.value
    }

    @Test("the ingress runs the webhooks pushhub.yaml gives its hubs")
    func wiredIntoTheIngress() async throws {
        let fixture = try await MessagingFixture()
        let receiver = try await WebhookReceiver(answers: [])
        var hubs = IngressFixture.hubs
        hubs.hubs[0].webhooks = [WebhookConfiguration(url: receiver.url, secret: Self.secret, outcomes: .failures)]
        var configuration = IngressConfiguration(hubs: hubs)
        configuration.port = 0
        let wiring = KafkaWiring(
            servers: fixture.cluster.bootstrapServers, topics: fixture.topics, producer: fixture.producer,
            tuneConsumer: { $0.sessionTimeout = .seconds(3) })
        let group = ProcessLifecycle.group(
            [.init(service: fixture.producer)]
                + (try makeIngressServices(
                    configuration: configuration, store: fixture.store, kafka: wiring, logger: MessagingFixture.logger, onListening: { _ in })),
            signals: false, logger: MessagingFixture.logger)
        let task = Task { try? await group.run() }
        let id = try await Self.results(fixture)
        let post = try #require(try await receiver.posts(1, timeout: .seconds(60)).first)
        let events = try #require((try JSONSerialization.jsonObject(with: post.body) as? [String: Any])?["events"] as? [[String: Any]])
        #expect(events.map { $0["notificationId"] as? String } == [id] && events.first?["outcome"] as? String == "invalidHandle", "\(events)")
        await group.triggerGracefulShutdown()
        await task.value
    }

    @Test("every outcome; a batch the receiver refuses for good is dead-lettered with the answer, and the next one goes on")
    func refusedIsDeadLettered() async throws {
        let fixture = try await MessagingFixture()
        let receiver = try await WebhookReceiver(answers: [.badRequest])
        let (group, task) = try await Self.run(fixture, webhook: WebhookConfiguration(url: receiver.url, secret: Self.secret))
        _ = try await Self.results(fixture)
        _ = try await receiver.posts(1)
        let second = try await Self.results(fixture)
        let posts = try await receiver.posts(2)
        #expect(posts.count == 2)
        let events = try #require((try JSONSerialization.jsonObject(with: posts[1].body) as? [String: Any])?["events"] as? [[String: Any]])
        #expect(events.map { $0["outcome"] as? String } == ["delivered", "invalidHandle"])
        #expect(events.first?["notificationId"] as? String == second)
        // The refused batch's record, with the answer.
        var configuration = KafkaConsumerConfiguration(bootstrapServers: fixture.cluster.bootstrapServers, groupID: "dl-\(UUID().uuidString)")
        configuration.sessionTimeout = .seconds(3)
        let deadLetters = try KafkaConsumer.make(configuration: configuration, topics: [fixture.topics.deadLetter], logger: MessagingFixture.logger)
        var reason: String?
        for await record in deadLetters.records {
            reason = record.header(DeadLetterHeader.error).map { String(decoding: $0, as: UTF8.self) }
            break
        }
        await deadLetters.close()
        #expect(reason?.contains("refused POST") == true && reason?.hasSuffix(": 400") == true, "\(reason ?? "none")")
        await group.triggerGracefulShutdown()
        await task.value
    }

    @Test("pushhub.yaml's webhooks are checked: https (http to this machine only), no credentials, a long secret, at most four")
    func configuration() throws {
        func hubs(_ webhooks: [WebhookConfiguration]) -> HubsConfiguration {
            var hubs = IngressFixture.hubs
            hubs.hubs[0].webhooks = webhooks
            return hubs
        }
        try hubs([WebhookConfiguration(url: "https://hooks.example.com/x", secret: Self.secret)]).validate()
        try hubs([WebhookConfiguration(url: "http://127.0.0.1:9000/x", secret: Self.secret)]).validate()
        for (webhook, named) in [
            (WebhookConfiguration(url: "http://hooks.example.com/x", secret: Self.secret), "webhooks[0].url: must be https"),
            (WebhookConfiguration(url: "https://user:pw@hooks.example.com/x", secret: Self.secret), "webhooks[0].url: must not carry credentials"),
            (WebhookConfiguration(url: "https://hooks.example.com/x", secret: "short"), "webhooks[0].secret"),
            (WebhookConfiguration(url: "not a url", secret: Self.secret), "webhooks[0].url"),
        ] {
            #expect(throws: ConfigurationError.self) { try hubs([webhook]).validate() }
            do { try hubs([webhook]).validate() } catch { #expect("\(error)".contains(named), "\(error)") }
        }
        let twice = Array(repeating: WebhookConfiguration(url: "https://hooks.example.com/x", secret: Self.secret), count: 2)
        do { try hubs(twice).validate() } catch { #expect("\(error)".contains("webhooks[1].url: the hub has a webhook at this URL already")) }
        let five = Array(repeating: WebhookConfiguration(url: "https://hooks.example.com/x", secret: Self.secret), count: 5)
        do { try hubs(five).validate() } catch { #expect("\(error)".contains("webhooks: at most 4")) }
        // It reads back from YAML as written.
        let yaml = try hubs([WebhookConfiguration(url: "https://hooks.example.com/x", secret: Self.secret, outcomes: .failures)]).yaml()
        #expect(try HubsConfiguration.parse(yaml).hubs[0].webhooks?.first?.outcomes == .failures)
    }

    /// Runs the Python of docs/webhooks.md's "Verifying a POST" on a signature and body.
    static func verifiedByTheDocs(_ post: WebhookReceiver.Post, secret: String) async throws -> Bool {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("docs/webhooks.md"), encoding: .utf8)
        let section = try #require(text.range(of: "## Verifying a POST"))
        let start = try #require(text.range(of: "```python\n", range: section.upperBound..<text.endIndex))
        let end = try #require(text.range(of: "```\n", range: start.upperBound..<text.endIndex))
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-hook-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try String(text[start.upperBound..<end.lowerBound]).write(
            to: directory.appendingPathComponent("verify.py"), atomically: true, encoding: .utf8)
        try post.body.write(to: directory.appendingPathComponent("body"))
        let script = """
            import sys; sys.path.insert(0, sys.argv[1]); from verify import verify
            print(verify(sys.argv[2], sys.argv[3], sys.argv[4], open(sys.argv[1] + '/body', 'rb').read()))
            """
        let (status, output) = try await ProcessLaunch.output(["python3", "-c", script, directory.path, secret, post.signature, post.id])
        try #require(status == 0, "\(output)")
        return output.trimmingCharacters(in: .whitespacesAndNewlines) == "True"
    }
}

@Suite("Results watcher", .timeLimit(.minutes(2)))
struct ResultsWatcherTests {
    @Test("one reader for many tails: each tail gets its own notification's results; the reader closes when idle and starts again")
    func sharedReader() async throws {
        let fixture = try await MessagingFixture()
        let watcher = ResultsWatcher(
            servers: fixture.cluster.bootstrapServers, topics: fixture.topics, idleAfter: .milliseconds(200), logger: MessagingFixture.logger)
        for round in 0..<2 {
            let ids = (0..<3).map { _ in UUID().uuidString.lowercased() }
            let tails = try ids.map { try watcher.tail(of: $0) }
            for tail in tails { #expect(await tail.positioned(within: .seconds(20)), "round \(round)") }
            for id in ids.reversed() {
                let batch = ResultBatch(
                    notificationId: id, hub: "myhub", platform: .apns,
                    results: [DeliveryResult(registrationId: "r-\(id)", handle: "h", outcome: .delivered, pnsStatus: 200, attempts: 1, dwellMs: 1)])
                try await fixture.producer.send(KafkaOutgoingRecord(topic: fixture.topics.results, key: id, value: WireCoding.encode(batch)))
            }
            for (id, tail) in zip(ids, tails) {
                let (seen, done) = await tail.read(from: [String](), within: .seconds(20)) { seen, batch in
                    seen += (batch.results ?? []).compactMap(\.registrationId)
                    return !seen.isEmpty
                }
                #expect(done && seen == ["r-\(id)"], "round \(round): \(seen)")
            }
            // Idle: the reader closes; the next round's first tail starts it again.
            #expect(watcher.isReading)
            let deadline = ContinuousClock.now + .seconds(20)
            while watcher.isReading, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
            #expect(!watcher.isReading, "closed once idle")
        }
    }
}
