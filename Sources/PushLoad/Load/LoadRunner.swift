import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import PushIngress
import PushKafka
import PushModel
import PushProviders

/// Runs one load scenario against a running PushHub and measures it: sends and registrations
/// as they are answered, results from `pushhub.results` until every target's result came (or
/// the drain time-out), a progress line each second, and the report at the end.
public struct LoadRunner: Sendable {
    public let settings: LoadSettings
    let logger: Logger

    public init(settings: LoadSettings, logger: Logger) {
        self.settings = settings
        self.logger = logger
    }

    public func run(progress: @escaping @Sendable (String) -> Void) async throws(LoadFailure) -> LoadReport {
        try settings.check()
        let recorder = LoadRecorder()
        let startedAt = Date()
        let http = PNSHTTPClient(
            connections: 1, connectionsPerHost: settings.concurrency, maximumInFlight: settings.concurrency, requestTimeout: .seconds(30))
        let hub = HubAPIClient(settings: settings, http: http)
        var watcher: ResultsWatcher?
        var producer: KafkaProducer?
        do {
            if settings.scenario.measuresResults, let servers = settings.kafka {
                watcher = try await ResultsWatcher.start(servers: servers, topic: settings.topics.results, recorder: recorder, logger: logger)
            }
            if settings.via == .kafka, let servers = settings.kafka {
                let made = try KafkaProducer.make(configuration: KafkaProducerConfiguration(bootstrapServers: servers), logger: logger)
                // Learnt before the clock starts, so the first sends do not wait for it.
                await made.prepare(topics: [settings.topics.requests])
                producer = made
            }
        } catch {
            await watcher?.stop()
            await hub.shutdown()
            await http.shutdown()
            throw LoadFailure("Kafka at \(settings.kafka?.joined(separator: ",") ?? "?"): \(error)")
        }
        let sender = Sender(settings: settings, hub: hub, producer: producer, recorder: recorder)
        let ticker = Task {
            var previous = recorder.snapshot(perNotification: false)
            var previousAt = recorder.now()
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(1))
                let current = recorder.snapshot(perNotification: false)
                let at = recorder.now()
                progress(ProgressLine.render(current, previous: previous, seconds: at, interval: at - previousAt))
                previous = current
                previousAt = at
            }
        }

        let deadline = ContinuousClock.now + .seconds(settings.timeout)
        var phases: [String: Double] = [:]
        let phaseStart = recorder.now()
        // Every scenario's requests on the event loop of their connections (`HubAPIClient.executor`).
        await withTaskExecutorPreference(hub.executor) {
            switch settings.scenario {
            case .register:
                await Pacing.run(count: settings.population.devices, rate: settings.registerRate, concurrency: settings.concurrency, until: deadline)
                {
                    index, due in
                    await hub.register(settings.population.installation(index), due: due, recorder: recorder)
                }
                phases["register"] = recorder.now() - phaseStart
            case .send:
                await sender.sendPaced(until: deadline, mixed: false)
                phases["send"] = recorder.now() - phaseStart
            case .broadcast:
                await sender.send(sender.plan(.broadcast), due: .now)
                phases["send"] = recorder.now() - phaseStart
            case .mixed:
                let population = settings.population
                let registerRate = settings.registerRate ?? max(1, settings.rate / 10)
                async let registrations: Void = Pacing.run(
                    count: Int(registerRate * settings.duration), rate: registerRate, concurrency: max(1, settings.concurrency / 4), until: deadline
                ) { _, due in
                    await hub.register(population.installation(Int.random(in: 0..<population.devices)), due: due, recorder: recorder)
                }
                await sender.sendPaced(until: deadline, mixed: true)
                await registrations
                phases["send"] = recorder.now() - phaseStart
            }
        }

        // Every result, or until the drain time-out.
        if let watcher {
            let drainEnd = min(deadline, ContinuousClock.now + .seconds(settings.drainTimeout))
            while !recorder.isComplete, ContinuousClock.now < drainEnd {
                try? await Task.sleep(for: .milliseconds(50))
            }
            await watcher.stop()
        }
        // A broadcast is done for its sender when the hub API says Completed: the ingress has
        // recorded every outcome.
        var recordedAt: Double?
        if settings.scenario == .broadcast, let id = recorder.snapshot().firstAccepted {
            let end = min(deadline, ContinuousClock.now + .seconds(settings.drainTimeout))
            while ContinuousClock.now < end {
                if await hub.state(of: id) == "Completed" {
                    recordedAt = recorder.now() - phaseStart
                    break
                }
                try? await Task.sleep(for: .milliseconds(100))
            }
        }
        ticker.cancel()
        await producer?.shutdown()
        await hub.shutdown()
        await http.shutdown()
        let measured = recorder.snapshot()
        progress(ProgressLine.render(measured, previous: measured, seconds: recorder.now(), interval: 0))
        return LoadReport(
            settings: settings, startedAt: startedAt, seconds: recorder.now(), phaseStart: phaseStart, phaseSeconds: phases,
            outcomesRecordedSeconds: recordedAt, measurements: measured, timedOut: ContinuousClock.now >= deadline)
    }
}

