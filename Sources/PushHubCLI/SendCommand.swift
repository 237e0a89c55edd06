import ArgumentParser
import Foundation
import PushEnvironment
import PushIngress
import PushKafka
import PushModel

/// `pushhub send`: builds a SendRequest and produces it straight into `pushhub.requests`, the
/// path other services use, after the same checks as the hub API.
struct SendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send", abstract: "Produce a SendRequest into pushhub.requests; prints its notification id.")

    @OptionGroup var kafka: KafkaOptions

    @Option(help: "The hub.")
    var hub: String

    @Option(help: "apple, gcm, fcmv1, windows, browser or template.")
    var format: String

    @Option(help: "A tag or tag expression; none sends to every registration.")
    var tags: String?

    @Option(help: "A device handle for a direct send (no registration).")
    var handle: String?

    @Option(name: .customLong("header"), help: "A pass-through header, NAME:VALUE (repeatable), e.g. apns-priority:10 or X-WNS-Type:wns/toast.")
    var headers: [String] = []

    @Option(help: "The body: the native payload, or the template properties as a JSON object. '-' reads standard input.")
    var body: String

    func run() async throws {
        var headerFields: [String: String] = [:]
        for header in headers {
            guard let colon = header.firstIndex(of: ":") else { throw ValidationError("--header takes NAME:VALUE, not \(header)") }
            headerFields[String(header[..<colon])] = String(header[header.index(after: colon)...]).trimmingCharacters(in: .whitespaces)
        }
        let data = body == "-" ? FileHandle.standardInput.readDataToEndOfFile() : Data(body.utf8)
        let formatValue = NotificationFormat(rawValue: format.lowercased())
        var direct: DirectHandle?
        if let handle {
            guard let platform = formatValue?.platform else { throw ValidationError("a direct send (--handle) needs a native --format") }
            direct = DirectHandle(platform: platform, handle: handle)
        }
        let request: SendRequest
        do throws(WireError) {
            // The body is typed as the hub API would require of this format.
            var contentType: String?
            if let formatValue { contentType = try SendRequestBuilder.acceptedContentTypes(for: formatValue, headers: headerFields).first }
            request = try SendRequestBuilder().build(
                hub: hub, format: format, tags: tags, handles: direct.map { [$0] }, headers: headerFields, body: data, contentType: contentType)
        } catch {
            throw ValidationError(error.description)
        }
        let producer = try KafkaProducer.make(
            configuration: KafkaProducerConfiguration(bootstrapServers: try kafka.servers()), logger: makeLogger("pushhub.send"))
        do {
            try await KafkaNotificationPublisher(producer: producer, topics: kafka.topics).publish(request)
        } catch {
            throw CommandFailure(description: "the send was not acknowledged: \(error)")
        }
        await producer.shutdown()
        emit(request.notificationId)
    }
}
