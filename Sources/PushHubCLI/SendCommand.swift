import ArgumentParser
import Foundation
import Logging
import PushConfiguration
import PushEnvironment
import PushIngress
import PushKafka
import PushModel

/// `pushhub send`: builds a SendRequest and produces it straight into `pushhub.requests`, the
/// path other services use, after the same checks as the hub API.
struct SendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send", abstract: "Produce a SendRequest into pushhub.requests; prints its notification id.",
        discussion: """
            The hub is checked against pushhub.yaml (--config, $PUSHHUB_CONFIG or ./data/pushhub.yaml) when that file exists. \
            With --wait, waits for the dispatcher's answer on pushhub.results: prints the devices reached per platform, or \
            exits 1 with the reason the send was rejected.

            With --test, the send is a debug send through the hub API (--url, --connection-string, or what pushhub dev \
            prints): it goes to at most 10 of the registrations it matches, and a table shows each one's result from the \
            push service. It exits 1 when any of them failed.

            Examples:
              pushhub send --hub pushhub-dev --format apns --tags 'Sports && !Politics' --body '{"aps":{"alert":"Goal!"}}' --wait
              pushhub send --hub pushhub-dev --format template --tags 'username:demo' --body '{"News":"Markets rally"}'
              echo '{"message":{"data":{"m":"hi"}}}' | pushhub send --hub pushhub-dev --format fcm --handle TOKEN --body -
              pushhub send --test --hub pushhub-dev --format apns --tags 'username:demo' --body '{"aps":{"alert":"Test"}}'
            """)

    @OptionGroup var kafka: KafkaOptions

    @OptionGroup(title: "Debug sends (--test)") var hubAPI: HubAPIOptions

    @Flag(help: "A debug send through the hub API: at most 10 devices, their results printed.")
    var test = false

    @Option(help: "The hub.")
    var hub: String

    @Option(help: "apple (or apns), fcmv1 (fcm), gcm, windows (wns), browser (webpush), hms, adm, xiaomi, baidu or template.")
    var format: String

    @Option(help: "A tag or tag expression; none sends to every registration.")
    var tags: String?

    @Option(help: "A device handle for a direct send (no registration).")
    var handle: String?

    @Option(name: .customLong("header"), help: "A pass-through header, NAME:VALUE (repeatable), e.g. apns-priority:10 or X-WNS-Type:wns/toast.")
    var headers: [String] = []

    @Option(help: "The body: the native payload, or the template properties as a JSON object. '-' reads standard input.")
    var body: String

    @Option(help: "pushhub.yaml, whose hubs --hub must name (default: $PUSHHUB_CONFIG or ./data/pushhub.yaml, when it exists).")
    var config: String?

    @Flag(help: "Wait for the dispatcher's answer; exit 1 when the send was rejected or no answer came within --wait-seconds.")
    var wait = false

    @Option(help: "How long --wait waits.")
    var waitSeconds = 30

    /// The options of the hub API's headers and fields.
    static let flags = [
        "ServiceBusNotification-Format": "--format", "ServiceBusNotification-Tags": "--tags", "audience.tags": "--tags", "body": "--body",
        "devices": "--handle", "Content-Type": "--header Content-Type", "X-WNS-Type": "--header X-WNS-Type",
    ]

    func run() async throws {
        var headerFields: [String: String] = [:]
        for header in headers {
            guard let colon = header.firstIndex(of: ":") else { throw ValidationError("--header takes NAME:VALUE, not \(header)") }
            headerFields[String(header[..<colon])] = String(header[header.index(after: colon)...]).trimmingCharacters(in: .whitespaces)
        }
        guard (1...3600).contains(waitSeconds) else { throw ValidationError("--wait-seconds must be 1 to 3600, not \(waitSeconds)") }
        let hub = try checkedHub()
        let data = body == "-" ? FileHandle.standardInput.readDataToEndOfFile() : Data(body.utf8)
        guard let formatValue = NotificationFormat(named: format) else {
            throw ValidationError("--format must be \(NotificationFormat.names), not \(format)")
        }
        var direct: DirectHandle?
        if let handle {
            guard let platform = formatValue.platform else { throw ValidationError("a direct send (--handle) needs a native --format") }
            direct = DirectHandle(platform: platform, handle: handle)
        }
        let request: SendRequest
        do throws(WireError) {
            // The body is typed as the hub API would require of this format.
            let contentType = try SendRequestBuilder.acceptedContentTypes(for: formatValue, headers: headerFields).first
            request = try SendRequestBuilder().build(
                hub: hub, format: formatValue.rawValue, tags: tags, handles: direct.map { [$0] }, headers: headerFields, body: data,
                contentType: contentType)
        } catch .invalidField(let field, let reason) {
            // Named as the command line names them, not as the hub API's headers.
            throw ValidationError("\(Self.flags[field] ?? field): \(reason)")
        } catch {
            throw ValidationError(error.description)
        }
        if test { return try await debugSend(request, headers: headerFields, direct: direct) }
        let servers = try await kafka.reachableServers()
        var logger = makeLogger("pushhub.send")
        // The answer's reader joining and leaving its group is not news here.
        logger.logLevel = max(logger.logLevel, .warning)
        // The answer is read from the end of pushhub.results, so the reader starts first.
        let answers = try wait ? SendAnswers(servers: servers, topics: kafka.topics, notificationId: request.notificationId, logger: logger) : nil
        _ = await answers?.tail.positioned(within: .seconds(15))
        let producer = try KafkaProducer.make(configuration: KafkaProducerConfiguration(bootstrapServers: servers), logger: logger)
        do {
            try await KafkaNotificationPublisher(producer: producer, topics: kafka.topics).publish(request)
        } catch {
            throw CommandFailure(description: "the send was not acknowledged: \(error)")
        }
        await producer.shutdown()
        emit(request.notificationId)
        guard let answers else { return }
        switch await answers.first(within: .seconds(waitSeconds)) {
        case .dispatched(let counts):
            let reached = Platform.allCases.compactMap { platform in counts[platform].flatMap { $0 > 0 ? "\(platform.rawValue) \($0)" : nil } }
            emit("dispatched to \(counts.values.reduce(0, +)) device(s)\(reached.isEmpty ? "" : ": " + reached.joined(separator: ", "))")
        case .rejected(let reason):
            throw CommandFailure(description: "the send was rejected: \(reason)")
        case nil:
            throw CommandFailure(
                description: "no answer from the dispatcher within \(waitSeconds) s: is pushhub-dispatcher (or pushhub dev) running on this Kafka?")
        }
    }

    /// `POST /{hub}/messages?test` with the request's headers; prints the results as a table.
    func debugSend(_ request: SendRequest, headers: [String: String], direct: DirectHandle?) async throws {
        var fields = headers.map { ($0.key, $0.value) }
        fields.append(("ServiceBusNotification-Format", request.format.rawValue))
        fields.append(
            ("Content-Type", try SendRequestBuilder.acceptedContentTypes(for: request.format, headers: headers).first ?? "application/json"))
        if case .tags(let expression) = request.audience { fields.append(("ServiceBusNotification-Tags", expression)) }
        if let direct { fields.append(("ServiceBusNotification-DeviceHandle", direct.handle)) }
        let response = try await hubAPI.call(
            "POST", hub: request.hub, "/messages?test\(direct == nil ? "" : "&direct")", headers: fields, body: Data(request.body.utf8))
        guard response.status == 201 else {
            throw CommandFailure(
                description: "the hub API answered \(response.status): \(String(decoding: response.body.prefix(500), as: UTF8.self))")
        }
        let outcome = try DebugSendOutcome(xml: response.body)
        let matched = response.headers.first(name: "PushHub-Matched") ?? "?"
        emit("matched \(matched) registration(s); sent to \(outcome.results.count): \(outcome.success) succeeded, \(outcome.failure) failed")
        emit(outcome.table)
        if outcome.failure > 0 { throw ExitCode(1) }
    }

    /// --hub, checked against pushhub.yaml when there is one (named as configured).
    func checkedHub() throws -> String {
        let path = config ?? PushHubEnvironment.current.configPath
        guard config != nil || FileManager.default.fileExists(atPath: path) else { return hub }
        let hubs: HubsConfiguration
        do { hubs = try HubsConfiguration.load(from: path) } catch { throw ValidationError("--config: \(error)") }
        guard let configured = hubs.hub(named: hub) else {
            throw ValidationError("--hub: no hub named \(hub) in \(path) (it has \(hubs.hubs.map(\.name).joined(separator: ", ")))")
        }
        return configured.name
    }
}