/// Makes the sends of a run, over HTTP or Kafka.
struct Sender: Sendable {
    let settings: LoadSettings
    let hub: HubAPIClient
    let producer: KafkaProducer?
    let recorder: LoadRecorder

    struct Planned: Sendable {
        /// A tag expression; nil sends to everyone.
        var audience: String?
        var format: NotificationFormat
    }

    /// `rate × duration` sends on schedule; `mixed` sends one in ten to the tag expression.
    func sendPaced(until deadline: ContinuousClock.Instant, mixed: Bool) async {
        await Pacing.run(count: settings.plannedSends, rate: settings.rate, concurrency: settings.concurrency, until: deadline) { index, due in
            await send(plan(index, mixed: mixed), due: due)
        }
    }

    func plan(_ index: Int, mixed: Bool) -> Planned {
        plan(mixed ? (index % 10 == 9 ? .tag : .user) : settings.audience)
    }

    /// A send to `audience`: template, or native in the user's platform (a user's first
    /// device is the device of the user's own index) or in `--platform`.
    func plan(_ audience: LoadAudience) -> Planned {
        let population = settings.population
        var platform = settings.nativePlatform
        let tags: String?
        switch audience {
        case .user:
            let user = Int.random(in: 0..<population.users)
            platform = population.platform(user)
            tags = population.userTag(user)
        case .tag: tags = settings.tagExpression
        case .broadcast: tags = nil
        }
        return Planned(audience: tags, format: settings.format == .template ? .template : platform.templateFormat)
    }

    func send(_ planned: Planned, due: ContinuousClock.Instant) async {
        let body = planned.format.platform.map { LoadPayloads.native($0) } ?? LoadPayloads.templateProperties
        let headers = planned.format.platform.map { LoadPayloads.nativeHeaders($0) } ?? [:]
        guard let producer else {
            await hub.send(format: planned.format, tags: planned.audience, headers: headers, body: body, due: due, recorder: recorder)
            return
        }
        do {
            let contentType = try SendRequestBuilder.acceptedContentTypes(for: planned.format, headers: headers).first
            let request = try SendRequestBuilder().build(
                hub: settings.hub, format: planned.format.rawValue, tags: planned.audience, headers: headers, body: Data(body.utf8),
                contentType: contentType)
            try await KafkaNotificationPublisher(producer: producer, topics: settings.topics).publish(request)
            recorder.sendAccepted(notificationId: request.notificationId, latency: (ContinuousClock.now - due).seconds)
        } catch {
            recorder.sendFailed(kind: "kafka: \(error)")
        }
    }
}

