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

            Examples:
              pushhub send --hub pushhub-dev --format apns --tags 'Sports && !Politics' --body '{"aps":{"alert":"Goal!"}}' --wait
              pushhub send --hub pushhub-dev --format template --tags 'username:demo' --body '{"News":"Markets rally"}'
              echo '{"message":{"data":{"m":"hi"}}}' | pushhub send --hub pushhub-dev --format fcm --handle TOKEN --body -
            """)

    @OptionGroup var kafka: KafkaOptions

    @Option(help: "The hub.")
    var hub: String

    @Option(help: "apple (or apns), fcmv1 (fcm), gcm, windows (wns), browser (webpush) or template.")
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
        let servers = try await kafka.reachableServers()
        var logger = makeLogger("pushhub.send")
        // The answer's reader joining and leaving its group is not news here.
        logger.logLevel = max(logger.logLevel, .warning)
        // The answer is read from the end of pushhub.results, so the reader starts first.
        let answers = try wait ? SendAnswers(servers: servers, topics: kafka.topics, notificationId: request.notificationId, logger: logger) : nil
        _ = await answers?.consumer.positioned(within: .seconds(15))
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
final class SendAnswers: Sendable {
    enum Answer: Sendable { case dispatched([Platform: Int]), rejected(String) }

    let consumer: KafkaConsumer
    let reading: Task<Answer?, Never>

    init(servers: [String], topics: PushTopics, notificationId id: String, logger: Logger) throws {
        var configuration = KafkaConsumerConfiguration(bootstrapServers: servers, groupID: "pushhub-send-\(id)")
        configuration.offsetReset = .latest
        let consumer = try KafkaConsumer.make(configuration: configuration, topics: [topics.results], logger: logger)
        self.consumer = consumer
        reading = Task {
            for await record in consumer.records where record.keyString == id {
                guard let batch = try? WireCoding.decode(ResultBatch.self, from: record.value), batch.notificationId == id else { continue }
                if let dispatched = batch.dispatched { return .dispatched(dispatched) }
                // The dispatcher's own rejection names no platform; a worker's dead-lettered
                // batch does, and says nothing about the send as a whole.
                if batch.platform == nil, let rejected = batch.results?.first(where: { $0.outcome == .rejected }) {
                    return .rejected(rejected.pnsReason ?? "no reason given")
                }
            }
            return nil
        }
    }

    /// The first answer within `timeout`; nil when none came.
    func first(within timeout: Duration) async -> Answer? {
        let consumer = self.consumer
        let reading = self.reading
        let timer = Task {
            try await Task.sleep(for: timeout)
            reading.cancel()
        }
        let answer = await reading.value
        timer.cancel()
        await consumer.close()
        return answer
    }
}