/// The dispatcher's answer to one send on `pushhub.results`: its summary, or its rejection.
/// Reading starts at the topic's end as soon as it is made.
struct SendAnswers: Sendable {
    enum Answer: Sendable { case dispatched([Platform: Int]), rejected(String) }

    let tail: SendResultsTail

    init(servers: [String], topics: PushTopics, notificationId id: String, logger: Logger) throws {
        tail = try SendResultsTail(servers: servers, topics: topics, notificationId: id, logger: logger)
    }

    /// The first answer within `timeout`; nil when none came.
    func first(within timeout: Duration) async -> Answer? {
        await tail.read(from: Answer?.none, within: timeout) { answer, batch in
            if let dispatched = batch.dispatched {
                answer = .dispatched(dispatched)
            } else if batch.platform == nil, let rejected = batch.results?.first(where: { $0.outcome == .rejected }) {
                // The dispatcher's own rejection names no platform; a worker's dead-lettered
                // batch does, and says nothing about the send as a whole.
                answer = .rejected(rejected.pnsReason ?? "no reason given")
            }
            return answer != nil
        }.state
    }
}

/// Azure's `NotificationOutcome`, as a debug send answers it.
struct DebugSendOutcome {
    struct Row { var platform, handle, registration, outcome: String }
    var success = 0
    var failure = 0
    var results: [Row] = []

    init(xml: Data) throws {
        let root: XMLNode
        do { root = try XMLNode.parse(xml) } catch { throw CommandFailure(description: "the answer is not XML: \(error)") }
        guard root.name == "NotificationOutcome" else { throw CommandFailure(description: "the answer is a \(root.name), not a NotificationOutcome") }
        success = Int(root.child("Success")?.text ?? "") ?? 0
        failure = Int(root.child("Failure")?.text ?? "") ?? 0
        for result in root.child("Results")?.children ?? [] {
            results.append(
                Row(
                    platform: result.child("ApplicationPlatform")?.text ?? "", handle: result.child("PnsHandle")?.text ?? "",
                    registration: result.child("RegistrationId")?.text ?? "", outcome: result.child("Outcome")?.text ?? ""))
        }
    }

    /// One line per device, in columns.
    var table: String {
        let rows = [Row(platform: "PLATFORM", handle: "HANDLE", registration: "REGISTRATION", outcome: "OUTCOME")] + results
        let widths = [\Row.platform, \Row.handle, \Row.registration].map { path in rows.map { $0[keyPath: path].count }.max() ?? 0 }
        return rows.map { row in
            [row.platform, row.handle, row.registration].enumerated().map { $1.padding(toLength: widths[$0] + 2, withPad: " ", startingAt: 0) }
                .joined() + row.outcome
        }.joined(separator: "\n")
    }
}