/// Runs `count` calls, each due at `index / rate` seconds after the start (all at once without
/// a rate), at most `concurrency` at a time, none started after `deadline`. A call that cannot
/// start when due starts late, and its latency counts from when it was due.
enum Pacing {
    static func run(
        count: Int, rate: Double?, concurrency: Int, until deadline: ContinuousClock.Instant,
        _ body: @escaping @Sendable (Int, ContinuousClock.Instant) async -> Void
    ) async {
        let start = ContinuousClock.now
        await withTaskGroup(of: Void.self) { group in
            var inFlight = 0
            for index in 0..<count {
                var due: ContinuousClock.Instant?
                if let rate {
                    let scheduled = start + .nanoseconds(Int64(Double(index) / rate * 1e9))
                    if scheduled - .now > .milliseconds(1) { try? await Task.sleep(until: scheduled, clock: .continuous) }
                    due = scheduled
                }
                if inFlight >= concurrency {
                    await group.next()
                    inFlight -= 1
                }
                guard ContinuousClock.now < deadline else { break }
                // Without a schedule a call is due when its slot frees up.
                let dueAt = due ?? .now
                group.addTask { await body(index, dueAt) }
                inFlight += 1
            }
        }
    }
}

/// Registrations and sends through the hub API, authorized by a SAS token of the connection string.
struct HubAPIClient: Sendable {
    let settings: LoadSettings
    let http: PNSHTTPClient
    /// Keep-alive connections of our own to a plain-HTTP ingress (`http://HOST:PORT`);
    /// async-http-client cost the load generator more CPU per request than the ingress's
    /// own HTTP handling.
    let plain: HTTP1Client?
    /// The one event loop of `plain`'s connections, and the tasks that use them run there too
    /// (`executor`): a request and its answer stay on one thread. On Swift's pool, each was
    /// handed to the loop and back, and a quarter of the load generator's CPU went to
    /// switching threads.
    let loop: MultiThreadedEventLoopGroup?
    let executor: EventLoopTaskExecutor?
    let token: String

    init(settings: LoadSettings, http: PNSHTTPClient) {
        self.settings = settings
        self.http = http
        if let url = URLComponents(string: settings.url), url.scheme == "http", let host = url.host, let port = url.port, url.path.isEmpty {
            let loop = MultiThreadedEventLoopGroup(numberOfThreads: 1)
            plain = HTTP1Client(host: host, port: port, connections: settings.concurrency, group: loop)
            self.loop = loop
            executor = EventLoopTaskExecutor(loop.next())
        } else {
            (plain, loop, executor) = (nil, nil, nil)
        }
        token = settings.connection.token(for: "/\(settings.hub)", lifetime: settings.timeout + 600)
    }

    /// One request to `path` (from the hub's name on) on the ingress.
    private func exchange(_ method: HTTPMethod, _ path: String, headers: [(String, String)], body: Data?) async throws -> PNSResponse {
        if let plain { return try await plain.send(method, path: path, headers: headers, body: body) }
        return try await http.send(method, settings.url + path, headers: headers, body: body)
    }

    func shutdown() async {
        await plain?.shutdown()
        try? await loop?.shutdownGracefully()
    }

    func register(_ installation: Installation, due: ContinuousClock.Instant, recorder: LoadRecorder) async {
        let body = installation.wireJSON()
        let path = "/\(settings.hub)/installations/\(installation.installationId)?api-version=2015-04"
        do {
            let response = try await exchange(.PUT, path, headers: [("Authorization", token), ("Content-Type", "application/json")], body: body)
            if (200..<300).contains(response.status) {
                recorder.registered(latency: (ContinuousClock.now - due).seconds)
            } else {
                recorder.registrationFailed(kind: Self.kind(response))
            }
        } catch {
            recorder.registrationFailed(kind: "transport: \(error)")
        }
    }

    func send(
        format: NotificationFormat, tags: String?, headers: [String: String], body: String, due: ContinuousClock.Instant, recorder: LoadRecorder
    ) async {
        var fields = [("Authorization", token), ("ServiceBusNotification-Format", format.rawValue)]
        if let tags { fields.append(("ServiceBusNotification-Tags", tags)) }
        let contentType = (try? SendRequestBuilder.acceptedContentTypes(for: format, headers: headers).first) ?? "application/json"
        fields.append(("Content-Type", "\(contentType);charset=utf-8"))
        fields += headers.map { ($0.key, $0.value) }
        do {
            let response = try await exchange(.POST, "/\(settings.hub)/messages?api-version=2015-04", headers: fields, body: Data(body.utf8))
            guard response.status == 201, let id = response.headers.first(name: "TrackingId") else {
                recorder.sendFailed(kind: Self.kind(response))
                return
            }
            recorder.sendAccepted(notificationId: id, latency: (ContinuousClock.now - due).seconds)
        } catch {
            recorder.sendFailed(kind: "transport: \(error)")
        }
    }

    /// The State of a notification's details (`GET /{hub}/messages/{id}`), e.g. `Completed`.
    func state(of id: String) async -> String? {
        guard
            let response = try? await exchange(
                .GET, "/\(settings.hub)/messages/\(id)?api-version=2015-04", headers: [("Authorization", token)], body: nil),
            response.status == 200
        else { return nil }
        let text = String(decoding: response.body, as: UTF8.self)
        guard let start = text.range(of: "<State>"), let end = text.range(of: "</State>", range: start.upperBound..<text.endIndex) else { return nil }
        return String(text[start.upperBound..<end.lowerBound])
    }

    /// An error kind from an HTTP answer: the status, and the start of what the server said.
    static func kind(_ response: PNSHTTPClient.Response) -> String {
        let said = String(decoding: response.body.prefix(120), as: UTF8.self).replacingOccurrences(of: "\n", with: " ")
        return "http \(response.status)" + (said.isEmpty ? "" : ": \(said)")
    }
}

/// Reads `pushhub.results` from its end, as a group of its own, into the recorder.
final class ResultsWatcher: Sendable {
    let consumer: KafkaConsumer
    let reading: Task<Void, Never>

    private init(consumer: KafkaConsumer, reading: Task<Void, Never>) {
        self.consumer = consumer
        self.reading = reading
    }

    static func start(servers: [String], topic: String, recorder: LoadRecorder, logger: Logger) async throws -> ResultsWatcher {
        var configuration = KafkaConsumerConfiguration(bootstrapServers: servers, groupID: "pushhub-load-\(UUID().uuidString.lowercased())")
        configuration.offsetReset = .latest
        configuration.clientID = "pushhub-load"
        let consumer = try KafkaConsumer.make(configuration: configuration, topics: [topic], logger: logger)
        let reading = Task {
            let decoder = JSONDecoder()
            for await record in consumer.records {
                if let batch = try? decoder.decode(ResultSummary.self, from: record.value) { recorder.result(batch) }
                consumer.markDone(record)
            }
        }
        // Results count only once the group has its partitions and knows where their end is.
        guard await consumer.positioned(within: .seconds(30)) else {
            reading.cancel()
            await consumer.close()
            throw LoadFailure("no partition of \(topic) was assigned and read within 30 s")
        }
        return ResultsWatcher(consumer: consumer, reading: reading)
    }

    func stop() async {
        await consumer.close()
        await reading.value
    }
}

/// Runs tasks on one NIO event loop: a task that writes to that loop's channels and awaits
/// their answers resumes on the loop's thread, after what the loop is doing, instead of being
/// handed to Swift's pool and back for each step. What runs here must not block, and the loop
/// must outlive every task that prefers it (NIO drops a job given to a loop that shut down).
final class EventLoopTaskExecutor: TaskExecutor {
    let loop: any EventLoop

    init(_ loop: any EventLoop) { self.loop = loop }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
